// The server's SQLite connection leaves checkpoints to the checkpoint thread,
// and the write-ahead log still starts over instead of growing with every write.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import BetterSqlite3 from 'better-sqlite3';
import { checkpointOffThread } from './sqlite-checkpoints.ts';

/** About 1.6 MB of new pages in one transaction (400 pages of 4 KiB). */
function writeBatch(db: BetterSqlite3.Database, batch: number): void {
  const insert = db.prepare('INSERT INTO t (batch, body) VALUES (?, ?)');
  db.transaction(() => {
    for (let i = 0; i < 400; i += 1) insert.run(batch, 'x'.repeat(3900));
  })();
}

test('the connection does not checkpoint; the thread does, so the log stays about one batch long', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gantry-checkpoints-'));
  const file = path.join(dir, 'db.sqlite');
  const db = new BetterSqlite3(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, batch INTEGER, body TEXT)');
  const checkpointer = checkpointOffThread(db, file);
  try {
    assert.equal(db.pragma('wal_autocheckpoint', { simple: true }), 0, 'the connection never checkpoints');
    const batches = 5;
    for (let batch = 0; batch < batches; batch += 1) {
      writeBatch(db, batch);
      // Longer than the thread's interval: it has copied the batch by the next write.
      await sleep(1300);
    }
    const walBytes = fs.statSync(`${file}-wal`).size;
    // Without checkpoints the log would hold all five batches (about 8 MB).
    assert.ok(walBytes < 2 * 400 * 4200, `the log is ${walBytes} bytes`);
    assert.equal(db.prepare('SELECT count(*) FROM t').pluck().get(), batches * 400);
  } finally {
    await checkpointer.stop();
    assert.equal(db.pragma('wal_autocheckpoint', { simple: true }), 1000, 'stopped: the connection checkpoints again');
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('under writes that never pause for the thread, the connection copies the rest itself and the log starts over', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gantry-checkpoints-'));
  const file = path.join(dir, 'db.sqlite');
  const db = new BetterSqlite3(file);
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)');
  const checkpointer = checkpointOffThread(db, file);
  try {
    const insert = db.prepare('INSERT INTO t (body) VALUES (?)');
    const commits = 30_000;
    // One page or more per commit; only a turn of the event loop between every 20 commits.
    for (let i = 0; i < commits; i += 1) {
      insert.run('y'.repeat(200));
      if (i % 20 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    const { log } = (db.pragma('wal_checkpoint(PASSIVE)') as { log: number }[])[0] as { log: number };
    assert.ok(log < commits, `the log holds ${log} pages: it started over`);
    assert.equal(db.prepare('SELECT count(*) FROM t').pluck().get(), commits);
  } finally {
    await checkpointer.stop();
    db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
