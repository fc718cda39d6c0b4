// Grouped write transactions on each dialect, as a caller sees them: units
// submitted together each keep their own outcome (one that throws is undone
// alone, its caller gets its error, the others' writes stay), and a unit's
// promise settles only when its writes are committed, visible to another
// connection of the database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { openScratchDatabase } from '../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../test/support/scratch-database.ts';
import { testDialects } from '../../test/support/server.ts';
import { openDatabase } from './database.ts';
import type { DatabaseHandle, Queryable } from './database.ts';
import { compiledStatement } from './compiled-statements.ts';
import { GroupedWrites } from './grouped-writes.ts';
import { countTurns } from '../../test/support/event-loop-turns.ts';

const NOW = 1_800_000_000;
const INSERT_VERSION = compiledStatement((db, arg) =>
  db.insertInto('action_tasks_version').values({
    owner_id: arg<number>(0),
    repo_id: 0,
    version: 1,
    created: arg<number>(1),
    updated: arg<number>(1),
  }),
);
const TOUCH_VERSION = compiledStatement((db, arg) =>
  db
    .updateTable('action_tasks_version')
    .set({ updated: arg<number>(1) })
    .where('owner_id', '=', arg<number>(0)),
);
const VERSION_OF = compiledStatement((db, arg) =>
  db.selectFrom('action_tasks_version').select(['owner_id', 'updated']).where('owner_id', '=', arg<number>(0)),
);

async function insertVersion(db: Queryable, ownerId: number): Promise<void> {
  await db
    .insertInto('action_tasks_version')
    .values({ owner_id: ownerId, repo_id: 0, version: 1, created: NOW, updated: NOW })
    .execute();
}

async function versionOwners(db: Queryable): Promise<number[]> {
  const rows = await db.selectFrom('action_tasks_version').select('owner_id').orderBy('owner_id').execute();
  return rows.map((row) => row.owner_id);
}

