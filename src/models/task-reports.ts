// What runners report about their tasks (UpdateTask, UpdateLog) and what
// housekeeping does to tasks and jobs nobody reports on any more. Every write
// that races another process is conditional on the state it expects, so two
// writers can never both apply the same transition.
import { sql } from 'kysely';
import type { Selectable } from 'kysely';
import { ActionStatus } from '../modules/actions-status.ts';
import { jobFromRow } from './action-runs.ts';
import type { ActionRunJob } from './action-runs.ts';
import { isPostgres } from './database.ts';
import type { ActionRunJobTable } from './tables.ts';
import type { Queryable, Tx } from './database.ts';
import type { ActionStatusValue } from '../modules/actions-status.ts';

const DONE = [ActionStatus.success, ActionStatus.failure, ActionStatus.cancelled, ActionStatus.skipped];

export interface ReportedTask {
  id: number;
  jobId: number;
  runnerId: number;
  status: ActionStatusValue;
  started: number;
  stopped: number;
  repoId: number;
  ownerId: number;
  logFilename: string;
  logInStorage: boolean;
  logLength: number;
  logSize: number;
  updated: number;
}

export async function findReportedTask(db: Queryable, id: number): Promise<ReportedTask | null> {
  const row = await db
    .selectFrom('action_task')
    .select([
      'id',
      'job_id',
      'runner_id',
      'status',
      'started',
      'stopped',
      'repo_id',
      'owner_id',
      'log_filename',
      'log_in_storage',
      'log_length',
      'log_size',
      'updated',
    ])
    .where('id', '=', id)
    .executeTakeFirst();
  return row === undefined ? null : taskFromRow(row);
}

function taskFromRow(row: {
  id: number;
  job_id: number;
  runner_id: number;
  status: ActionStatusValue;
  started: number;
  stopped: number;
  repo_id: number;
  owner_id: number;
  log_filename: string;
  log_in_storage: number;
  log_length: number;
  log_size: number;
  updated: number;
}): ReportedTask {
  return {
    id: row.id,
    jobId: row.job_id,
    runnerId: row.runner_id,
    status: row.status,
    started: row.started,
    stopped: row.stopped,
    repoId: row.repo_id,
    ownerId: row.owner_id,
    logFilename: row.log_filename,
    logInStorage: row.log_in_storage === 1,
    logLength: row.log_length,
    logSize: row.log_size,
    updated: row.updated,
  };
}

export interface TaskJobRef {
  id: number;
  runId: number;
  taskId: number;
  status: ActionStatusValue;
}

export async function findTaskJob(db: Queryable, jobId: number): Promise<TaskJobRef | null> {
  const row = await db
    .selectFrom('action_run_job')
    .select(['id', 'run_id', 'task_id', 'status'])
    .where('id', '=', jobId)
    .executeTakeFirst();
  return row === undefined ? null : { id: row.id, runId: row.run_id, taskId: row.task_id, status: row.status };
}

/** A task's job with what locking its run needs (RunProgress.lockRunForSettle). */
export interface ReportedTaskJob extends TaskJobRef {
  repoId: number;
  runJobConcurrency: boolean;
}

/** A task and its job (null when the job is gone), read in one statement. */
export async function findReportedTaskWithJob(
  db: Queryable,
  id: number,
): Promise<{ task: ReportedTask; job: ReportedTaskJob | null } | null> {
  const row = await db
    .selectFrom('action_task as t')
    .leftJoin('action_run_job as j', 'j.id', 't.job_id')
    .leftJoin('action_run as r', 'r.id', 'j.run_id')
    .select([
      't.id',
      't.job_id',
      't.runner_id',
      't.status',
      't.started',
      't.stopped',
      't.repo_id',
      't.owner_id',
      't.log_filename',
      't.log_in_storage',
      't.log_length',
      't.log_size',
      't.updated',
      'j.id as j_id',
      'j.run_id as j_run_id',
      'j.task_id as j_task_id',
      'j.status as j_status',
      'j.repo_id as j_repo_id',
      'r.job_concurrency as r_job_concurrency',
    ])
    .where('t.id', '=', id)
    .executeTakeFirst();
  if (row === undefined) return null;
  return {
    task: taskFromRow(row),
    job:
      row.j_id === null || row.j_run_id === null || row.j_task_id === null || row.j_status === null
        ? null
        : {
            id: row.j_id,
            runId: row.j_run_id,
            taskId: row.j_task_id,
            status: row.j_status,
            repoId: row.j_repo_id ?? 0,
            runJobConcurrency: row.r_job_concurrency === 1,
          },
  };
}

