// Reading one job of a run with what its API views need: the task of an
// attempt (with the log location), the task's named steps and its runner.
// Writes to jobs and tasks live in task-claims.ts and task-reports.ts.
import type { Queryable } from './database.ts';
import { jobFromRow } from './action-runs.ts';
import type { ActionRunJob } from './action-runs.ts';
import type { ActionStatusValue } from '../modules/actions-status.ts';

export async function findJobById(db: Queryable, id: number): Promise<ActionRunJob | null> {
  const row = await db.selectFrom('action_run_job').selectAll().where('id', '=', id).executeTakeFirst();
  return row === undefined ? null : jobFromRow(row);
}

/** 0-based position of a job among its run's jobs by id (Forgejo's web URLs name jobs so). */
export async function jobPosition(db: Queryable, job: Pick<ActionRunJob, 'id' | 'runId'>): Promise<number> {
  const row = await db
    .selectFrom('action_run_job')
    .select((eb) => eb.fn.countAll<string | number>().as('n'))
    .where('run_id', '=', job.runId)
    .where('id', '<', job.id)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** One task of a job: what the job views and the log reader need. */
export interface JobTask {
  id: number;
  jobId: number;
  attempt: number;
  runnerId: number;
  /** '' when the runner is gone (an ephemeral runner is removed after its task). */
  runnerName: string;
  status: ActionStatusValue;
  started: number;
  stopped: number;
  logFilename: string;
  logInStorage: boolean;
  /** Committed bytes of the plain log (what the runner has been acknowledged). */
  logSize: number;
  logExpired: boolean;
  updated: number;
}

function taskQuery(db: Queryable) {
  return db
    .selectFrom('action_task as t')
    .leftJoin('action_runner as r', 'r.id', 't.runner_id')
    .select([
      't.id as id',
      't.job_id as job_id',
      't.attempt as attempt',
      't.runner_id as runner_id',
      'r.name as runner_name',
      't.status as status',
      't.started as started',
      't.stopped as stopped',
      't.log_filename as log_filename',
      't.log_in_storage as log_in_storage',
      't.log_size as log_size',
      't.log_expired as log_expired',
      't.updated as updated',
    ]);
}

type TaskRow = Awaited<ReturnType<ReturnType<typeof taskQuery>['executeTakeFirstOrThrow']>>;

function taskFromRow(row: TaskRow): JobTask {
  return {
    id: row.id,
    jobId: row.job_id,
    attempt: row.attempt,
    runnerId: row.runner_id,
    runnerName: row.runner_name ?? '',
    status: row.status,
    started: row.started,
    stopped: row.stopped,
    logFilename: row.log_filename,
    logInStorage: row.log_in_storage === 1,
    logSize: row.log_size,
    logExpired: row.log_expired === 1,
    updated: row.updated,
  };
}

export async function findJobTaskById(db: Queryable, taskId: number): Promise<JobTask | null> {
  const row = await taskQuery(db).where('t.id', '=', taskId).executeTakeFirst();
  return row === undefined ? null : taskFromRow(row);
}

/** The task of attempt `attempt` of a job (the newest, should a claim have been retried). */
export async function findJobTaskByAttempt(db: Queryable, jobId: number, attempt: number): Promise<JobTask | null> {
  const row = await taskQuery(db)
    .where('t.job_id', '=', jobId)
    .where('t.attempt', '=', attempt)
    .orderBy('t.id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row === undefined ? null : taskFromRow(row);
}

export interface NamedStep {
  name: string;
  index: number;
  status: ActionStatusValue;
  started: number;
  stopped: number;
  /** The step's first line in the task's log (0-based) and its number of lines. */
  logIndex: number;
  logLength: number;
}

export async function listNamedSteps(db: Queryable, taskId: number): Promise<NamedStep[]> {
  const rows = await db
    .selectFrom('action_task_step')
    .select(['name', 'step_index', 'status', 'started', 'stopped', 'log_index', 'log_length'])
    .where('task_id', '=', taskId)
    .orderBy('step_index')
    .execute();
  return rows.map((row) => ({
    name: row.name,
    index: row.step_index,
    status: row.status,
    started: row.started,
    stopped: row.stopped,
    logIndex: row.log_index,
    logLength: row.log_length,
  }));
}