for (const dialect of testDialects()) {
  describe(`grouped writes [${dialect}]`, () => {
    let scratch: ScratchDatabase;
    let other: DatabaseHandle;

    before(async () => {
      scratch = await openScratchDatabase(dialect);
      // A second connection: it sees only what was committed.
      other = openDatabase({ databaseUrl: scratch.url, dataDir: scratch.dataDir ?? '' });
    });

    after(async () => {
      await other?.destroy();
      await scratch?.drop();
    });

    test('units submitted together: each keeps its own outcome, and settles once its writes are committed', async () => {
      const writes = new GroupedWrites(scratch.handle.db);
      const seenBySecondConnection = new Map<number, number[]>();
      const unit = (ownerId: number, fail: boolean) =>
        writes
          .run(async (tx) => {
            await insertVersion(tx, ownerId);
            if (fail) throw new Error(`unit ${ownerId} fails`);
            return ownerId;
          })
          .then(async (value) => {
            seenBySecondConnection.set(ownerId, await versionOwners(other.db));
            return value;
          });
      const outcomes = await Promise.allSettled([
        unit(101, false),
        unit(102, true),
        unit(103, false),
        unit(104, true),
        unit(105, true),
        unit(106, false),
      ]);
      assert.deepEqual(outcomes[0], { status: 'fulfilled', value: 101 });
      assert.equal(outcomes[1]?.status, 'rejected');
      assert.match(String((outcomes[1] as PromiseRejectedResult).reason), /unit 102 fails/);
      assert.deepEqual(outcomes[2], { status: 'fulfilled', value: 103 });
      assert.match(String((outcomes[3] as PromiseRejectedResult).reason), /unit 104 fails/);
      assert.match(String((outcomes[4] as PromiseRejectedResult).reason), /unit 105 fails/);
      assert.deepEqual(outcomes[5], { status: 'fulfilled', value: 106 });
      assert.deepEqual(await versionOwners(scratch.handle.db), [101, 103, 106], 'the failed units alone were undone');
      assert.deepEqual([...seenBySecondConnection.keys()].sort(), [101, 103, 106]);
      for (const [ownerId, seen] of seenBySecondConnection) {
        assert.ok(seen.includes(ownerId), `unit ${ownerId} settled before another connection could see its row`);
        assert.ok(!seen.includes(102) && !seen.includes(104) && !seen.includes(105));
      }
    });

    test('a unit that throws before it writes fails alone: the others run once and stay', async () => {
      const writes = new GroupedWrites(scratch.handle.db);
      const runs = new Map<number, number>();
      const unit = (ownerId: number, fail: boolean) =>
        writes.run(async (tx) => {
          runs.set(ownerId, (runs.get(ownerId) ?? 0) + 1);
          if (fail) throw new Error(`unit ${ownerId} refuses`);
          await insertVersion(tx, ownerId);
          return ownerId;
        });
      const outcomes = await Promise.allSettled([unit(401, false), unit(402, true), unit(403, false)]);
      assert.deepEqual(
        outcomes.map((outcome) => outcome.status),
        ['fulfilled', 'rejected', 'fulfilled'],
      );
      assert.match(String((outcomes[1] as PromiseRejectedResult).reason), /unit 402 refuses/);
      const owners = await versionOwners(other.db);
      assert.ok(owners.includes(401) && owners.includes(403) && !owners.includes(402));
      if (dialect === 'sqlite')
        assert.deepEqual([...runs.values()], [1, 1, 1], 'nothing to undo: the group did not run again');
    });

    test("compiled statements in a group answer as the driver does, and see the group's own writes", async () => {
      const writes = new GroupedWrites(scratch.handle.db);
      const unit = (ownerId: number) =>
        writes.run(async (tx) => {
          const inserted = await INSERT_VERSION.execute(tx, [ownerId, NOW]);
          const updated = await TOUCH_VERSION.execute(tx, [ownerId, NOW + 1]);
          const read = await VERSION_OF.execute(tx, [ownerId]);
          return { inserted, updated, rows: read.rows };
        });
      const [first, second] = await Promise.all([unit(501), unit(502)]);
      for (const [ownerId, result] of [
        [501, first],
        [502, second],
      ] as const) {
        assert.equal(result?.inserted.numAffectedRows, 1n);
        if (dialect === 'sqlite') assert.equal(typeof result?.inserted.insertId, 'bigint');
        assert.equal(result?.updated.numAffectedRows, 1n);
        assert.deepEqual(result?.rows, [{ owner_id: ownerId, updated: NOW + 1 }]);
      }
      assert.ok((await versionOwners(other.db)).includes(502));
    });

    test('the units a full group left run in the next turn of the event loop, with the requests read meanwhile', async () => {
      const writes = new GroupedWrites(scratch.handle.db);
      // Turns of the event loop, counted from here.
      const turns = countTurns();
      const ranAt: number[] = [];
      // More units than one group takes (64): the last ones form a second group.
      const units = Array.from({ length: 70 }, (_, i) =>
        writes.run(async (tx) => {
          ranAt[i] = turns.now;
          await insertVersion(tx, 600 + i);
          return i;
        }),
      );
      // Settled before the second group starts: a caller answers as soon as its group committed.
      let secondRanFirst: boolean | null = null;
      void units[0]?.then(() => (secondRanFirst = ranAt[69] !== undefined));
      await Promise.all(units);
      turns.stop();
      if (dialect === 'sqlite') {
        assert.equal(secondRanFirst, false, "the first group's callers settle before the second group runs");
        assert.equal((ranAt[69] ?? 0) - (ranAt[0] ?? 0), 1, 'the second group runs one turn after the first');
      }
    });

    test("a group's callers resume one after the other, each done before the next resumes", async () => {
      const writes = new GroupedWrites(scratch.handle.db);
      const seen: string[] = [];
      // Each caller, once its unit committed, goes through a few promise jobs before it answers.
      const callers = [0, 1, 2].map(async (i) => {
        await writes.run(async (tx) => insertVersion(tx, 700 + i));
        seen.push(`resumed ${i}`);
        for (let step = 0; step < 5; step += 1) await Promise.resolve();
        seen.push(`answered ${i}`);
      });
      await Promise.all(callers);
      if (dialect === 'sqlite')
        assert.deepEqual(seen, ['resumed 0', 'answered 0', 'resumed 1', 'answered 1', 'resumed 2', 'answered 2']);
      else assert.equal(seen.length, 6);
    });

    test('a unit alone that throws leaves nothing, and the next one runs', async () => {
      const writes = new GroupedWrites(scratch.handle.db);
      await assert.rejects(
        writes.run(async (tx) => {
          await insertVersion(tx, 201);
          throw new Error('alone');
        }),
        /alone/,
      );
      assert.equal(
        await writes.run(async (tx) => {
          await insertVersion(tx, 202);
          return 'next';
        }),
        'next',
      );
      const owners = await versionOwners(other.db);
      assert.ok(!owners.includes(201));
      assert.ok(owners.includes(202));
    });
  });
}