/**
 * Call first in a transaction that will write. SQLite: takes the database
 * write lock now (a statement that writes nothing still does), because a
 * deferred transaction that read first fails with SQLITE_BUSY when another
 * process wrote meanwhile; this one waits (busy_timeout) instead. PostgreSQL
 * locks rows as it goes: nothing to do.
 */
export async function takeWriteLock(tx: Tx): Promise<void> {
  if (isPostgres(tx)) return;
  await sql`update action_task set id = id where 0`.execute(tx);
}

/** The heartbeat: only a task still unfinished is touched. False when it is done. */
export async function touchTask(tx: Queryable, id: number, now: number): Promise<boolean> {
  const result = await tx
    .updateTable('action_task')
    .set({ updated: now, started: sql<number>`case when started = 0 then ${now} else started end` })
    .where('id', '=', id)
    .where('status', 'not in', DONE)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** An unfinished task gets its final status. False when someone else finished it first. */
export async function finishTask(tx: Queryable, id: number, status: ActionStatusValue, now: number): Promise<boolean> {
  const result = await tx
    .updateTable('action_task')
    .set({
      status,
      stopped: now,
      updated: now,
      started: sql<number>`case when started = 0 then ${now} else started end`,
    })
    .where('id', '=', id)
    .where('status', 'not in', DONE)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** The job of a task gets the task's final status, unless it is done already (cancelled meanwhile). */
export async function finishJobOfTask(
  tx: Queryable,
  jobId: number,
  taskId: number,
  status: ActionStatusValue,
  now: number,
): Promise<boolean> {
  const result = await tx
    .updateTable('action_run_job')
    .set({ status, stopped: now, updated: now })
    .where('id', '=', jobId)
    .where('task_id', '=', taskId)
    .where('status', 'not in', DONE)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export interface FinishedTask {
  /** False when the task was done already: nothing changed. */
  finished: boolean;
  /** The job as it now is when it was finished too, else null. */
  job: ActionRunJob | null;
}

/**
 * finishTask, then (only if it finished the task) closeUnfinishedSteps when
 * `closeSteps`, and finishJobOfTask for `jobId` unless null: one statement on
 * PostgreSQL (a data-modifying CTE; each part conditional on the task's
 * update), so a task report holds its run's lock one round trip instead of
 * three; in turn on SQLite, where a statement costs no round trip.
 */
export async function finishTaskAndJob(
  tx: Queryable,
  taskId: number,
  jobId: number | null,
  status: ActionStatusValue,
  now: number,
  closeSteps: boolean,
): Promise<FinishedTask> {
  if (!isPostgres(tx)) {
    if (!(await finishTask(tx, taskId, status, now))) return { finished: false, job: null };
    if (closeSteps) await closeUnfinishedSteps(tx, taskId, status, now);
    if (jobId === null) return { finished: true, job: null };
    const row = await tx
      .updateTable('action_run_job')
      .set({ status, stopped: now, updated: now })
      .where('id', '=', jobId)
      .where('task_id', '=', taskId)
      .where('status', 'not in', DONE)
      .returningAll()
      .executeTakeFirst();
    return { finished: true, job: row === undefined ? null : jobFromRow(row) };
  }
  const done = sql.join(DONE);
  const steps = closeSteps
    ? sql`, steps as (
        update action_task_step
        set status = ${status}, stopped = ${now}, updated = ${now},
            started = case when started = 0 then ${now} else started end
        where task_id in (select id from task) and status not in (${done})
      )`
    : sql``;
  const job =
    jobId === null
      ? sql`, job as (select * from action_run_job where false)`
      : sql`, job as (
          update action_run_job set status = ${status}, stopped = ${now}, updated = ${now}
          where id = ${jobId} and task_id = ${taskId} and status not in (${done}) and exists (select 1 from task)
          returning *
        )`;
  const { rows } = await sql<Partial<Selectable<ActionRunJobTable>> & { task_finished: number | string }>`
    with task as (
      update action_task
      set status = ${status}, stopped = ${now}, updated = ${now},
          started = case when started = 0 then ${now} else started end
      where id = ${taskId} and status not in (${done})
      returning id
    )${steps}${job}
    select job.*, (select count(*) from task) as task_finished from (select 1) as one left join job on true`.execute(
    tx,
  );
  const { task_finished: finished, ...row } = rows[0] as Partial<Selectable<ActionRunJobTable>> & {
    task_finished: number | string;
  };
  return {
    finished: Number(finished) > 0,
    job: row.id === undefined || row.id === null ? null : jobFromRow(row as Selectable<ActionRunJobTable>),
  };
}

export interface TaskStep {
  id: number;
  index: number;
  status: ActionStatusValue;
  started: number;
  stopped: number;
  logIndex: number;
  logLength: number;
}

export async function listTaskSteps(db: Queryable, taskId: number): Promise<TaskStep[]> {
  const rows = await db
    .selectFrom('action_task_step')
    .select(['id', 'step_index', 'status', 'started', 'stopped', 'log_index', 'log_length'])
    .where('task_id', '=', taskId)
    .orderBy('step_index')
    .execute();
  return rows.map((row) => ({
    id: row.id,
    index: row.step_index,
    status: row.status,
    started: row.started,
    stopped: row.stopped,
    logIndex: row.log_index,
    logLength: row.log_length,
  }));
}

export async function updateTaskStep(tx: Queryable, step: TaskStep, now: number): Promise<void> {
  await tx
    .updateTable('action_task_step')
    .set({
      status: step.status,
      started: step.started,
      stopped: step.stopped,
      log_index: step.logIndex,
      log_length: step.logLength,
      updated: now,
    })
    .where('id', '=', step.id)
    .execute();
}

/** Every step not done yet ends with `status` (Forgejo's StopTask). */
export async function closeUnfinishedSteps(
  tx: Queryable,
  taskId: number,
  status: ActionStatusValue,
  now: number,
): Promise<void> {
  await tx
    .updateTable('action_task_step')
    .set({
      status,
      stopped: now,
      updated: now,
      started: sql<number>`case when started = 0 then ${now} else started end`,
    })
    .where('task_id', '=', taskId)
    .where('status', 'not in', DONE)
    .execute();
}

/** First write wins: a key already stored keeps its value. */
export async function insertTaskOutputs(
  tx: Queryable,
  taskId: number,
  outputs: ReadonlyArray<readonly [string, string]>,
): Promise<void> {
  if (outputs.length === 0) return;
  await tx
    .insertInto('action_task_output')
    .values(outputs.map(([key, value]) => ({ task_id: taskId, output_key: key, output_value: value })))
    .onConflict((oc) => oc.columns(['task_id', 'output_key']).doNothing())
    .execute();
}

export async function listTaskOutputKeys(db: Queryable, taskId: number): Promise<string[]> {
  const rows = await db
    .selectFrom('action_task_output')
    .select('output_key')
    .where('task_id', '=', taskId)
    .orderBy('id')
    .execute();
  return rows.map((row) => row.output_key);
}

/** An ephemeral runner has done its one task. Non-ephemeral runners are never touched. */
export async function deleteEphemeralRunner(tx: Queryable, runnerId: number): Promise<boolean> {
  const result = await tx
    .deleteFrom('action_runner')
    .where('id', '=', runnerId)
    .where('ephemeral', '=', 1)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

export interface LogState {
  length: number;
  size: number;
}

/**
 * Commits lines already fsynced to the plain log, if nobody moved the log on
 * or archived it meanwhile. False means: re-read and try again.
 */
export async function commitLogAppend(
  db: Queryable,
  taskId: number,
  from: LogState,
  to: LogState,
  filename: string,
): Promise<boolean> {
  const result = await db
    .updateTable('action_task')
    .set({ log_length: to.length, log_size: to.size, log_filename: filename })
    .where('id', '=', taskId)
    .where('log_length', '=', from.length)
    .where('log_size', '=', from.size)
    .where('log_in_storage', '=', 0)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** Marks the log archived under `filename`, if it still has `length` lines and is not archived yet. */
export async function commitLogArchive(
  db: Queryable,
  taskId: number,
  length: number,
  filename: string,
): Promise<boolean> {
  const result = await db
    .updateTable('action_task')
    .set({ log_in_storage: 1, log_filename: filename })
    .where('id', '=', taskId)
    .where('log_length', '=', length)
    .where('log_in_storage', '=', 0)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export interface StaleTask {
  id: number;
  jobId: number;
  runnerId: number;
}

/** Running tasks with no report since `cutoff`, oldest first. */
export async function findZombieTasks(db: Queryable, cutoff: number, limit: number): Promise<StaleTask[]> {
  const rows = await db
    .selectFrom('action_task')
    .select(['id', 'job_id', 'runner_id'])
    .where('status', '=', ActionStatus.running)
    .where('updated', '<', cutoff)
    .orderBy('updated')
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((row) => ({ id: row.id, jobId: row.job_id, runnerId: row.runner_id }));
}

/** Fails a task that is still running and still silent since `cutoff`; false if it reported or ended meanwhile. */
export async function failZombieTask(tx: Queryable, id: number, cutoff: number, now: number): Promise<boolean> {
  const result = await tx
    .updateTable('action_task')
    .set({ status: ActionStatus.failure, stopped: now, updated: now })
    .where('id', '=', id)
    .where('status', '=', ActionStatus.running)
    .where('updated', '<', cutoff)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export interface StaleJob {
  id: number;
  runId: number;
}

/** Waiting or blocked jobs untouched since `cutoff`, oldest first. */
export async function findAbandonedJobs(db: Queryable, cutoff: number, limit: number): Promise<StaleJob[]> {
  const rows = await db
    .selectFrom('action_run_job')
    .select(['id', 'run_id'])
    .where('status', 'in', [ActionStatus.waiting, ActionStatus.blocked])
    .where('updated', '<', cutoff)
    .orderBy('updated')
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((row) => ({ id: row.id, runId: row.run_id }));
}

/** Cancels a job that is still waiting or blocked and untouched since `cutoff`. */
export async function cancelAbandonedJob(tx: Queryable, id: number, cutoff: number, now: number): Promise<boolean> {
  const result = await tx
    .updateTable('action_run_job')
    .set({ status: ActionStatus.cancelled, stopped: now, updated: now })
    .where('id', '=', id)
    .where('status', 'in', [ActionStatus.waiting, ActionStatus.blocked])
    .where('updated', '<', cutoff)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * Finished tasks whose log was never archived (the runner vanished before
 * "no more", or a crash between a task's end and its archive), done between
 * `since` and `cutoff`: a bounded range of the (status, updated) index, so a
 * pass never walks every task ever run.
 */
export async function findUnarchivedLogs(
  db: Queryable,
  since: number,
  cutoff: number,
  limit: number,
): Promise<number[]> {
  const rows = await db
    .selectFrom('action_task')
    .select('id')
    .where('status', 'in', DONE)
    .where('updated', '>=', since)
    .where('updated', '<', cutoff)
    .where('log_in_storage', '=', 0)
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((row) => row.id);
}
