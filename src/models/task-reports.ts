// What runners report about their tasks (UpdateTask, UpdateLog) and what
// housekeeping does to tasks and jobs nobody reports on any more. Every write
// that races another process is conditional on the state it expects, so two
// writers can never both apply the same transition.
import { sql } from 'kysely';
import { ActionStatus } from '../modules/actions-status.ts';
import { isPostgres } from './database.ts';
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
  if (row === undefined) return null;
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
