// Prepared statements at the PostgreSQL driver, as the server sees them
// (pg_prepared_statements of the pool's one connection): a statement is
// prepared from its third run, a connection never holds more than its cap, a
// failed or aborted transaction leaves no statement pg believes prepared and
// the server does not, and a migration that changes a prepared statement's
// result columns costs a query outside a transaction nothing and one inside a
// retryable error.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { createScratchPgDatabase } from '../../test/support/pg-database.ts';
import type { ScratchPgDatabase } from '../../test/support/pg-database.ts';
import { testDialects } from '../../test/support/server.ts';
import { isRetryableError, openDatabase } from './database.ts';
import type { DatabaseHandle, Db } from './database.ts';
import { NAME_AFTER } from './pg-prepared.ts';

/** The statements the connection holds, without the query asking (never prepared: its text differs each time). */
let asked = 0;
async function preparedTexts(db: Db): Promise<string[]> {
  asked += 1;
  const { rows } = await sql<{
    statement: string;
  }>`select statement from pg_prepared_statements where ${sql.lit(asked)} > 0`.execute(db);
  return rows.map((row) => row.statement).filter((text) => !text.includes('pg_prepared_statements'));
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('expected the query to fail');
}

test('only a stale prepared plan is retryable among feature_not_supported errors', () => {
  const error = (routine: string) => Object.assign(new Error('x'), { code: '0A000', routine });
  assert.equal(isRetryableError(error('RevalidateCachedQuery')), true);
  assert.equal(isRetryableError(error('transformLockingClause')), false);
});

if (testDialects().includes('postgres')) {
  describe('prepared statements [postgres]', () => {
    let scratch: ScratchPgDatabase;
    const handles: DatabaseHandle[] = [];
    /** A pool of one connection, so every query sees the same pg_prepared_statements. */
    const open = (preparedStatements: number): Db => {
      const handle = openDatabase({ databaseUrl: scratch.url, dataDir: '', maxConnections: 1, preparedStatements });
      handles.push(handle);
      return handle.db;
    };

    before(async () => {
      const adminUrl = process.env.GANTRY_TEST_PG_URL;
      if (!adminUrl) throw new Error('GANTRY_TEST_PG_URL is not set');
      scratch = await createScratchPgDatabase(adminUrl);
    });

    after(async () => {
      for (const handle of handles) await handle.destroy();
      await scratch.drop();
    });

    test('a statement is prepared from its third run, and its results stay right', async () => {
      const db = open(10);
      const query = (n: number) => sql<{ n: number }>`select ${n}::int + 1 as n`.execute(db);
      for (let run = 1; run < NAME_AFTER; run++) {
        assert.equal((await query(run)).rows[0]?.n, run + 1);
        assert.deepEqual(await preparedTexts(db), [], `not prepared after ${run} run(s)`);
      }
      for (let run = NAME_AFTER; run < NAME_AFTER + 5; run++) assert.equal((await query(run)).rows[0]?.n, run + 1);
      assert.deepEqual(await preparedTexts(db), ['select $1::int + 1 as n']);
    });

    test('transaction control is never prepared, however often it runs', async () => {
      const db = open(10);
      for (let run = 0; run < NAME_AFTER + 1; run++) {
        await db.transaction().execute((tx) => sql`select 1 as one`.execute(tx));
        await rejection(db.transaction().execute(() => Promise.reject(new Error('undone'))));
      }
      assert.deepEqual(await preparedTexts(db), ['select 1 as one']);
    });

    test('a connection holds at most its cap, however many texts run often', async () => {
      const db = open(4);
      let most = 0;
      for (let i = 0; i < 20; i++) {
        const text = sql<{ n: number }>`select ${sql.lit(i)}::int as n`;
        for (let run = 0; run < NAME_AFTER + 1; run++) assert.equal((await text.execute(db)).rows[0]?.n, i);
        most = Math.max(most, (await preparedTexts(db)).length);
      }
      assert.equal(most, 4);
    });

    test('a statement first prepared in a transaction that fails, or sent in an aborted one, runs afterwards', async () => {
      const db = open(10);
      const query = () => sql<{ n: number }>`select 40 + 2 as n`.execute(db);
      for (let run = 1; run < NAME_AFTER; run++) await query();
      // Its first named run (the server parses it) in a transaction that then fails.
      const failed = db.transaction().execute(async (tx) => {
        assert.equal((await sql<{ n: number }>`select 40 + 2 as n`.execute(tx)).rows[0]?.n, 42);
        await sql`select 1 / 0`.execute(tx);
      });
      assert.match(String(await rejection(failed)), /division by zero/);
      assert.equal((await query()).rows[0]?.n, 42);

      // Another text's first named run sent after the transaction failed: the server refuses to parse it.
      const other = (tx: Db) => sql<{ n: number }>`select 6 * 7 as n`.execute(tx);
      for (let run = 1; run < NAME_AFTER; run++) await other(db);
      const aborted = db.transaction().execute(async (tx) => {
        await rejection(sql`select 1 / 0`.execute(tx));
        await other(tx);
      });
      assert.match(String(await rejection(aborted)), /current transaction is aborted/);
      assert.equal((await other(db)).rows[0]?.n, 42);
      assert.deepEqual((await preparedTexts(db)).sort(), ['select 40 + 2 as n', 'select 6 * 7 as n']);
    });

    test("a migration that changes a prepared statement's columns: retried unprepared, or a retryable error in a transaction", async () => {
      const db = open(10);
      const migrating = open(0);
      await sql`create table widget (id int)`.execute(migrating);
      await sql`insert into widget values (1)`.execute(migrating);
      const all = (on: Db) => sql<Record<string, number>>`select * from widget`.execute(on);
      for (let run = 0; run < NAME_AFTER + 1; run++) await all(db);
      assert.deepEqual(await preparedTexts(db), ['select * from widget']);

      await sql`alter table widget add column size int not null default 7`.execute(migrating);
      assert.deepEqual((await all(db)).rows, [{ id: 1, size: 7 }]);

      // The pool's connection was replaced; the fresh one prepares the text at its first run.
      assert.deepEqual((await all(db)).rows, [{ id: 1, size: 7 }]);
      assert.deepEqual(await preparedTexts(db), ['select * from widget']);
      await sql`alter table widget add column colour int not null default 3`.execute(migrating);
      const error = await rejection(db.transaction().execute((tx) => all(tx)));
      assert.equal(isRetryableError(error), true, String(error));
      assert.deepEqual((await db.transaction().execute((tx) => all(tx))).rows, [{ id: 1, size: 7, colour: 3 }]);
    });
  });
}
