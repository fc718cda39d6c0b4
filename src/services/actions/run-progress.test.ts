// A claim whose run moved between the claim statement's look and the lock
// claims share (its last running job ended, so it shows waiting). On
// PostgreSQL, a claim whose lock waits are unbounded is run again
// (RunAgainError, which the claim's retry loop takes as it takes a deadlock)
// instead of upgrading its shared lock, which every other claim in flight in
// the run held too: each upgrade waited for the others, a deadlock PostgreSQL
// broke after a second, one claim at a time (a 100-runner swarm stalled for
// 8 s). A claim group whose lock waits are bounded (its lock_timeout,
// group-claims.ts) settles the run in place, and gives up at the bound when
// another claim holds the run's lock. On SQLite the run cannot move under a
// claim; settle runs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { openScratchDatabase } from '../../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../../test/support/scratch-database.ts';
import { waitingPushRun } from '../../../test/support/seeded-runs.ts';
import { testDialects } from '../../../test/support/server.ts';
import { ActionStatus } from '../../modules/actions-status.ts';
import { systemClock } from '../../modules/clock.ts';
import { findRunById, insertRunWithJobs } from '../../models/action-runs.ts';
import type { ActionRun, ActionRunJob } from '../../models/action-runs.ts';
import { isLockNotAvailable, isRetryableError, RunAgainError } from '../../models/database.ts';
import type { Db, Tx } from '../../models/database.ts';
import { boundGroupLockWaits } from '../../models/group-claims.ts';
import { DomainEvents } from '../events.ts';
import { RunProgress } from './run-progress.ts';

const NOW = 1_800_000_000;
/** The claim statement's look: the run was running (another leg ran) and has no job groups. */
const SEEN_RUNNING = { status: ActionStatus.running, jobConcurrency: false };

/** A two-leg run that shows waiting, one leg just claimed (running) and not yet settled. */
async function runThatMoved(db: Db): Promise<{ run: ActionRun; claimed: ActionRunJob }> {
  const { run, jobs } = await db.transaction().execute((tx) =>
    insertRunWithJobs(
      tx,
      waitingPushRun({ repoId: 700, ownerId: 7, title: 'moved' }),
      [0, 1].map((index) => ({
        name: `leg-${index}`,
        jobId: `leg-${index}`,
        handle: randomUUID(),
        needs: [],
        runsOn: ['x'],
        hasIf: false,
        workflowPayload: `jobs: {leg-${index}: {}}`,
        status: ActionStatus.waiting,
      })),
      NOW,
    ),
  );
  const claimed = { ...jobs[0]!, status: ActionStatus.running };
  await db.updateTable('action_run_job').set({ status: ActionStatus.running }).where('id', '=', claimed.id).execute();
  return { run, claimed };
}

/** The transaction's lock waits bounded as a guarded claim group's are (group-claims.ts), then `work`. */
async function withBoundedLockWaits<T>(db: Db, work: (tx: Tx) => Promise<T>): Promise<T> {
  return db.transaction().execute(async (tx) => {
    await boundGroupLockWaits(tx);
    return work(tx);
  });
}

for (const dialect of testDialects()) {
  describe(`a claim settling a run that moved under it [${dialect}]`, () => {
    let scratch: ScratchDatabase;

    before(async () => {
      scratch = await openScratchDatabase(dialect);
    });
    after(async () => {
      await scratch?.drop();
    });

    test('the claim runs again on PostgreSQL; SQLite settles the run', async () => {
      const db = scratch.handle.db;
      const { run, claimed } = await runThatMoved(db);
      const progress = new RunProgress(systemClock, new DomainEvents());
      const settle = db
        .transaction()
        .execute((tx) => progress.settleClaimed(tx, SEEN_RUNNING, run.id, [claimed], true));
      if (dialect === 'postgres') {
        const error = await settle.then(
          () => null,
          (caught: unknown) => caught,
        );
        assert.ok(error instanceof RunAgainError, 'the claim is run again');
        assert.ok(isRetryableError(error), "the claim's retry loop takes it");
        assert.equal((await findRunById(db, run.id))?.status, ActionStatus.waiting, 'nothing was written');
      } else {
        assert.equal((await settle)?.status, ActionStatus.running);
      }
    });

    if (dialect !== 'postgres') return;

    test('a claim whose lock waits are bounded settles the run in place', async () => {
      const db = scratch.handle.db;
      const { run, claimed } = await runThatMoved(db);
      const progress = new RunProgress(systemClock, new DomainEvents());
      const settled = await withBoundedLockWaits(db, async (tx) => {
        const locked = await progress.lockForClaim(tx, SEEN_RUNNING, run.id);
        return progress.settleClaimedLocked(tx, SEEN_RUNNING, run.id, [claimed], true, locked, true);
      });
      assert.equal(settled?.status, ActionStatus.running, 'the claim settles the run it holds');
      assert.equal((await findRunById(db, run.id))?.status, ActionStatus.running, 'and it is committed so');
    });

    // Unbounded, the claim would wait for the other claim for ever: the test's timeout ends it.
    test('a bounded claim gives up at the bound while another claim holds the run', { timeout: 10_000 }, async () => {
      const db = scratch.handle.db;
      const { run, claimed } = await runThatMoved(db);
      const progress = new RunProgress(systemClock, new DomainEvents());
      // Another claim of the run, in flight: it holds the lock claims share until released.
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let holding!: () => void;
      const held = new Promise<void>((resolve) => (holding = resolve));
      const other = db.transaction().execute(async (tx) => {
        await progress.lockForClaim(tx, SEEN_RUNNING, run.id);
        holding();
        await released;
      });
      try {
        await held;
        const started = performance.now();
        const error = await withBoundedLockWaits(db, async (tx) => {
          const locked = await progress.lockForClaim(tx, SEEN_RUNNING, run.id);
          return progress.settleClaimedLocked(tx, SEEN_RUNNING, run.id, [claimed], true, locked, true);
        }).then(
          () => null,
          (caught: unknown) => caught,
        );
        const waited = performance.now() - started;
        assert.ok(isLockNotAvailable(error), `the claim gives up on the lock (got ${String(error)})`);
        assert.ok(waited < 900, `at the bound, not at the deadlock timeout (waited ${Math.round(waited)} ms)`);
      } finally {
        release();
        await other;
      }
      assert.equal((await findRunById(db, run.id))?.status, ActionStatus.waiting, 'nothing was written');
    });
  });
}
