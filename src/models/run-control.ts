// The job transitions a user asks for through the run-control API: cancel a
// job that has not finished, and prepare a finished job's next attempt
// (Forgejo: services/actions/run.go killRun, models/actions/run_job.go
// PrepareNextAttempt). Several processes may share a PostgreSQL database, so
// each update is conditional on the state the caller read (status and task):
// when it changes nothing, someone else moved the job first and the caller
// re-reads. The caller holds the run's lock (lockRun) and, on SQLite, the
// write lock (takeWriteLock), the order every writer of a run's jobs takes.
import { ActionStatus } from '../modules/actions-status.ts';
import { jobFromRow } from './action-runs.ts';
import type { ActionRunJob } from './action-runs.ts';
import { isPostgres } from './database.ts';
import type { Queryable, Tx } from './database.ts';
import type { ActionStatusValue } from '../modules/actions-status.ts';

/** A waiting or running job becomes cancelled, if it still has the status and task read. */
export async function cancelJob(
  tx: Tx,
  job: Pick<ActionRunJob, 'id' | 'status' | 'taskId'>,
  now: number,
): Promise<boolean> {
  const result = await tx
    .updateTable('action_run_job')
    .set({ status: ActionStatus.cancelled, stopped: now, updated: now })
    .where('id', '=', job.id)
    .where('status', '=', job.status)
    .where('task_id', '=', job.taskId)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * A finished job's next attempt: `attempt` + 1 (a job that never got a task
 * still counts its first attempt as 1, as Forgejo numbers from insertion),
 * a fresh handle, no task (the old task rows stay, with their logs), times
 * zeroed, `status` waiting or blocked. Only if the job still has the status
 * and attempt read; false when it moved meanwhile.
 */
export async function prepareNextAttempt(
  tx: Tx,
  job: Pick<ActionRunJob, 'id' | 'status' | 'attempt'>,
  status: ActionStatusValue,
  handle: string,
  now: number,
): Promise<boolean> {
  const result = await tx
    .updateTable('action_run_job')
    .set({
      attempt: Math.max(job.attempt, 1) + 1,
      handle,
      task_id: 0,
      status,
      started: 0,
      stopped: 0,
      // A job group is evaluated again when the new attempt becomes ready.
      concurrency_group: '',
      concurrency_cancel: 0,
      group_held: 0,
      concurrency_error: '',
      updated: now,
    })
    .where('id', '=', job.id)
    .where('status', '=', job.status)
    .where('attempt', '=', job.attempt)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export interface LockedUnfinishedJobs {
  /** Waiting, running and blocked jobs of the run, locked for this transaction on PostgreSQL. */
  jobs: ActionRunJob[];
  /** Unfinished jobs another transaction holds (a runner's claim in flight): the caller comes back for them. */
  busy: number;
}

/**
 * The run's unfinished jobs, locked. On PostgreSQL rows another transaction
 * holds are skipped, not waited for: a claim locks its job row before the
 * run's row, so waiting here (with the run's row held) would deadlock with
 * it. SQLite runs one writer at a time: nothing is ever busy.
 */
export async function lockUnfinishedJobsOfRun(tx: Queryable, runId: number): Promise<LockedUnfinishedJobs> {
  const unfinished = [ActionStatus.waiting, ActionStatus.running, ActionStatus.blocked];
  const query = tx
    .selectFrom('action_run_job')
    .selectAll()
    .where('run_id', '=', runId)
    .where('status', 'in', unfinished)
    .orderBy('id');
  if (!isPostgres(tx)) return { jobs: (await query.execute()).map(jobFromRow), busy: 0 };
  const rows = await query.forUpdate().skipLocked().execute();
  const all = await tx
    .selectFrom('action_run_job')
    .select(tx.fn.countAll<number>().as('n'))
    .where('run_id', '=', runId)
    .where('status', 'in', unfinished)
    .executeTakeFirstOrThrow();
  return { jobs: rows.map(jobFromRow), busy: Number(all.n) - rows.length };
}
