// The one retryable-error check (run control's and the task claim's retries):
// concurrency failures of either dialect are retried, anything else is not.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { lockRun } from './action-runs.ts';
import { isRetryableError, isUniqueViolation } from './database.ts';
import type { Db, Tx } from './database.ts';

test('PostgreSQL deadlocks and serialization failures, SQLite lock contention are retryable', () => {
  for (const code of ['40P01', '40001', 'SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT'])
    assert.equal(isRetryableError(Object.assign(new Error(code), { code })), true, code);
});

test('constraint violations, other errors and non-errors are not', () => {
  for (const code of ['23505', 'SQLITE_CONSTRAINT_UNIQUE', '42P01', 'ECONNRESET', undefined])
    assert.equal(isRetryableError(Object.assign(new Error('x'), { code })), false, String(code));
  assert.equal(isRetryableError(null), false);
  assert.equal(isRetryableError('SQLITE_BUSY'), false);
});

test('a real SQLITE_BUSY from better-sqlite3 is recognised; a real unique violation is not retryable', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gantry-retryable-'));
  const file = path.join(dir, 'db.sqlite');
  const first = new BetterSqlite3(file);
  const second = new BetterSqlite3(file, { timeout: 0 });
  try {
    first.exec('CREATE TABLE t (id INTEGER PRIMARY KEY)');
    first.exec('BEGIN IMMEDIATE');
    first.exec('INSERT INTO t (id) VALUES (1)');
    const busy = (() => {
      try {
        second.exec('INSERT INTO t (id) VALUES (2)');
      } catch (error) {
        return error;
      }
      return null;
    })();
    assert.equal(isRetryableError(busy), true);
    first.exec('COMMIT');
    const duplicate = (() => {
      try {
        second.exec('INSERT INTO t (id) VALUES (1)');
      } catch (error) {
        return error;
      }
      return null;
    })();
    assert.equal(isUniqueViolation(duplicate), true);
    assert.equal(isRetryableError(duplicate), false);
  } finally {
    first.close();
    second.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a function that must run inside a transaction refuses the bare database (npm run typecheck checks this)', () => {
  // Never called: the @ts-expect-error line fails the typecheck the day
  // lockRun accepts a Kysely<Database> that is not a Transaction again.
  const uses = (db: Db, tx: Tx) => {
    // @ts-expect-error a Kysely<Database> is not a Transaction<Database>
    void lockRun(db, 1);
    void lockRun(tx, 1);
  };
  assert.equal(typeof uses, 'function');
});
