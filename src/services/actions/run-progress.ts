// After jobs of a run change state (a runner claims or reports, a job is
// released or cancelled): unblock the jobs whose needs are done, then
// recompute the run's status and its start and stop times. One transaction,
// so the run never shows a status its jobs do not have. Every job and run
// status change is recorded as a domain event in that same transaction (the
// webhook outbox turns them into workflow_job / workflow_run / action_run_*).
// A run that reaches a final state releases the next held run of its
// concurrency group in the same transaction (concurrency.ts).
import { ActionStatus, aggregateJobStatus, isDone, shownJobStatus } from '../../modules/actions-status.ts';
import type { Clock } from '../../modules/clock.ts';
import { unblockedJobs } from '../../modules/job-graph.ts';
import {
  findRunById,
  listJobsByIds,
  listJobStatusesOfRun,
  lockRun,
  unblockJobs,
  updateRunStatus,
} from '../../models/action-runs.ts';
import type { ActionRun, RunStatusChange } from '../../models/action-runs.ts';
import type { Tx } from '../../models/database.ts';
import { bumpTasksVersionsForRepo } from '../../models/runners.ts';
import type { DomainEvents } from '../events.ts';
import { lockGroupOf, releaseNextRun } from './concurrency.ts';

export class RunProgress {
  constructor(
    private readonly clock: Clock,
    private readonly events: DomainEvents,
  ) {}

  /**
   * Call inside the transaction that changed the jobs, naming the jobs whose
   * status the caller changed; returns the run as it now is.
   */
  async settle(tx: Tx, runId: number, changedJobIds: readonly number[] = []): Promise<ActionRun | undefined> {
    await lockRun(tx, runId);
    const run = await findRunById(tx, runId);
    if (run === null) return undefined;
    const now = this.clock.nowSec();
    // Statuses only (a claim in a 100-leg matrix must not read 100 payloads); whole rows for the changed jobs below.
    let jobs = await listJobStatusesOfRun(tx, runId);
    const changed = new Set(changedJobIds);
    // A held job is not released by its needs (it has none to wait for): as
    // waiting, it stays put and its dependants wait for it.
    const unblocked = unblockedJobs(jobs.map((job) => ({ ...job, status: shownJobStatus(job) })));
    let wakeRunners = false;
    if (unblocked.size > 0) {
      const moved = await unblockJobs(tx, unblocked, now);
      wakeRunners = moved.some((id) => unblocked.get(id) === ActionStatus.waiting);
      for (const id of moved) changed.add(id);
      jobs = await listJobStatusesOfRun(tx, runId);
    }
    // Held jobs count as waiting: a queued run shows `waiting`, as in Forgejo.
    const status = aggregateJobStatus(jobs.map(shownJobStatus));
    let current = run;
    const finishing = isDone(status) && !isDone(run.status);
    if (finishing) await lockGroupOf(tx, run);
    if (status !== run.status) {
      const change: RunStatusChange = { status };
      if (status === ActionStatus.running && run.started === 0) change.started = now;
      if (isDone(status)) change.stopped = now;
      current = await updateRunStatus(tx, run, change, now);
    }
    const changedJobs = await listJobsByIds(
      tx,
      jobs.filter((job) => changed.has(job.id)).map((job) => job.id),
    );
    if (changedJobs.length > 0)
      await this.events.record(tx, {
        type: 'actions.jobs.changed',
        run: current,
        jobs: changedJobs,
        runJobIds: jobs.map((job) => job.id),
      });
    if (current.status !== run.status)
      await this.events.record(tx, { type: 'actions.run.status-changed', run: current, previous: run });
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
