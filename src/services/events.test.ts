// Domain events through grouped write transactions (grouped-writes.ts), as a
// subscriber sees them: the after-commit work of each unit runs once the
// group has committed, once even when the group ran again (a unit failed
// after it wrote), and a unit rolled back drops its own events, not the
// others'.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { openScratchDatabase } from '../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../test/support/scratch-database.ts';
import { testDialects } from '../../test/support/server.ts';
import { openDatabase } from '../models/database.ts';
import type { DatabaseHandle, Queryable } from '../models/database.ts';
import { GroupedWrites } from '../models/grouped-writes.ts';
import { DomainEvents } from './events.ts';

const NOW = 1_800_000_000;

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
  describe(`domain events in grouped writes [${dialect}]`, () => {
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

    test('each unit reaches the after-commit handlers once committed; a unit rolled back drops its events alone', async () => {
      const writes = new GroupedWrites(scratch.handle.db);
      const events = new DomainEvents();
      // What another connection saw when each unit's after-commit work ran.
      const afterCommit = new Map<number, number[]>();
      const handled: number[] = [];
      events.afterCommit(async (event) => {
        if (event.type !== 'actions.jobs.superseded') return;
        handled.push(event.jobIds[0] ?? 0);
        afterCommit.set(event.jobIds[0] ?? 0, await versionOwners(other.db));
      });
      const unit = (ownerId: number, fail: boolean) =>
        events.groupedTransaction(writes, async (tx) => {
          await insertVersion(tx, ownerId);
          await events.record(tx, { type: 'actions.jobs.superseded', jobIds: [ownerId] });
          if (fail) throw new Error(`unit ${ownerId} fails`);
          return ownerId;
        });
      const outcomes = await Promise.allSettled([unit(301, false), unit(302, true), unit(303, false)]);
      assert.deepEqual(
        outcomes.map((outcome) => outcome.status),
        ['fulfilled', 'rejected', 'fulfilled'],
      );
      assert.deepEqual([...afterCommit.keys()].sort(), [301, 303], 'the rolled-back unit ran no after-commit work');
      assert.deepEqual(handled.sort(), [301, 303], 'each event reached the handlers once');
      for (const [ownerId, seen] of afterCommit)
        assert.ok(seen.includes(ownerId), `unit ${ownerId}'s after-commit work ran before its commit`);
      assert.ok(!(await versionOwners(other.db)).includes(302));
    });
  });
}
