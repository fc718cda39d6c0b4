// A claim whose run moved between the claim statement's look and the lock
// claims share (its last running job ended, so it shows waiting) settles it
// under settle's lock, an upgrade of the shared one. On PostgreSQL every other
// claim in flight in the run may hold the shared lock too, and claims waiting
// for each other's upgrades were a deadlock PostgreSQL broke after a second,
// one claim at a time (a 100-runner swarm stalled for 8 s). So a claim whose
// lock waits are unbounded upgrades only at once (NOWAIT) and otherwise runs
// again (RunAgainError, which the claim's retry loop takes as it takes a
// deadlock); a claim group whose lock waits are bounded (its lock_timeout,
// group-claims.ts) waits for the upgrade, and gives up at the bound when
// another claim holds the run. On SQLite the run cannot move under a claim.
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

/** `work` while another claim of run `runId`, in flight, holds the lock claims share. */
async function whileAnotherClaimHolds(progress: RunProgress, db: Db, runId: number, work: () => Promise<void>) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let holding!: () => void;
  const held = new Promise<void>((resolve) => (holding = resolve));
  const other = db.transaction().execute(async (tx) => {
    await progress.lockForClaim(tx, SEEN_RUNNING, runId);
    holding();
    await released;
  });
  try {
    await held;
    await work();
  } finally {
    release();
    await other;
  }
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

    test('a claim holding the run alone settles it in place', async () => {
      const db = scratch.handle.db;
      const { run, claimed } = await runThatMoved(db);
      const progress = new RunProgress(systemClock, new DomainEvents());
      const settled = await db
        .transaction()
        .execute((tx) => progress.settleClaimed(tx, SEEN_RUNNING, run.id, [claimed], true));
      assert.equal(settled?.status, ActionStatus.running);
      assert.equal((await findRunById(db, run.id))?.status, ActionStatus.running, 'and it is committed so');
    });

    if (dialect !== 'postgres') return;

    test('a claim whose lock waits are unbounded runs again at once while another claim holds the run', async () => {
      const db = scratch.handle.db;
      const { run, claimed } = await runThatMoved(db);
      const progress = new RunProgress(systemClock, new DomainEvents());
      await whileAnotherClaimHolds(progress, db, run.id, async () => {
        const started = performance.now();
        const error = await db
          .transaction()
          .execute(async (tx) => {
            const locked = await progress.lockForClaim(tx, SEEN_RUNNING, run.id);
            return progress.settleClaimedLocked(tx, SEEN_RUNNING, run.id, [claimed], true, locked);
          })
          .then(
            () => null,
            (caught: unknown) => caught,
          );
        assert.ok(error instanceof RunAgainError, `the claim is run again (got ${String(error)})`);
        assert.ok(isRetryableError(error), "the claim's retry loop takes it");
        const waited = performance.now() - started;
        assert.ok(waited < 500, `at once, not after a wait (took ${Math.round(waited)} ms)`);
      });
      assert.equal((await findRunById(db, run.id))?.status, ActionStatus.waiting, 'nothing was written');
    });

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
      await whileAnotherClaimHolds(progress, db, run.id, async () => {
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
      });
      assert.equal((await findRunById(db, run.id))?.status, ActionStatus.waiting, 'nothing was written');
    });
  });
}
