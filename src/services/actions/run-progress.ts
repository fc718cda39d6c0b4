// After jobs of a run change state (a runner claims or reports, a job is
// released or cancelled): unblock the jobs whose needs are done, then
// recompute the run's status and its start and stop times. One transaction,
// so the run never shows a status its jobs do not have. Every job and run
// status change is recorded as a domain event in that same transaction (the
// webhook outbox turns them into workflow_job / workflow_run / action_run_*).
// A run that reaches a final state releases the next held run of its
// concurrency group in the same transaction (concurrency.ts). Jobs with a
// job-level `concurrency:` are admitted to their group when they become
// ready, and a job of a group that finishes releases the next held one
// (job-concurrency.ts).
import { ActionStatus, aggregateJobStatus, isDone, shownJobStatus } from '../../modules/actions-status.ts';
import type { Clock } from '../../modules/clock.ts';
import { unblockedJobs } from '../../modules/job-graph.ts';
import {
  countJobStatusesOfRun,
  findRunById,
  findRunForUpdate,
  findRunForUpdateNoWait,
  findRunSharedForClaim,
  listJobIdsOfRun,
  listJobsByIds,
  listJobStatusesOfRun,
  lockRun,
  unblockJobs,
  updateRunStatus,
} from '../../models/action-runs.ts';
import type {
  ActionRun,
  ActionRunJob,
  JobStatusCount,
  JobStatusRow,
  RunStatusChange,
} from '../../models/action-runs.ts';
import { isLockNotAvailable, isPostgres, RunAgainError } from '../../models/database.ts';
import type { Db, Tx } from '../../models/database.ts';
import type { GroupedWrites } from '../../models/grouped-writes.ts';
import type { ClaimedRunLook } from '../../models/task-claims.ts';
import { bumpTasksVersionsForRepo } from '../../models/runners.ts';
import type { DomainEvents } from '../events.ts';
import { lockGroupOf, releaseNextRun } from './concurrency.ts';
import { admitReadyJobs, lockJobGroupsFirst, releaseJobGroups } from './job-concurrency.ts';

/** Whether a claim in the run changes only its jobs: the run shows running or cancelled (settleClaimed). */
function claimOnlyRecords(run: Pick<ActionRun, 'status'>): boolean {
  return run.status === ActionStatus.running || run.status === ActionStatus.cancelled;
}

/**
 * Whether settleClaimed settles the run whole for a claim that saw it so
 * (under settle's exclusive lock) rather than under the lock claims share
 * (lockForClaim takes the one this says).
 */
function claimSettlesWhole(seen: ClaimedRunLook): boolean {
  return seen.jobConcurrency || !claimOnlyRecords(seen);
}

/** What unblocking reads of a job: a job held by a group (its run's or its own) waits, it is not blocked by needs. */
function readiness(job: JobStatusRow): JobStatusRow {
  return job.status === ActionStatus.blocked && (job.concurrencyHeld || job.groupHeld)
    ? { ...job, status: ActionStatus.waiting }
    : job;
}

export class RunProgress {
  constructor(
    private readonly clock: Clock,
    private readonly events: DomainEvents,
  ) {}

  /**
   * Locks a run's row before its jobs change, the group lock first when the
   * run has job groups (job-concurrency.ts): the lock order settle keeps.
   */
  async lockRun(tx: Tx, runId: number): Promise<void> {
    const run = await findRunById(tx, runId);
    if (run !== null) await lockJobGroupsFirst(tx, run);
    await lockRun(tx, runId);
  }

  /** A transaction whose after-commit work (cancel in progress of job groups) runs once it commits. */
  transaction<T>(db: Db, work: (tx: Tx) => Promise<T>): Promise<T> {
    return this.events.transaction(db, work);
  }

  /** transaction, committed with the grouped writes submitted meanwhile (grouped-writes.ts); after-commit work per unit. */
  groupedTransaction<T>(writes: GroupedWrites, work: (tx: Tx) => Promise<T>): Promise<T> {
    return this.events.groupedTransaction(writes, work);
  }

