// Statements compiled once and run with each call's values, on each dialect:
// every call sees its own arguments wherever the compiler placed their slots,
// constants stay as built, each shape keeps its own text, and a statement runs
// in the transaction (and savepoint) it is given, never beside it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { openScratchDatabase } from '../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../test/support/scratch-database.ts';
import { testDialects } from '../../test/support/server.ts';
import { compiledStatement } from './compiled-statements.ts';
import type { Queryable } from './database.ts';
import { GroupedWrites } from './grouped-writes.ts';

const NOW = 1_800_000_000;

// Arguments: 0 owner, 1 version; the version's slot comes first in the SQL, the owner's second.
const INSERT_VERSION = compiledStatement((db, arg) =>
  db.insertInto('action_tasks_version').values({
    version: arg<number>(1),
    owner_id: arg<number>(0),
    repo_id: 0,
    created: NOW,
    updated: NOW,
  }),
);

// Shape: how many owners the IN list has; arguments: the owners.
const VERSIONS_OF = compiledStatement((db, arg, shape) =>
  db
    .selectFrom('action_tasks_version')
    .select(['owner_id', 'version', 'created'])
    .where(
      'owner_id',
      'in',
      Array.from({ length: Number(shape) }, (_, i) => arg<number>(i)),
    )
    .orderBy('owner_id'),
);

const BUMP = compiledStatement(
  (_db, arg) =>
    sql`update action_tasks_version set version = version + ${arg<number>(1)} where owner_id = ${arg<number>(0)}`,
);

async function versions(db: Queryable, owners: number[]): Promise<Array<[number, number]>> {
  const { rows } = await VERSIONS_OF.execute(db, owners, String(owners.length));
  return rows.map((row) => [row.owner_id, row.version]);
}

for (const dialect of testDialects()) {
  describe(`compiled statements [${dialect}]`, () => {
    let scratch: ScratchDatabase;

    before(async () => {
      scratch = await openScratchDatabase(dialect);
    });

    after(async () => {
      await scratch?.drop();
    });

    test('each call runs with its own arguments, in the order the SQL takes them; constants stay', async () => {
      const { db } = scratch.handle;
      await INSERT_VERSION.execute(db, [201, 7]);
      await INSERT_VERSION.execute(db, [202, 9]);
      assert.deepEqual(await versions(db, [201, 202]), [
        [201, 7],
        [202, 9],
      ]);
      const { rows } = await VERSIONS_OF.execute(db, [202], '1');
      assert.deepEqual(rows, [{ owner_id: 202, version: 9, created: NOW }]);
      assert.equal(await BUMP.affected(db, [201, 5]), 1);
      assert.equal(await BUMP.affected(db, [299, 5]), 0, 'no row of that owner');
      assert.deepEqual(await versions(db, [201]), [[201, 12]]);
    });

    test('each shape keeps its own text: IN lists of several lengths, and more shapes than are kept', async () => {
      const { db } = scratch.handle;
      for (let owner = 300; owner < 380; owner += 1) await INSERT_VERSION.execute(db, [owner, owner - 300]);
      for (let n = 1; n <= 80; n += 1) {
        const owners = Array.from({ length: n }, (_, i) => 300 + i);
        const found = await versions(db, owners);
        assert.equal(found.length, n, `an IN list of ${n}`);
        assert.deepEqual(found.at(-1), [299 + n, n - 1]);
      }
      // A shape seen before the cache was cleared still compiles again correctly.
      assert.deepEqual(await versions(db, [305, 301]), [
        [301, 1],
        [305, 5],
      ]);
    });

    test('an argument the statement needs but the call lacks fails before anything runs', async () => {
      await assert.rejects(INSERT_VERSION.execute(scratch.handle.db, [400]), /argument 1 missing/);
    });

    test('runs in the transaction it is given: rolled back with it, and with a grouped unit that throws', async () => {
      const { db } = scratch.handle;
      await assert.rejects(
        db.transaction().execute(async (tx) => {
          await INSERT_VERSION.execute(tx, [500, 1]);
          assert.deepEqual(await versions(tx, [500]), [[500, 1]], 'seen inside its transaction');
          throw new Error('roll back');
        }),
        /roll back/,
      );
      assert.deepEqual(await versions(db, [500]), [], 'gone with the transaction');

      const writes = new GroupedWrites(db);
      const outcomes = await Promise.allSettled([
        writes.run((tx) => INSERT_VERSION.execute(tx, [501, 1])),
        writes.run(async (tx) => {
          await INSERT_VERSION.execute(tx, [502, 1]);
          throw new Error('undo this unit');
        }),
        writes.run((tx) => INSERT_VERSION.execute(tx, [503, 1])),
      ]);
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ['fulfilled', 'rejected', 'fulfilled'],
      );
      assert.deepEqual(await versions(db, [501, 502, 503]), [
        [501, 1],
        [503, 1],
      ]);
    });
  });
}
