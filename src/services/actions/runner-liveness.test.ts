// A runner's liveness as its status reads it: a report that makes an idle
// runner active is written at once; the reports of a runner already active
// are written together a moment later, and it never reads idle meanwhile
// (on PostgreSQL a runner whose row a claim holds is skipped, then written at
// once by its next report before it could read idle). On SQLite a write at
// once is a unit of the grouped writes, committed with the others of its turn.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { openScratchDatabase } from '../../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../../test/support/scratch-database.ts';
import { testDialects } from '../../../test/support/server.ts';
import type { Db } from '../../models/database.ts';
import { GroupedWrites } from '../../models/grouped-writes.ts';
import { insertRunner } from '../../models/runners.ts';
import { RunnerLiveness } from './runner-liveness.ts';
import { runnerStatus } from './runners.ts';

const T0 = 1_800_000_000;

/** `count` runners of the instance, last seen 100 s before T0. */
function insertRunners(db: Db, count: number) {
  return Promise.all(
    Array.from({ length: count }, () =>
      insertRunner(
        db,
        {
          uuid: randomUUID(),
          name: `runner-${randomUUID().slice(0, 8)}`,
          scope: { ownerId: 0, repoId: 0 },
          ephemeral: false,
          tokenHash: randomUUID(),
          tokenLastEight: 'abcdefgh',
        },
        T0 - 100,
      ),
    ),
  );
}

for (const dialect of testDialects()) {
  describe(`runner liveness [${dialect}]`, () => {
    let scratch: ScratchDatabase;
    before(async () => {
      scratch = await openScratchDatabase(dialect);
    });
    after(async () => {
      await scratch?.drop();
    });

    test('a report makes an idle runner active at once; an active one is refreshed with the others', async () => {
      const db = scratch.handle.db;
      let now = T0;
      const clock = { nowSec: () => now, nowMs: () => now * 1000 };
      const liveness = new RunnerLiveness(db, clock);
      const runners = await insertRunners(db, 2);
      const stored = async (id: number) => {
        const row = await db
          .selectFrom('action_runner')
          .select(['last_online', 'last_active'])
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        return { lastOnline: Number(row.last_online), lastActive: Number(row.last_active) };
      };
      const report = (id: number) =>
        liveness.touchUnlessWrite(id, { online: 0, active: 0 }, true) ??
        liveness.touch(id, { online: 0, active: 0 }, true);
      for (const runner of runners) {
        assert.equal(runnerStatus(await stored(runner.id), now * 1000), 'offline');
        await report(runner.id);
        assert.equal(runnerStatus(await stored(runner.id), now * 1000), 'active', 'written at once');
      }
      // Busy runners reporting every second: queued, and written together.
      for (let second = 1; second <= 4; second += 1) {
        now = T0 + second;
        for (const runner of runners) {
          const last = liveness.touchUnlessWrite(runner.id, { online: 0, active: 0 }, true);
          assert.deepEqual(last, { online: now, active: now }, 'queued, in effect now');
          assert.equal(runnerStatus(await stored(runner.id), now * 1000), 'active');
        }
      }
      await liveness.flush();
      for (const runner of runners)
        assert.deepEqual(await stored(runner.id), { lastOnline: T0 + 4, lastActive: T0 + 4 });
      // Silent for long enough to read idle: the next report is written at once again.
      now = T0 + 20;
      assert.equal(runnerStatus(await stored(runners[0]!.id), now * 1000), 'idle');
      assert.equal(liveness.touchUnlessWrite(runners[0]!.id, { online: 0, active: 0 }, true), null);
      await liveness.touch(runners[0]!.id, { online: 0, active: 0 }, true);
      assert.equal(runnerStatus(await stored(runners[0]!.id), now * 1000), 'active');
      if (dialect !== 'postgres') return;
      // A row a claim holds is skipped, not waited for; its runner is written at once before it could read idle.
      await liveness.touch(runners[1]!.id, { online: 0, active: 0 }, true);
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let locked!: () => void;
      const isLocked = new Promise<void>((resolve) => (locked = resolve));
      const holding = db.transaction().execute(async (tx) => {
        await tx.selectFrom('action_runner').select('id').where('id', '=', runners[1]!.id).forUpdate().execute();
        locked();
        await released;
      });
      await isLocked;
      now = T0 + 21;
      for (const runner of runners)
        assert.notEqual(liveness.touchUnlessWrite(runner.id, { online: 0, active: 0 }, true), null);
      await liveness.flush();
      release();
      await holding;
      assert.deepEqual(await stored(runners[0]!.id), { lastOnline: T0 + 21, lastActive: T0 + 21 });
      assert.deepEqual(await stored(runners[1]!.id), { lastOnline: T0 + 20, lastActive: T0 + 20 }, 'skipped');
      now = T0 + 25;
      assert.equal(liveness.touchUnlessWrite(runners[1]!.id, { online: 0, active: 0 }, true), null, 'written at once');
    });

    test('writes at once through the grouped writes: each awaited, written before a unit submitted after it', async () => {
      const db = scratch.handle.db;
      const clock = { nowSec: () => T0, nowMs: () => T0 * 1000 };
      const writes = new GroupedWrites(db);
      const liveness = new RunnerLiveness(db, clock, writes);
      const runners = await insertRunners(db, 3);
      const ids = runners.map((runner) => runner.id);
      // A unit submitted in the same turn, after the writes, runs after them (on SQLite in their transaction).
      const touched = ids.map((id) => liveness.touch(id, { online: 0, active: 0 }, true));
      const seen = writes.run(async (tx) => {
        const rows = await tx.selectFrom('action_runner').select('last_active').where('id', 'in', ids).execute();
        return rows.map((row) => Number(row.last_active));
      });
      for (const last of await Promise.all(touched)) assert.deepEqual(last, { online: T0, active: T0 });
      assert.deepEqual(await seen, [T0, T0, T0], 'the writes ran before the unit submitted after them');
      const rows = await db.selectFrom('action_runner').select('last_active').where('id', 'in', ids).execute();
      for (const row of rows)
        assert.equal(runnerStatus({ lastOnline: T0, lastActive: Number(row.last_active) }, T0 * 1000), 'active');
    });
  });
}
