// The rows behind concurrency groups on each dialect: the unfinished members
// of a group and which are held, holding and releasing a run's jobs, and (on
// PostgreSQL, where two processes write at once) the group lock: a second
// "check the group" waits for the transaction holding it and then sees what
// that transaction wrote.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { openScratchDatabase } from '../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../test/support/scratch-database.ts';
import { testDialects } from '../../test/support/server.ts';
import { ActionStatus } from '../modules/actions-status.ts';
import type { ActionStatusValue } from '../modules/actions-status.ts';
import { insertRunWithJobs, listJobsOfRun } from './action-runs.ts';
import type { Queryable, Tx } from './database.ts';
import { Transaction } from 'kysely';
import { openDatabase } from './database.ts';
import {
  holdWaitingJobs,
  listUnfinishedMembers,
  lockConcurrencyGroups,
  releaseHeldJobs,
  runHasHeldJobs,
} from './concurrency-groups.ts';
import type { GroupMember } from './concurrency-groups.ts';

const REPO = 7;

/** Inserts in `db` when it is a transaction (the lock test's), else in a transaction of its own. */
async function addRun(db: Queryable, group: string, status: ActionStatusValue = ActionStatus.waiting): Promise<number> {
  const insert = (tx: Tx) =>
    insertRunWithJobs(
      tx,
      {
        repoId: REPO,
        ownerId: 1,
        title: 't',
        workflowId: 'ci.yml',
        workflowDirectory: '.forgejo/workflows',
        triggerUserId: 1,
        ref: 'refs/heads/main',
        commitSha: 'abc',
        event: 'workflow_dispatch',
        eventPayload: '{}',
        triggerEvent: 'workflow_dispatch',
        status,
        concurrencyGroup: group,
        concurrencyType: 1,
      },
      [
        {
          name: 'work',
          jobId: 'work',
          handle: `h-${group}-${Math.random()}`,
          needs: [],
          runsOn: ['x'],
          hasIf: false,
          workflowPayload: '',
          status,
        },
      ],
      1000,
    );
  const created = db instanceof Transaction ? await insert(db) : await db.transaction().execute(insert);
  return created.run.id;
}

for (const dialect of testDialects()) {
  describe(`concurrency group rows [${dialect}]`, () => {
    let scratch: ScratchDatabase;

    before(async () => {
      scratch = await openScratchDatabase(dialect);
    });
    after(async () => {
      await scratch?.drop();
    });

    test('unfinished members oldest first, held ones marked; hold and release move only the flag and status', async () => {
      const db = scratch.handle.db;
      const done = await addRun(db, 'members', ActionStatus.success);
      const first = await addRun(db, 'members');
      const second = await addRun(db, 'members');
      await addRun(db, 'elsewhere');
      assert.deepEqual(await holdWaitingJobs(db, second, 1001), [(await listJobsOfRun(db, second))[0]?.id]);
      assert.deepEqual(await listUnfinishedMembers(db, REPO, 'members'), [
        { runId: first, held: false },
        { runId: second, held: true },
      ]);
      assert.deepEqual(await listUnfinishedMembers(db, REPO, 'members', first), [{ runId: second, held: true }]);
      assert.ok(!(await listUnfinishedMembers(db, REPO, 'members')).some((m) => m.runId === done));
      assert.equal(await runHasHeldJobs(db, second), true);
      const [held] = await listJobsOfRun(db, second);
      assert.deepEqual([held?.status, held?.concurrencyHeld], [ActionStatus.blocked, true]);

      assert.equal((await releaseHeldJobs(db, second, 1002)).length, 1);
      const [released] = await listJobsOfRun(db, second);
      assert.deepEqual([released?.status, released?.concurrencyHeld], [ActionStatus.blocked, false]);
      assert.equal(await runHasHeldJobs(db, second), false);
    });

    test('the group lock makes a second check wait for the holder, then see what it wrote', async (t) => {
      if (dialect !== 'postgres' || scratch.url === null) {
        t.skip('SQLite runs one writer at a time');
        return;
      }
      const other = openDatabase({ databaseUrl: scratch.url, dataDir: '' });
      try {
        let open!: () => void;
        const gate = new Promise<void>((resolve) => (open = resolve));
        let holding!: () => void;
        const locked = new Promise<void>((resolve) => (holding = resolve));
        const holder = scratch.handle.db.transaction().execute(async (tx) => {
          await lockConcurrencyGroups(tx, REPO);
          holding();
          await gate;
          return addRun(tx, 'locked');
        });
        await locked;
        let seen: GroupMember[] | undefined;
        const checker = other.db.transaction().execute(async (tx) => {
          await lockConcurrencyGroups(tx, REPO);
          seen = await listUnfinishedMembers(tx, REPO, 'locked');
        });
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.equal(seen, undefined, 'the second check waits for the lock');
        open();
        const runId = await holder;
        await checker;
        assert.deepEqual(seen, [{ runId, held: false }], 'and then sees the run the holder inserted');
      } finally {
        await other.destroy();
      }
    });
  });
}
