// A runner's final report on PostgreSQL (finishReportLockingRun), through
// what its caller sees: two reports finishing the last jobs of one run at
// once, the second waiting for the run's lock the first holds, count the run
// as the first left it (else neither would see the run done, and the run
// would stay `running` with every job finished); a job cancelled while the
// report waited for the lock imposes its status on the task and is left
// alone. SQLite writers hold the database's lock from their start: nothing
// to race there.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { openScratchDatabase } from '../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../test/support/scratch-database.ts';
import { waitingPushRun } from '../../test/support/seeded-runs.ts';
import { testDialects } from '../../test/support/server.ts';
import { ActionStatus } from '../modules/actions-status.ts';
import { findRunForUpdate, insertRunWithJobs } from './action-runs.ts';
import { insertRunner } from './runners.ts';
import type { Tx } from './database.ts';
import { claimNextJob } from './task-claims.ts';
import type { ClaimedJob } from './task-claims.ts';
import { finishReportLockingRun } from './task-reports.ts';
import type { FinishedLockingRun } from './task-reports.ts';

const NOW = 1_800_000_000;
const OWNER = 21;

if (testDialects().includes('postgres')) {
  describe('a final report locking its run [postgres]', () => {
    let scratch: ScratchDatabase;
    let nextRepoId = 500;

    before(async () => {
      scratch = await openScratchDatabase('postgres');
    });
    after(async () => {
      await scratch?.drop();
    });

    /** A run of `legs` jobs in a repository of its own, every one claimed by a runner of that repository. */
    const claimedRun = async (legs: number): Promise<ClaimedJob[]> => {
      const db = scratch.handle.db;
      const repoId = nextRepoId++;
      const label = `finish-${randomUUID().slice(0, 8)}`;
      await db.transaction().execute((tx) =>
        insertRunWithJobs(
          tx,
          waitingPushRun({ repoId, ownerId: OWNER, title: 'finish' }),
          Array.from({ length: legs }, (_, index) => ({
            name: `leg-${index}`,
            jobId: `leg-${index}`,
            handle: randomUUID(),
            needs: [],
            runsOn: [label],
            hasIf: false,
            workflowPayload: `jobs: {leg-${index}: {}}`,
            status: ActionStatus.waiting,
          })),
          NOW,
        ),
      );
      const scope = { ownerId: 0, repoId };
      const runner = await insertRunner(
        db,
        {
          uuid: randomUUID(),
          name: `runner-${randomUUID().slice(0, 8)}`,
          scope,
          labels: [label],
          ephemeral: false,
          tokenHash: randomUUID(),
          tokenLastEight: 'abcdefgh',
        },
        NOW,
      );
      const claims: ClaimedJob[] = [];
      for (let i = 0; i < legs; i += 1) {
        const token = { hash: randomUUID(), lastEight: 'abcdefgh' };
        const claimed = await db
          .transaction()
          .execute((tx) => claimNextJob(tx, scope, [label], undefined, runner.id, token, NOW));
        assert.ok(claimed !== null, 'every leg is claimed');
        claims.push(claimed);
      }
      return claims;
    };

    const finish = (claim: ClaimedJob, tx: Tx) =>
      finishReportLockingRun(
        tx,
        claim.taskId,
        claim.job.id,
        claim.job.runId,
        ActionStatus.success,
        NOW + 1,
        true,
        true,
        { repoId: claim.job.repoId, ownerId: OWNER },
      );

    /** Runs `work` in a transaction that stays open (holding its locks) until the returned commit is called. */
    const holdOpen = async <T>(work: (tx: Tx) => Promise<T>) => {
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let ready!: (value: T) => void;
      const done = new Promise<T>((resolve) => (ready = resolve));
      const committed = scratch.handle.db.transaction().execute(async (tx) => {
        ready(await work(tx));
        await released;
      });
      return { result: await done, commit: async () => (release(), committed) };
    };

    test('two reports finishing the last jobs of a run at once: the second counts the run as the first left it', async () => {
      const [first, second] = await claimedRun(2);
      const held = await holdOpen((tx) => finish(first!, tx));
      assert.deepEqual(held.result?.counts, [
        { status: ActionStatus.running, concurrencyHeld: false, count: 1 },
        { status: ActionStatus.success, concurrencyHeld: false, count: 1 },
      ]);
      let settled = false;
      const waiting = scratch.handle.db.transaction().execute(async (tx) => {
        const finished = await finish(second!, tx);
        settled = true;
        return finished;
      });
      await sleep(200);
      assert.equal(settled, false, "the second report waits for the run's lock");
      await held.commit();
      const finished = (await waiting) as FinishedLockingRun;
      assert.equal(finished.finished, true);
      assert.equal(finished.status, ActionStatus.success);
      assert.deepEqual(finished.counts, [{ status: ActionStatus.success, concurrencyHeld: false, count: 2 }]);
    });

    test('a job cancelled while its report waited for the lock cancels the task and is left alone', async () => {
      const [claim] = await claimedRun(1);
      const db = scratch.handle.db;
      const held = await holdOpen(async (tx) => {
        await findRunForUpdate(tx, claim!.job.runId);
        await tx
          .updateTable('action_run_job')
          .set({ status: ActionStatus.cancelled, stopped: NOW })
          .where('id', '=', claim!.job.id)
          .execute();
      });
      const waiting = db.transaction().execute((tx) => finish(claim!, tx));
      await sleep(200);
      await held.commit();
      const finished = (await waiting) as FinishedLockingRun;
      assert.equal(finished.finished, true, 'the task is finished');
      assert.equal(finished.status, ActionStatus.cancelled, 'with the status its job imposes');
      assert.equal(finished.job, null, 'the job is left as cancelled');
      const task = await db
        .selectFrom('action_task')
        .select('status')
        .where('id', '=', claim!.taskId)
        .executeTakeFirstOrThrow();
      assert.equal(task.status, ActionStatus.cancelled);
    });
  });
}
