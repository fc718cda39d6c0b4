// A compiled read on SQLite runs at once when no transaction is open, and
// takes the driver's path (waiting for the connection) otherwise, so it never
// answers rows another caller has not committed. On PostgreSQL every read
// takes the driver's path.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { openScratchDatabase } from '../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../test/support/scratch-database.ts';
import { testDialects } from '../../test/support/server.ts';
import { insertVariable } from './action-variables.ts';
import { compiledStatement } from './compiled-statements.ts';
import { findScopedValue } from './scoped-values.ts';
import { readDirectly } from './sqlite-direct-reads.ts';

const NOW = 1_800_000_000;
const COUNT = compiledStatement((db, arg) =>
  db
    .selectFrom('action_variable')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('repo_id', '=', arg<number>(0)),
);
const COUNT_SQL = (scratch: ScratchDatabase) =>
  scratch.handle.db
    .selectFrom('action_variable')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('repo_id', '=', 1)
    .compile().sql;

for (const dialect of testDialects()) {
  describe(`compiled reads outside transactions [${dialect}]`, () => {
    let scratch: ScratchDatabase;
    before(async () => {
      scratch = await openScratchDatabase(dialect);
    });
    after(async () => {
      await scratch?.drop();
    });

    test('answered at once on SQLite when no transaction is open; through the driver otherwise', async () => {
      const { db } = scratch.handle;
      const sql = COUNT_SQL(scratch);
      const direct = readDirectly<{ n: number }>(db, sql, [7001]);
      if (dialect === 'postgres') assert.equal(direct, null);
      else assert.deepEqual(direct, { rows: [{ n: 0 }] });
      await db.transaction().execute(async (tx) => {
        await insertVariable(tx, { ownerId: 0, repoId: 7001 }, 'IN_TX', 'v', NOW);
        assert.equal(readDirectly(tx, sql, [7001]), null, 'a transaction reads on its own connection');
        assert.equal(readDirectly(db, sql, [7001]), null, 'while a transaction is open');
      });
      assert.equal(
        readDirectly(db, 'DELETE FROM action_variable WHERE repo_id = ?', [7001]),
        null,
        'a statement that writes',
      );
      assert.equal(
        readDirectly(
          db,
          "INSERT INTO action_variable (owner_id, repo_id, name, data, created_unix, updated_unix) VALUES (0, 7001, 'RETURNED', 'v', 1, 1) RETURNING id",
          [],
        ),
        null,
        'a statement that writes and returns rows',
      );
      assert.deepEqual((await COUNT.execute(db, [7001])).rows, [{ n: 1 }]);
    });

    test("a read while another caller's transaction is open sees none of its rows until it commits", async () => {
      const { db } = scratch.handle;
      const key = { ownerId: 0, repoId: 7002 };
      await insertVariable(db, key, 'BEFORE', 'committed', NOW);
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let inserted!: () => void;
      const insertedInTx = new Promise<void>((resolve) => (inserted = resolve));
      const writer = db.transaction().execute(async (tx) => {
        await insertVariable(tx, key, 'UNCOMMITTED', 'not yet', NOW);
        await tx.updateTable('action_variable').set({ data: 'changed' }).where('name', '=', 'BEFORE').execute();
        inserted();
        await held;
      });
      await insertedInTx;
      const reads = Promise.all([
        findScopedValue(db, 'action_variable', key, 'UNCOMMITTED'),
        findScopedValue(db, 'action_variable', key, 'BEFORE'),
      ]);
      const early = await Promise.race([
        reads.then(([added, before]) => ({ added: added?.data ?? null, before: before?.data ?? null })),
        new Promise<'waiting'>((resolve) => setTimeout(() => resolve('waiting'), 50)),
      ]);
      // SQLite waits for the connection; PostgreSQL reads the committed rows at once.
      if (early !== 'waiting') assert.deepEqual(early, { added: null, before: 'committed' });
      release();
      await writer;
      const [added, before] = await reads;
      if (early === 'waiting') {
        assert.equal(dialect, 'sqlite');
        assert.equal(added?.data, 'not yet');
        assert.equal(before?.data, 'changed');
      }
      const after = await findScopedValue(db, 'action_variable', key, 'UNCOMMITTED');
      assert.equal(after?.data, 'not yet');
    });
  });
}
