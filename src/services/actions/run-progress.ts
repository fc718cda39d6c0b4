// After jobs of a run change state (a runner reports, a job is cancelled):
// unblock the jobs whose needs are done, then recompute the run's status and
// its start and stop times. One transaction, so the run never shows a status
// its jobs do not have.
import { ActionStatus, aggregateJobStatus, isDone } from '../../modules/actions-status.ts';
import type { Clock } from '../../modules/clock.ts';
import { unblockedJobs } from '../../modules/job-graph.ts';
import { findRunById, listJobsOfRun, lockRun, unblockJobs, updateRunStatus } from '../../models/action-runs.ts';
import type { ActionRun, RunStatusChange } from '../../models/action-runs.ts';
import type { Queryable } from '../../models/database.ts';
import { bumpTasksVersionsForRepo } from '../../models/runners.ts';

export class RunProgress {
  constructor(private readonly clock: Clock) {}

  /** Call inside the transaction that changed the jobs; returns the run as it now is. */
  async settle(tx: Queryable, runId: number): Promise<ActionRun | undefined> {
    await lockRun(tx, runId);
    const run = await findRunById(tx, runId);
    if (run === undefined) return undefined;
    const now = this.clock.nowSec();
    let jobs = await listJobsOfRun(tx, runId);
    const changes = unblockedJobs(jobs);
    if (changes.size > 0) {
      const changed = await unblockJobs(tx, changes, now);
      if (changed.some((id) => changes.get(id) === ActionStatus.waiting)) await bumpTasksVersionsForRepo(tx, run.ownerId, run.repoId, now);
      jobs = await listJobsOfRun(tx, runId);
    }
    const status = aggregateJobStatus(jobs.map((job) => job.status));
    if (status === run.status) return run;
    const change: RunStatusChange = { status };
    if (status === ActionStatus.running && run.started === 0) change.started = now;
    if (isDone(status)) change.stopped = now;
    return updateRunStatus(tx, run, change, now);
  }
}