  /**
   * settle, for jobs a runner just claimed (waiting → running), as they are
   * after the claim; `seen` is the run as the claim statement saw it. Returns
   * the run as this transaction leaves it (null when it is gone). A claim finishes nothing, so it unblocks nothing and
   * admits or releases no job group, and by the aggregate's rules it can move
   * the run only from waiting to running (a cancelled job keeps the run
   * cancelled; otherwise a running job makes it running). So when the run
   * already shows running or cancelled and has no job groups, the claim reads
   * the run alone instead of every job's status (a 100-leg matrix: 100 rows
   * per claim), under a lock claims share on PostgreSQL
   * (findRunSharedForClaim), and records the jobs' change. Any other run
   * takes the whole of settle: one with job groups takes the group lock
   * before its row (the lock order of lockRun), which a shared lock taken
   * here first would break. On SQLite the claim read the whole run already,
   * under the write lock it holds until its commit (`locked`): nothing can
   * have changed it since, so it is not read again.
   */
  async settleClaimed(
    tx: Tx,
    seen: ClaimedRunLook,
    runId: number,
    claimed: readonly ActionRunJob[],
    /** The claim's statement found no active webhook of the run's repository or owner (events.ts). */
    noActiveHooks = false,
    /** The run as the claim read it under SQLite's write lock (null: gone); undefined: not read (PostgreSQL). */
    locked?: ActionRun | null,
    /**
     * PostgreSQL: the transaction waits a bounded time for locks (a guarded claim group's
     * lock_timeout, group-claims.ts), so a run that moved may wait for settle's lock, not only
     * take it at once (see below).
     */
    lockWaitBounded = false,
  ): Promise<ActionRun | null> {
    const ids = claimed.map((job) => job.id);
    // `seen` is the claim statement's unlocked look: a run that must move takes
    // settle's exclusive lock at once (not a shared one that two claims would both try to upgrade).
    if (claimSettlesWhole(seen)) return (await this.settle(tx, runId, ids, noActiveHooks)) ?? null;
    const run = locked !== undefined ? locked : await findRunSharedForClaim(tx, runId);
    if (run === null) return null;
    if (!claimOnlyRecords(run)) {
      // Moved between the look and the lock (its last running job ended, so it shows waiting:
      // the final report of a run's last running job does that while a group claims its other
      // legs, not seeing the group's uncommitted claims). Settling it takes settle's lock, an
      // upgrade of the shared one; the claims in flight in the run all hold that one then, and
      // each waiting for the others to upgrade was a deadlock PostgreSQL broke after a second,
      // one claim at a time (a swarm of 100 runners stalled for 8 s). So a claim waits for the
      // upgrade only when its lock waits are bounded: a claim group (one in flight per label
      // set and process, claim-groups.ts) whose lock_timeout ends such a wait after 100 ms, when
      // it runs again unguarded. Any other claim takes the upgrade only at once (NOWAIT: a claim
      // holding the shared lock alone gets it) and runs again when another holds the run (its
      // new look takes settle's lock at once). Running the whole group again each time cost its
      // 20-60 runners 30-265 ms, a few times in a PostgreSQL swarm of 2,000 jobs. SQLite: the
      // claim holds the database's write lock since its look, so the run cannot have moved.
      // The run has no job groups (claimSettlesWhole): its row is all settle's lock takes.
      if (isPostgres(tx)) {
        const moved = lockWaitBounded
          ? await findRunForUpdate(tx, runId)
          : await findRunForUpdateNoWait(tx, runId).catch((error: unknown) => {
              throw isLockNotAvailable(error)
                ? new RunAgainError('the run moved between the claim and its lock, and another claim holds it')
                : error;
            });
        return moved === null ? null : this.settleLocked(tx, moved, ids, [], null, noActiveHooks);
      }
      return (await this.settle(tx, runId, ids, noActiveHooks)) ?? null;
    }
    if (claimed.length > 0)
      await this.events.record(tx, {
        type: 'actions.jobs.changed',
        run,
        jobs: claimed,
        runJobIds: () => listJobIdsOfRun(tx, runId),
        ...(noActiveHooks ? { noActiveHooks } : {}),
      });
    return run;
  }

  /**
   * Whether the lock lockForClaim takes for a claim that saw the run so is
   * the one claims share (the run's row FOR SHARE, nothing before it): a
   * claim group may then take it in a statement of its own making
   * (group-claims.ts's afterGroupClaim), in run id order, and pass the run
   * as locked to settleClaimedLocked.
   */
  claimSharesLock(seen: ClaimedRunLook): boolean {
    return !claimSettlesWhole(seen);
  }

