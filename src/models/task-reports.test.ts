// A runner's final report on PostgreSQL (finishReportLockingRun), through
// what its caller sees: two reports finishing the last jobs of one run at
// once, the second waiting for the run's lock the first holds, count the run
// as the first left it (else neither would see the run done, and the run
// would stay `running` with every job finished); a job cancelled while the
// report waited for the lock imposes its status on the task and is left
// alone. A final report that finishes alone (finishReportAlone, one
// autocommitted statement) does so only while the run keeps its status and
// nothing else is due, and writes nothing otherwise: not when the run would
// end (also when the leg that ends it waited for the lock of the one before),
// nor for a webhook, a commit status, a dependant or another runner's task.
// Several final reports in one statement (finishReportsAlone) each get what
// they would alone: a run's legs finish together while the run keeps its
// status (all but the last when the last ends it), a run with a job cancelled
// meanwhile leaves its legs to transactions without holding back another
// run's, and a run cancelled meanwhile answers its legs cancelled.
// SQLite writers hold the database's lock from their start: nothing to race
// there.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { openScratchDatabase } from '../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../test/support/scratch-database.ts';
import { waitingPushRun } from '../../test/support/seeded-runs.ts';
import { testDialects } from '../../test/support/server.ts';
import { ActionStatus } from '../modules/actions-status.ts';
import type { ActionStatusValue } from '../modules/actions-status.ts';
import { findRunForUpdate, insertRunWithJobs } from './action-runs.ts';
import { insertRunner } from './runners.ts';
import type { Tx } from './database.ts';
import { claimNextJob, insertTaskSteps } from './task-claims.ts';
import type { ClaimedJob } from './task-claims.ts';
import { finishReportAlone, finishReportLockingRun, finishReportsAlone } from './task-reports.ts';
import type { FinishedAlone, FinishedLockingRun } from './task-reports.ts';

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

    /** An active webhook on the repository: a finish must then write its events too. */
    const addActiveHook = (repoId: number) =>
      scratch.handle.db
        .insertInto('webhook')
        .values({
          repo_id: repoId,
          type: 'forgejo',
          url: 'http://127.0.0.1:1/hook',
          content_type: 'json',
          events: '[]',
          is_active: 1,
          created: NOW,
          updated: NOW,
        })
        .execute();

    /**
     * A run of `legs` jobs in a repository of its own, every one claimed by a
     * runner of that repository (a dispatched run unless `event` says; with
     * `dependant`, one more job that needs them all, blocked).
     */
    const claimedRun = async (
      legs: number,
      event = 'workflow_dispatch',
      dependant = false,
    ): Promise<Array<ClaimedJob & { runnerId: number }>> => {
      const db = scratch.handle.db;
      const repoId = nextRepoId++;
      const label = `finish-${randomUUID().slice(0, 8)}`;
      const names = Array.from({ length: legs }, (_, index) => `leg-${index}`);
      const job = (name: string, needs: string[]) => ({
        name,
        jobId: name,
        handle: randomUUID(),
        needs,
        runsOn: [label],
        hasIf: false,
        workflowPayload: `jobs: {${name}: {}}`,
        status: needs.length > 0 ? ActionStatus.blocked : ActionStatus.waiting,
      });
      await db
        .transaction()
        .execute((tx) =>
          insertRunWithJobs(
            tx,
            { ...waitingPushRun({ repoId, ownerId: OWNER, title: 'finish' }), event, triggerEvent: event },
            [...names.map((name) => job(name, [])), ...(dependant ? [job('after', names)] : [])],
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
      const claims: Array<ClaimedJob & { runnerId: number }> = [];
      for (let i = 0; i < legs; i += 1) {
        const token = { hash: randomUUID(), lastEight: 'abcdefgh' };
        const claimed = await db
          .transaction()
          .execute((tx) => claimNextJob(tx, scope, [label], undefined, runner.id, token, NOW));
        assert.ok(claimed !== null, 'every leg is claimed');
        claims.push({ ...claimed, runnerId: runner.id });
      }
      // As the claims' settle leaves it.
      await db
        .updateTable('action_run')
        .set({ status: ActionStatus.running, started: NOW })
        .where('id', '=', claims[0]!.job.runId)
        .execute();
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

    /** Holds the claim's run locked, as a cancel does, with its job already cancelled inside that transaction. */
    const cancelUnderRunLock = (claim: ClaimedJob) =>
      holdOpen(async (tx) => {
        await findRunForUpdate(tx, claim.job.runId);
        await tx
          .updateTable('action_run_job')
          .set({ status: ActionStatus.cancelled, stopped: NOW })
          .where('id', '=', claim.job.id)
          .execute();
      });

    const alone = (claim: ClaimedJob & { runnerId: number }, status: ActionStatusValue = ActionStatus.success) =>
      finishReportAlone(scratch.handle.db, claim.taskId, claim.runnerId, status, NOW + 1);

    const statusOf = async (claim: ClaimedJob) => {
      const db = scratch.handle.db;
      const task = await db
        .selectFrom('action_task')
        .select('status')
        .where('id', '=', claim.taskId)
        .executeTakeFirstOrThrow();
      const job = await db
        .selectFrom('action_run_job')
        .select('status')
        .where('id', '=', claim.job.id)
        .executeTakeFirstOrThrow();
      const run = await db
        .selectFrom('action_run')
        .select('status')
        .where('id', '=', claim.job.runId)
        .executeTakeFirstOrThrow();
      return { task: task.status, job: job.status, run: run.status };
    };

    const running = { task: ActionStatus.running, job: ActionStatus.running, run: ActionStatus.running };

    const together = (
      claims: Array<ClaimedJob & { runnerId: number }>,
      status: ActionStatusValue = ActionStatus.success,
    ) =>
      finishReportsAlone(
        scratch.handle.db,
        claims.map((claim) => ({ taskId: claim.taskId, runnerId: claim.runnerId, status, steps: [] })),
        NOW + 1,
      );

    const finishedOf = (results: FinishedAlone[]) => results.map((result) => result.finished);

    test('one statement for several reports: the legs of two runs that leave them running finish together; the last legs are left to transactions', async () => {
      const four = await claimedRun(4);
      const two = await claimedRun(2);
      const first = await together([four[0]!, four[1]!, two[0]!, four[2]!]);
      assert.deepEqual(finishedOf(first), [true, true, true, true]);
      assert.deepEqual(
        first.map((result) => result.seen?.task.id),
        [four[0]!.taskId, four[1]!.taskId, two[0]!.taskId, four[2]!.taskId],
        'each report gets its own task, in order',
      );
      for (const claim of [four[0]!, four[1]!, four[2]!, two[0]!])
        assert.deepEqual(await statusOf(claim), {
          task: ActionStatus.success,
          job: ActionStatus.success,
          run: ActionStatus.running,
        });
      // Both runs would end: nothing is written, each report takes the transaction.
      const last = await together([two[1]!, four[3]!]);
      assert.deepEqual(finishedOf(last), [false, false]);
      assert.deepEqual(
        last.map((result) => [result.doneAs, result.seen?.job?.id]),
        [
          [null, two[1]!.job.id],
          [null, four[3]!.job.id],
        ],
      );
      assert.deepEqual(await statusOf(two[1]!), running);
      assert.deepEqual(await statusOf(four[3]!), running);
    });

    test('one statement for several reports: of the two last legs of a run the first finishes, the last is left to a transaction; a task done already is answered as it is', async () => {
      const three = await claimedRun(3);
      const [done] = await together([three[0]!]);
      assert.equal(done?.finished, true);
      const again = await together([three[1]!, three[0]!, three[2]!], ActionStatus.failure);
      assert.deepEqual(finishedOf(again), [true, false, false]);
      assert.deepEqual(
        again.map((result) => result.doneAs),
        [null, ActionStatus.success, null],
      );
      assert.deepEqual(await statusOf(three[1]!), {
        task: ActionStatus.failure,
        job: ActionStatus.failure,
        run: ActionStatus.running,
      });
      assert.deepEqual(await statusOf(three[2]!), running);
    });

    test("one statement for several reports: another runner's task, a webhook, an unknown task finish nothing; the others finish", async () => {
      const db = scratch.handle.db;
      const plain = await claimedRun(3);
      const hooked = await claimedRun(3);
      await addActiveHook(hooked[0]!.job.repoId);
      const results = await finishReportsAlone(
        db,
        [
          { taskId: plain[0]!.taskId, runnerId: plain[0]!.runnerId + 1000, status: ActionStatus.success, steps: [] },
          { taskId: hooked[0]!.taskId, runnerId: hooked[0]!.runnerId, status: ActionStatus.success, steps: [] },
          { taskId: 999_999_999, runnerId: plain[0]!.runnerId, status: ActionStatus.success, steps: [] },
          { taskId: plain[1]!.taskId, runnerId: plain[1]!.runnerId, status: ActionStatus.failure, steps: [] },
        ],
        NOW + 1,
      );
      assert.deepEqual(finishedOf(results), [false, false, false, true]);
      assert.equal(results[0]?.seen?.task.runnerId, plain[0]!.runnerId, "the other runner's task is seen as it is");
      assert.equal(results[2]?.seen, null);
      assert.deepEqual(await statusOf(plain[0]!), running);
      assert.deepEqual(await statusOf(hooked[0]!), running);
      assert.deepEqual(await statusOf(plain[1]!), {
        task: ActionStatus.failure,
        job: ActionStatus.failure,
        run: ActionStatus.running,
      });
    });

    test("one statement for several reports waits for the run's lock and counts the run as its holder left it", async () => {
      const [first, second, third] = await claimedRun(3);
      const other = await claimedRun(2);
      const held = await holdOpen((tx) => finish(first!, tx));
      let settled = false;
      const waiting = together([other[0]!, second!, third!]).then((done) => ((settled = true), done));
      await sleep(200);
      assert.equal(settled, false, "the statement waits for the run's lock");
      await held.commit();
      const done = await waiting;
      assert.deepEqual(
        finishedOf(done),
        [true, true, false],
        'the run would end with its last leg: left to a transaction',
      );
      assert.equal((await statusOf(second!)).job, ActionStatus.success);
      assert.deepEqual(await statusOf(third!), running);
      assert.equal((await statusOf(other[0]!)).job, ActionStatus.success);
    });

    test('one statement for several reports leaves the reports of a run with a job cancelled meanwhile to transactions', async () => {
      const [cancelled, sibling, third] = await claimedRun(3);
      const [elsewhere] = await claimedRun(2);
      const held = await cancelUnderRunLock(cancelled!);
      const waiting = together([sibling!, elsewhere!, cancelled!]);
      await sleep(200);
      await held.commit();
      const done = await waiting;
      assert.deepEqual(finishedOf(done), [false, true, false], "another run's leg still finishes");
      assert.deepEqual(
        done.map((result) => result.doneAs),
        [null, null, null],
      );
      assert.equal((await statusOf(cancelled!)).task, ActionStatus.running, 'the task is left to the transaction');
      assert.deepEqual(await statusOf(sibling!), {
        task: ActionStatus.running,
        job: ActionStatus.running,
        run: ActionStatus.running,
      });
      assert.equal((await statusOf(third!)).job, ActionStatus.running);
    });

    test('one statement for several reports: the legs of a run cancelled while they waited for its lock answer cancelled', async () => {
      const legs = await claimedRun(3);
      const db = scratch.handle.db;
      // As the cancel API leaves a run: its tasks, jobs and the run cancelled in one transaction.
      const held = await holdOpen(async (tx) => {
        await findRunForUpdate(tx, legs[0]!.job.runId);
        await tx
          .updateTable('action_run_job')
          .set({ status: ActionStatus.cancelled, stopped: NOW })
          .where('run_id', '=', legs[0]!.job.runId)
          .execute();
        await tx
          .updateTable('action_task')
          .set({ status: ActionStatus.cancelled, stopped: NOW })
          .where(
            'id',
            'in',
            legs.map((leg) => leg.taskId),
          )
          .execute();
        await tx
          .updateTable('action_run')
          .set({ status: ActionStatus.cancelled, stopped: NOW })
          .where('id', '=', legs[0]!.job.runId)
          .execute();
      });
      const waiting = together([legs[0]!, legs[1]!]);
      await sleep(200);
      await held.commit();
      const done = await waiting;
      assert.deepEqual(finishedOf(done), [false, false]);
      assert.deepEqual(
        done.map((result) => result.doneAs),
        [ActionStatus.cancelled, ActionStatus.cancelled],
      );
      const jobs = await db
        .selectFrom('action_run_job')
        .select('status')
        .where('run_id', '=', legs[0]!.job.runId)
        .execute();
      assert.deepEqual(
        jobs.map((job) => job.status),
        [ActionStatus.cancelled, ActionStatus.cancelled, ActionStatus.cancelled],
      );
    });

    test('one statement for several reports applies each report its own steps and closes the rest', async () => {
      const db = scratch.handle.db;
      const legs = await claimedRun(3);
      const stepsOf = (taskId: number) =>
        db
          .selectFrom('action_task_step')
          .select(['step_index', 'status', 'log_index', 'log_length'])
          .where('task_id', '=', taskId)
          .orderBy('step_index')
          .execute();
      for (const leg of legs) await insertTaskSteps(db, leg.taskId, leg.job.repoId, ['one', 'two', 'three'], NOW);
      const results = await finishReportsAlone(
        db,
        [
          {
            taskId: legs[0]!.taskId,
            runnerId: legs[0]!.runnerId,
            status: ActionStatus.failure,
            steps: [{ index: 0, result: ActionStatus.success, started: true, logIndex: 3, logLength: 7 }],
          },
          { taskId: legs[1]!.taskId, runnerId: legs[1]!.runnerId, status: ActionStatus.success, steps: [] },
        ],
        NOW + 1,
      );
      assert.deepEqual(finishedOf(results), [true, true]);
      const first = await stepsOf(legs[0]!.taskId);
      assert.deepEqual(first[0], { step_index: 0, status: ActionStatus.success, log_index: 3, log_length: 7 });
      for (const step of first.slice(1)) assert.equal(step.status, ActionStatus.failure, 'the rest closed');
      for (const step of await stepsOf(legs[1]!.taskId)) assert.equal(step.status, ActionStatus.success);
    });

    test('one statement: a leg that leaves its run running is finished alone; the last leg is left to a transaction', async () => {
      const [first, second] = await claimedRun(2);
      const done = await alone(first!);
      assert.equal(done.finished, true);
      assert.equal(done.seen?.task.id, first!.taskId);
      assert.deepEqual(await statusOf(first!), {
        task: ActionStatus.success,
        job: ActionStatus.success,
        run: ActionStatus.running,
      });
      // The run would end: nothing is written, the caller settles it in a transaction.
      const last = await alone(second!);
      assert.equal(last.finished, false);
      assert.equal(last.doneAs, null);
      assert.equal(last.seen?.job?.id, second!.job.id);
      assert.deepEqual(await statusOf(second!), running);
      // A task done already is answered as it is, and nothing is written.
      const again = await alone(first!, ActionStatus.failure);
      assert.equal(again.finished, false);
      assert.equal(again.doneAs, ActionStatus.success);
    });

    test("one statement writes nothing when the finish must write more: a webhook, a commit status, a dependant, another runner's task", async () => {
      const db = scratch.handle.db;
      const [hooked] = await claimedRun(2);
      await addActiveHook(hooked!.job.repoId);
      assert.equal((await alone(hooked!)).finished, false, 'an active webhook');
      assert.deepEqual(await statusOf(hooked!), running);
      const [pushed] = await claimedRun(2, 'push');
      assert.equal((await alone(pushed!)).finished, false, 'a push run (commit statuses)');
      assert.deepEqual(await statusOf(pushed!), running);
      const [needed] = await claimedRun(2, 'workflow_dispatch', true);
      assert.equal((await alone(needed!)).finished, false, 'a job waits for its needs');
      assert.deepEqual(await statusOf(needed!), running);
      const [foreign] = await claimedRun(2);
      const other = await finishReportAlone(db, foreign!.taskId, foreign!.runnerId + 1000, ActionStatus.success, NOW);
      assert.equal(other.finished, false, "another runner's task");
      assert.deepEqual(await statusOf(foreign!), running);
    });

    test("one statement waits for the run's lock and counts the run as its holder left it", async () => {
      const [first, second] = await claimedRun(2);
      const held = await holdOpen((tx) => finish(first!, tx));
      let settled = false;
      const waiting = alone(second!).then((done) => ((settled = true), done));
      await sleep(200);
      assert.equal(settled, false, "the statement waits for the run's lock");
      await held.commit();
      const done = await waiting;
      assert.equal(done.finished, false, 'the run would end now: left to a transaction');
      assert.deepEqual(await statusOf(second!), running);
    });

    test('one statement leaves a job cancelled while it waited for the lock to the transaction', async () => {
      const [claim] = await claimedRun(2);
      const held = await cancelUnderRunLock(claim!);
      const waiting = alone(claim!);
      await sleep(200);
      await held.commit();
      const done = await waiting;
      assert.equal(done.finished, false);
      assert.equal(done.doneAs, null);
      assert.equal((await statusOf(claim!)).task, ActionStatus.running, 'the task is left to the transaction');
    });

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
      const held = await cancelUnderRunLock(claim!);
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