  /**
   * The lock settleClaimed takes for a claim in run `runId` (`seen`: the run
   * as the claim statement saw it), taken on its own; the run as locked, null
   * when it is gone. A claim group takes every run's lock first, in run id
   * order, then settles each (settleClaimedLocked): a settle writes rows runs
   * share (the run counts), and a group holding one while it waited for the
   * next run's lock deadlocked with a final report holding that run.
   */
  async lockForClaim(tx: Tx, seen: ClaimedRunLook, runId: number): Promise<ActionRun | null> {
    if (!claimSettlesWhole(seen)) return findRunSharedForClaim(tx, runId);
    // The job-groups flag never changes: read before the run's row is locked, as settle does.
    const flagged = await findRunById(tx, runId);
    return flagged === null ? null : this.lockRunForSettle(tx, flagged);
  }

  /** settleClaimed for a run lockForClaim locked (`locked`; null: gone). */
  async settleClaimedLocked(
    tx: Tx,
    seen: ClaimedRunLook,
    runId: number,
    claimed: readonly ActionRunJob[],
    noActiveHooks: boolean,
    locked: ActionRun | null,
    /** As settleClaimed's: the group's lock waits are bounded (guarded). */
    lockWaitBounded = false,
  ): Promise<ActionRun | null> {
    if (!claimSettlesWhole(seen))
      return this.settleClaimed(tx, seen, runId, claimed, noActiveHooks, locked, lockWaitBounded);
    if (locked === null) return null;
    return (
      (await this.settleLocked(
        tx,
        locked,
        claimed.map((job) => job.id),
        [],
        null,
        noActiveHooks,
      )) ?? null
    );
  }

  /**
   * Call inside the transaction that changed the jobs, naming the jobs whose
   * status the caller changed; returns the run as it now is.
   */
  async settle(
    tx: Tx,
    runId: number,
    changedJobIds: readonly number[] = [],
    /** The caller's statement found no active webhook of the run's repository or owner (events.ts). */
    noActiveHooks = false,
  ): Promise<ActionRun | undefined> {
    // The flag never changes: read before the run's row is locked, for the lock order.
    const flagged = await findRunById(tx, runId);
    if (flagged === null) return undefined;
    const run = await this.lockRunForSettle(tx, flagged);
    if (run === null) return undefined;
    return this.settleLocked(tx, run, changedJobIds, [], null, noActiveHooks);
  }

  /**
   * Locks a run for settleLocked (the group lock first when it has job
   * groups, as lockRun) and returns it as locked. `ref` may be stale: only
   * its id, repository and job-groups flag are used, and those never change.
   */
  async lockRunForSettle(tx: Tx, ref: Pick<ActionRun, 'id' | 'repoId' | 'jobConcurrency'>): Promise<ActionRun | null> {
    await this.lockJobGroupsBeforeRun(tx, ref);
    return findRunForUpdate(tx, ref.id);
  }

  /**
   * What lockRunForSettle takes before the run's row: the run's job-group
   * lock when it has job groups (nothing otherwise), for a caller that then
   * locks the row itself (task-reports.ts's finishReportLockingRun).
   */
  async lockJobGroupsBeforeRun(tx: Tx, ref: Pick<ActionRun, 'id' | 'repoId' | 'jobConcurrency'>): Promise<void> {
    await lockJobGroupsFirst(tx, ref);
  }

  /**
   * settle, for a run this transaction has locked (lockRunForSettle) since
   * before its jobs changed; `run` is the run as locked. `changedJobs`: whole
   * rows of changed jobs as they now are, so they are not read again.
   */
  async settleLocked(
    tx: Tx,
    run: ActionRun,
    changedJobIds: readonly number[] = [],
    changedJobs: readonly ActionRunJob[] = [],
    /** The run's jobs counted by status as they now are (countJobStatusesOfRun), when the caller has them. */
    counted: readonly JobStatusCount[] | null = null,
    /** The caller's statement found no active webhook of the run's repository or owner (events.ts). */
    noActiveHooks = false,
  ): Promise<ActionRun> {
    const runId = run.id;
    const now = this.clock.nowSec();
    // A run without job groups, none of whose jobs waits for its needs, is
    // recomputed from its jobs counted by status: a few rows, however large
    // the matrix; nothing below then moves a job. Otherwise settle reads each
    // job's status and needs (not its payload: a claim in a 100-leg matrix
    // must not read 100 payloads); whole rows for the changed jobs below.
    const counts = run.jobConcurrency ? null : (counted ?? (await countJobStatusesOfRun(tx, runId)));
    const recount =
      counts !== null && !counts.some((count) => count.status === ActionStatus.blocked && !count.concurrencyHeld);
    let jobs = recount ? [] : await listJobStatusesOfRun(tx, runId);
    const changed = new Set(changedJobIds);
    let wakeRunners = false;
    // Repeats while jobs move: a job whose group fails skips its dependants.
    const admitted = new Set<number>();
    for (;;) {
      // A held job is not released by its needs (it has none to wait for): as
      // waiting, it stays put and its dependants wait for it.
      const unblocked = unblockedJobs(jobs.map(readiness));
      // Ready jobs with a job-level group are admitted to it instead (job-concurrency.ts).
      const ready = jobs
        .filter((job) => job.hasConcurrency && unblocked.get(job.id) === ActionStatus.waiting && !admitted.has(job.id))
        .map((job) => job.id);
      for (const id of ready) {
        unblocked.delete(id);
        admitted.add(id);
      }
      if (unblocked.size === 0 && ready.length === 0) break;
      const moved = await unblockJobs(tx, unblocked, now);
      if (moved.some((id) => unblocked.get(id) === ActionStatus.waiting)) wakeRunners = true;
      for (const id of moved) changed.add(id);
      const admission = await admitReadyJobs(tx, run, ready, now);
      if (admission.waiting.length > 0) wakeRunners = true;
      for (const id of [...admission.waiting, ...admission.failed]) changed.add(id);
      if (admission.superseded.length > 0)
        await this.events.record(tx, { type: 'actions.jobs.superseded', jobIds: admission.superseded });
      jobs = await listJobStatusesOfRun(tx, runId);
      if (moved.length === 0 && admission.waiting.length === 0 && admission.failed.length === 0) break;
    }
    // A job of a job group that finished releases the next held one (maybe of this run).
    const released = run.jobConcurrency ? await releaseJobGroups(tx, await listJobsByIds(tx, [...changed]), now) : [];
    if (released.some((job) => job.runId === runId)) {
      for (const job of released) if (job.runId === runId) changed.add(job.id);
      wakeRunners = true;
      jobs = await listJobStatusesOfRun(tx, runId);
    }
    // Held jobs count as waiting: a queued run shows `waiting`, as in Forgejo.
    const status = aggregateJobStatus(recount ? counts.map(shownJobStatus) : jobs.map(shownJobStatus));
    let current = run;
    const finishing = isDone(status) && !isDone(run.status);
    if (finishing) await lockGroupOf(tx, run);
    if (status !== run.status) {
      const change: RunStatusChange = { status };
      if (status === ActionStatus.running && run.started === 0) change.started = now;
      if (isDone(status)) change.stopped = now;
      current = await updateRunStatus(tx, run, change, now);
    }
    // Only this run's jobs: a caller names no other, the released ones of other runs settle below.
    const known = new Map(changedJobs.map((job) => [job.id, job]));
    const changedIds = [...changed].sort((a, b) => a - b);
    const rows = changedIds.every((id) => known.has(id))
      ? changedIds.map((id) => known.get(id) as ActionRunJob)
      : await listJobsByIds(tx, changedIds);
    const jobsOfRun = rows.filter((job) => job.runId === runId);
    const jobIds = jobs.map((job) => job.id);
    if (jobsOfRun.length > 0)
      await this.events.record(tx, {
        type: 'actions.jobs.changed',
        run: current,
        jobs: jobsOfRun,
        runJobIds: recount ? () => listJobIdsOfRun(tx, runId) : async () => jobIds,
        ...(noActiveHooks ? { noActiveHooks } : {}),
      });
    if (current.status !== run.status)
      await this.events.record(tx, {
        type: 'actions.run.status-changed',
        run: current,
        previous: run,
        ...(noActiveHooks ? { noActiveHooks } : {}),
      });
    // Released jobs of other runs: their runs settle (row after the group
    // lock, the order above), before the tasks versions below.
    for (const job of released) {
      if (job.runId === runId) continue;
      await this.settle(tx, job.runId, [job.id]);
      wakeRunners = true;
    }
    // Last: run creation takes the run counts, then the tasks versions; taking
    // the versions before updateRunStatus's counts deadlocked with it on PostgreSQL.
    if (wakeRunners) await bumpTasksVersionsForRepo(tx, run.ownerId, run.repoId, now);
    if (finishing) {
      const next = await releaseNextRun(tx, run, now);
      if (next !== undefined) {
        await this.settle(tx, next.runId, next.jobIds);
        // The released jobs are claimable now: idle runners skip claiming
        // until their scope's tasks version moves (runner-protocol.ts).
        if (next.jobIds.length > 0) await bumpTasksVersionsForRepo(tx, run.ownerId, run.repoId, now);
      }
    }
    return current;
  }
}
