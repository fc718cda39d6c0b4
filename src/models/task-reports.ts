// What runners report about their tasks (UpdateTask, UpdateLog) and what
// housekeeping does to tasks and jobs nobody reports on any more. Every write
// that races another process is conditional on the state it expects, so two
// writers can never both apply the same transition.
import { sql } from 'kysely';
import type { RawBuilder, Selectable } from 'kysely';
import { ActionStatus } from '../modules/actions-status.ts';
import { countJobStatusesOfRun, JOB_COLUMNS, jobFromRow, jobRowFromValues, runFromRow } from './action-runs.ts';
import { valuesOf } from './array-rows.ts';
import type { ActionRun, ActionRunJob, JobStatusCount } from './action-runs.ts';
import { compiledArrayStatement, compiledStatement } from './compiled-statements.ts';
import type { ArgSlot } from './compiled-statements.ts';
import { isPostgres } from './database.ts';
import { holdsWriteLock } from './grouped-writes.ts';
import type { ActionRunJobTable, ActionRunTable } from './tables.ts';
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
  const row = await REPORTED_TASK.takeFirst(db, [id]);
  return row === undefined ? null : taskFromRow(row);
}

const REPORTED_TASK = compiledStatement((db, arg) =>
  db
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
    .where('id', '=', arg<number>(0)),
);

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

/** A task, its job (null when the job is gone) and its output keys (as listTaskOutputKeys), read in one statement. */
export async function findReportedTaskWithJob(db: Queryable, id: number): Promise<SeenTask | null> {
  if (!isPostgres(db)) {
    const values = await REPORTED_TASK_WITH_JOB_SQLITE.takeFirst(db, [id]);
    return values === undefined ? null : seenFromRow(seenRowFromValues(valuesOf(values)));
  }
  const row = await REPORTED_TASK_WITH_JOB.takeFirst(db, [id]);
  return row === undefined ? null : seenFromRow(row);
}

/** A task with its job as REPORTED_TASK_WITH_JOB and FINISH_ALONE read them. */
export interface SeenTask {
  task: ReportedTask;
  job: ReportedTaskJob | null;
  outputKeys: string[];
}

type SeenRow = Parameters<typeof taskFromRow>[0] & {
  j_id: number | null;
  j_run_id: number | null;
  j_task_id: number | null;
  j_status: ActionStatusValue | null;
  j_repo_id: number | null;
  r_job_concurrency: number | null;
  output_keys: string[] | string;
};

function seenFromRow(row: SeenRow): SeenTask {
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
    outputKeys: typeof row.output_keys === 'string' ? (JSON.parse(row.output_keys) as string[]) : row.output_keys,
  };
}

const REPORTED_TASK_WITH_JOB = compiledStatement((db, arg) => seenTaskQuery(db, arg<number>(0)));

/**
 * SQLite's REPORTED_TASK_WITH_JOB (every report's read of its task), its row as an array of
 * values (array-rows.ts): as an object, better-sqlite3 set a property and made its name for
 * each of the 20 columns. seenRowFromValues reads them in seenTaskQuery's order.
 */
const REPORTED_TASK_WITH_JOB_SQLITE = compiledArrayStatement((db, arg) => seenTaskQuery(db, arg<number>(0)));

/** REPORTED_TASK_WITH_JOB_SQLITE's values as SeenRow: one literal, in seenTaskQuery's column order. */
function seenRowFromValues(values: readonly unknown[]): SeenRow {
  return {
    id: values[0] as number,
    job_id: values[1] as number,
    runner_id: values[2] as number,
    status: values[3] as ActionStatusValue,
    started: values[4] as number,
    stopped: values[5] as number,
    repo_id: values[6] as number,
    owner_id: values[7] as number,
    log_filename: values[8] as string,
    log_in_storage: values[9] as number,
    log_length: values[10] as number,
    log_size: values[11] as number,
    updated: values[12] as number,
    j_id: values[13] as number | null,
    j_run_id: values[14] as number | null,
    j_task_id: values[15] as number | null,
    j_status: values[16] as ActionStatusValue | null,
    j_repo_id: values[17] as number | null,
    r_job_concurrency: values[18] as number | null,
    output_keys: values[19] as string,
  };
}

/** REPORTED_TASK_WITH_JOB's query: the task `id`, its job and run's flag, its output keys. */
function seenTaskQuery(db: Queryable, id: number) {
  // A JSON array: parsed by pg on PostgreSQL, text on SQLite.
  const outputKeys: RawBuilder<string[] | string> = isPostgres(db)
    ? sql`(select coalesce(json_agg(o.output_key order by o.id), '[]') from action_task_output as o where o.task_id = t.id)`
    : sql`(select json_group_array(output_key) from (select o.output_key from action_task_output as o where o.task_id = t.id order by o.id))`;
  return db
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
      outputKeys.as('output_keys'),
    ])
    .where('t.id', '=', id);
}

/**
 * Call first in a transaction that will write. SQLite: takes the database
 * write lock now (a statement that writes nothing still does), because a
 * deferred transaction that read first fails with SQLITE_BUSY when another
 * process wrote meanwhile; this one waits (busy_timeout) instead. PostgreSQL
 * locks rows as it goes: nothing to do.
 */
export async function takeWriteLock(tx: Tx): Promise<void> {
  // A group of grouped writes took it with its first statement.
  if (isPostgres(tx) || holdsWriteLock(tx)) return;
  await WRITE_LOCK.execute(tx, []);
}

const WRITE_LOCK = compiledStatement(() => sql`update action_task set id = id where 0`);

/** The heartbeat: only a task still unfinished is touched. False when it is done. */
export async function touchTask(tx: Queryable, id: number, now: number): Promise<boolean> {
  return (await TOUCH_TASK.affected(tx, [id, now])) > 0;
}

const TOUCH_TASK = compiledStatement((db, arg) =>
  db
    .updateTable('action_task')
    .set({
      updated: arg<number>(1),
      started: sql<number>`case when started = 0 then ${arg<number>(1)} else started end`,
    })
    .where('id', '=', arg<number>(0))
    .where('status', 'not in', DONE),
);

/** An unfinished task gets its final status. False when someone else finished it first. */
export async function finishTask(tx: Queryable, id: number, status: ActionStatusValue, now: number): Promise<boolean> {
  return (await FINISH_TASK.affected(tx, [id, status, now])) > 0;
}

const FINISH_TASK = compiledStatement((db, arg) =>
  db
    .updateTable('action_task')
    .set({
      status: arg<ActionStatusValue>(1),
      stopped: arg<number>(2),
      updated: arg<number>(2),
      started: sql<number>`case when started = 0 then ${arg<number>(2)} else started end`,
    })
    .where('id', '=', arg<number>(0))
    .where('status', 'not in', DONE),
);

/** The job of a task gets the task's final status, unless it is done already (cancelled meanwhile): the job as it now is, or null. */
export async function finishJobOfTask(
  tx: Queryable,
  jobId: number,
  taskId: number,
  status: ActionStatusValue,
  now: number,
): Promise<ActionRunJob | null> {
  const row = await FINISH_JOB_OF_TASK.takeFirst(tx, [jobId, taskId, status, now]);
  return row === undefined ? null : jobFromRow(row);
}

const FINISH_JOB_OF_TASK = compiledStatement((db, arg) =>
  db
    .updateTable('action_run_job')
    .set({ status: arg<ActionStatusValue>(2), stopped: arg<number>(3), updated: arg<number>(3) })
    .where('id', '=', arg<number>(0))
    .where('task_id', '=', arg<number>(1))
    .where('status', 'not in', DONE)
    .returningAll(),
);

/**
 * SQLite's finish of the job (0 job id, 1 task id, 2 status, 3 now): FINISH_JOB_OF_TASK without
 * RETURNING, which SQLite runs as a trigger program of its own per row: the update and
 * FINISHED_JOB_SQLITE's read of the row cost 15 µs in a loop over a bench-sized job table,
 * against 26 µs for the update returning it (as the claim's statements, task-claims.ts).
 */
const FINISH_JOB_SQLITE = compiledStatement((db, arg) =>
  db
    .updateTable('action_run_job')
    .set({ status: arg<ActionStatusValue>(2), stopped: arg<number>(3), updated: arg<number>(3) })
    .where('id', '=', arg<number>(0))
    .where('task_id', '=', arg<number>(1))
    .where('status', 'not in', DONE),
);

/**
 * The job FINISH_JOB_SQLITE finished (0 job id), as an array of JOB_COLUMNS's values; with the
 * shape `h`, then whether a webhook of the repository (1) or its owner (2) is active. Read in the
 * same transaction under the write lock, so it is the row the update left, as RETURNING gave it.
 */
const FINISHED_JOB_SQLITE = compiledArrayStatement((_db, arg, shape) => {
  const columns = sql.raw(JOB_COLUMNS.map((name) => `j.${name}`).join(', '));
  const hooks =
    shape === 'h'
      ? sql`, exists (select 1 from webhook as w where w.is_active = 1
        and ((w.owner_id = 0 and w.repo_id = ${arg<number>(1)}) or (w.owner_id = ${arg<number>(2)} and w.repo_id = 0)))`
      : sql``;
  return sql`select ${columns}${hooks} from action_run_job as j where j.id = ${arg<number>(0)}`;
});

export interface FinishedTask {
  /** False when the task was done already: nothing changed. */
  finished: boolean;
  /** The job as it now is when it was finished too, else null. */
  job: ActionRunJob | null;
  /** With `countRun` and a finished job: its run's jobs counted by status as they now are (countJobStatusesOfRun). */
  counts: JobStatusCount[] | null;
  /**
   * With `hooksOf` and a finished job: whether the repository or its owner
   * has an active webhook, read in the statement that finished the job (as
   * the claim does: the webhook outbox then needs no lookup of its own when
   * neither has one); null when not read.
   */
  anyActiveHook: boolean | null;
}

/**
 * finishTask, then (only if it finished the task) closeUnfinishedSteps when
 * `closeSteps`, and finishJobOfTask for `jobId` unless null: one statement on
 * PostgreSQL (a data-modifying CTE; each part conditional on the task's
 * update); in turn on SQLite, where a statement costs no round trip. With
 * `countRun` (the job's run, which the caller has locked) a finished job's
 * run is counted as settle counts it: on PostgreSQL in the same statement,
 * whose snapshot still shows the job as it was, so its row is moved from its
 * old status to the new one here. A final report on PostgreSQL takes
 * finishReportLockingRun instead.
 */
export async function finishTaskAndJob(
  tx: Queryable,
  taskId: number,
  jobId: number | null,
  status: ActionStatusValue,
  now: number,
  closeSteps: boolean,
  countRun: number | null = null,
  /** The run's repository and owner, whose active webhooks are looked for. */
  hooksOf: { repoId: number; ownerId: number } | null = null,
): Promise<FinishedTask> {
  const none = { job: null, counts: null, anyActiveHook: null };
  if (!isPostgres(tx)) {
    // A statement costs no round trip here: one each.
    if (!(await finishTask(tx, taskId, status, now))) return { finished: false, ...none };
    if (closeSteps) await closeUnfinishedSteps(tx, taskId, status, now);
    if (jobId === null) return { finished: true, ...none };
    if ((await FINISH_JOB_SQLITE.affected(tx, [jobId, taskId, status, now])) === 0) return { finished: true, ...none };
    const finishedJob = await FINISHED_JOB_SQLITE.takeFirst(
      tx,
      hooksOf === null ? [jobId] : [jobId, hooksOf.repoId, hooksOf.ownerId],
      hooksOf === null ? '' : 'h',
    );
    if (finishedJob === undefined) throw new Error(`finished job ${jobId} is not there`);
    const values = valuesOf(finishedJob);
    const job = jobFromRow(jobRowFromValues(values, 0));
    const anyActiveHook = hooksOf === null ? null : Number(values[JOB_COLUMNS.length]) === 1;
    const counts = countRun === null ? null : await countJobStatusesOfRun(tx, countRun);
    return { finished: true, job, counts, anyActiveHook };
  }
  const shape = `${closeSteps ? 1 : 0}${jobId === null ? 0 : 1}${countRun === null ? 0 : 1}${hooksOf === null ? 0 : 1}`;
  const { rows } = await FINISH_POSTGRES.execute(
    tx,
    [taskId, jobId, status, now, countRun, hooksOf?.repoId, hooksOf?.ownerId],
    shape,
  );
  const {
    task_finished: finished,
    old_status: oldStatus,
    run_counts: runCounts,
    any_active_hook: anyActiveHook,
    ...row
  } = rows[0] as FinishRow;
  if (row.id === undefined || row.id === null) return { finished: Number(finished) > 0, ...none };
  const job = jobFromRow(row as Selectable<ActionRunJobTable>);
  let counts: JobStatusCount[] | null = null;
  if (runCounts !== undefined && oldStatus !== undefined) {
    counts = countsFromJson(runCounts);
    addToCounts(counts, oldStatus, job.concurrencyHeld, -1);
    addToCounts(counts, job.status, job.concurrencyHeld, 1);
    counts = counts.filter((c) => c.count > 0);
  }
  return { finished: true, job, counts, anyActiveHook: anyActiveHook ?? null };
}

type CountsJson = Array<[ActionStatusValue, number, number | string]>;

function countsFromJson(json: CountsJson): JobStatusCount[] {
  return json.map(([s, held, n]) => ({ status: s, concurrencyHeld: held === 1, count: Number(n) }));
}

function addToCounts(counts: JobStatusCount[], status: ActionStatusValue, held: boolean, delta: number): void {
  const entry = counts.find((c) => c.status === status && c.concurrencyHeld === held);
  if (entry !== undefined) entry.count += delta;
  else counts.push({ status, concurrencyHeld: held, count: delta });
}

const done = sql.join(DONE);

/** The task's update in a CTE named `task`: only an unfinished task, and `gate` (empty or `and …`) holding. */
function finishTaskCte(
  taskId: number,
  status: ActionStatusValue | RawBuilder<unknown>,
  now: number,
  gate: RawBuilder<unknown>,
): RawBuilder<unknown> {
  return sql`update action_task
      set status = ${status}, stopped = ${now}, updated = ${now},
          started = case when started = 0 then ${now} else started end
      where id = ${taskId} and status not in (${done}) ${gate}
      returning id, status`;
}

/** The task's unfinished steps end with its status, once the `task` CTE finished it. */
function closeStepsCte(now: number): RawBuilder<unknown> {
  return sql`update action_task_step
        set status = (select status from task), stopped = ${now}, updated = ${now},
            started = case when started = 0 then ${now} else started end
        where task_id in (select id from task) and status not in (${done})`;
}

/** The job's update in a CTE: only once the `task` CTE finished the task, and `gate` (empty or `and …`) holding. */
function finishJobCte(
  taskId: number,
  jobId: number | RawBuilder<unknown>,
  status: ActionStatusValue,
  now: number,
  gate: RawBuilder<unknown>,
): RawBuilder<unknown> {
  return sql`update action_run_job set status = ${status}, stopped = ${now}, updated = ${now}
          where id = ${jobId} and task_id = ${taskId} and status not in (${done}) and exists (select 1 from task) ${gate}
          returning *`;
}

/** Whether the repository or its owner has an active webhook, as a column. */
function hooksExist(repoId: number, ownerId: number): RawBuilder<unknown> {
  return sql`, exists (select 1 from webhook as w where w.is_active = 1
          and ((w.owner_id = 0 and w.repo_id = ${repoId}) or (w.owner_id = ${ownerId} and w.repo_id = 0)))
          as any_active_hook`;
}

/**
 * finishTaskAndJob's one statement on PostgreSQL (the helpers above take
 * argument slots). Arguments: 0 task id, 1 job
 * id, 2 status, 3 now, 4 the run to count, 5 and 6 the repository and owner
 * whose hooks are looked for; its shape: closeSteps, a job, a run to count,
 * hooks to look for (1 or 0 each).
 */
const FINISH_POSTGRES = compiledStatement((_db, arg, shape) => {
  const closeSteps = shape[0] === '1';
  const hasJob = shape[1] === '1';
  const countsRun = shape[2] === '1';
  const readsHooks = shape[3] === '1';
  const taskId = arg<number>(0);
  const jobId = arg<number>(1);
  const status = arg<ActionStatusValue>(2);
  const now = arg<number>(3);
  const countRun = arg<number>(4);
  const job = hasJob ? finishJobCte(taskId, jobId, status, now, sql``) : sql`select * from action_run_job where false`;
  const counted =
    !hasJob || !countsRun
      ? sql``
      : sql`, (select status from action_run_job where id = ${jobId}) as old_status,
          (select coalesce(json_agg(json_build_array(c.status, c.concurrency_held, c.n)), '[]')
           from (select status, concurrency_held, count(*) as n from action_run_job
                 where run_id = ${countRun} group by status, concurrency_held) as c) as run_counts`;
  const hooks = hasJob && readsHooks ? hooksExist(arg<number>(5), arg<number>(6)) : sql``;
  return sql<FinishRow>`
    with task as (${finishTaskCte(taskId, status, now, sql``)})${closeSteps ? sql`, steps as (${closeStepsCte(now)})` : sql``},
    job as (${job})
    select job.*, (select count(*) from task) as task_finished${counted}${hooks}
    from (select 1) as one left join job on true`;
});

type FinishRow = Partial<Selectable<ActionRunJobTable>> & {
  task_finished: number | string;
  old_status?: ActionStatusValue;
  run_counts?: CountsJson;
  any_active_hook?: boolean;
};

/** What finishReportLockingRun did: as FinishedTask, with the run as locked. */
export interface FinishedLockingRun extends FinishedTask {
  /** The run as the statement locked it, after whoever held it before. */
  run: ActionRun;
  /** The status the task was finished with, else the one it was done with already (null: no task). */
  status: ActionStatusValue | null;
}

/**
 * A runner's final report on PostgreSQL, in one statement that takes the
 * locks in the order every writer of a run's jobs takes (run-progress.ts):
 * the run's row first (FOR UPDATE), then the task and its job, read again as
 * they are once the lock is held. When the job imposes a status (it is gone,
 * another task's, or done: cancelled server-side, and whoever did settled the
 * run) the task takes that status and the job is left alone, as
 * task-reports.ts's imposedStatus decides; otherwise both get `status`.
 * With `countRun` the run's other jobs are counted by status as committed
 * once the lock is held (action_run_job_counts_now: this statement's own
 * snapshot predates its wait for the lock) and the finished job is added as
 * it now is. So the run's lock is held for the rest of this statement and
 * the commit, not for a round trip to Gantry and back before it as well.
 * Null when the run is gone (nothing was done). A run with job groups: the
 * caller takes the group lock first (RunProgress.lockJobGroupsBeforeRun).
 */
export async function finishReportLockingRun(
  tx: Tx,
  taskId: number,
  jobId: number,
  runId: number,
  status: ActionStatusValue,
  now: number,
  closeSteps: boolean,
  countRun: boolean,
  hooksOf: { repoId: number; ownerId: number },
): Promise<FinishedLockingRun | null> {
  const shape = `${closeSteps ? 1 : 0}${countRun ? 1 : 0}`;
  const { rows } = await FINISH_LOCKING_RUN.execute(
    tx,
    [taskId, jobId, runId, status, now, hooksOf.repoId, hooksOf.ownerId],
    shape,
  );
  const {
    task_finished: finished,
    run_counts: runCounts,
    any_active_hook: anyActiveHook,
    task_status: taskStatus,
    locked_run: lockedRun,
    ...row
  } = rows[0] as LockingRow;
  if (lockedRun === null) return null;
  const run = runFromRow(lockedRun);
  const status_ = taskStatus === null ? null : (Number(taskStatus) as ActionStatusValue);
  if (row.id === undefined || row.id === null)
    return { finished: Number(finished) > 0, job: null, counts: null, anyActiveHook: null, run, status: status_ };
  const job = jobFromRow(row as Selectable<ActionRunJobTable>);
  let counts: JobStatusCount[] | null = null;
  if (runCounts !== undefined && runCounts !== null) {
    counts = countsFromJson(runCounts);
    addToCounts(counts, job.status, job.concurrencyHeld, 1);
  }
  return { finished: true, job, counts, anyActiveHook: anyActiveHook ?? null, run, status: status_ };
}

/**
 * finishReportLockingRun's statement. Arguments: 0 task id, 1 job id, 2 run
 * id, 3 status, 4 now, 5 and 6 the repository and owner whose hooks are
 * looked for; its shape: closeSteps, count the run (1 or 0 each). Every part
 * is gated on `locked` (an uncorrelated EXISTS: a one-time filter evaluated
 * before any row is read), so the run's row is locked before the task's and
 * the job's.
 */
const FINISH_LOCKING_RUN = compiledStatement((_db, arg, shape) => {
  const closeSteps = shape[0] === '1';
  const countRun = shape[1] === '1';
  const taskId = arg<number>(0);
  const jobId = arg<number>(1);
  const runId = arg<number>(2);
  const status = arg<ActionStatusValue>(3);
  const now = arg<number>(4);
  const locked = sql`and exists (select 1 from locked)`;
  // Rows read FOR UPDATE are returned as they are now, not as this statement's snapshot shows them.
  const current = sql`locked as (select * from action_run where id = ${runId} for update),
    task_now as (select id, status from action_task where id = ${taskId} ${locked} for update),
    job_now as (select id, task_id, status from action_run_job where id = ${jobId} ${locked} for update),
    reported as (
      select t.status as was,
        case when j.id is null or j.task_id <> t.id then ${ActionStatus.cancelled}
             when j.status in (${done}) then j.status end as imposed
      from task_now as t left join job_now as j on true
    )`;
  const newStatus = sql`coalesce((select imposed from reported), ${status})`;
  const task = finishTaskCte(taskId, newStatus, now, sql`and exists (select 1 from reported)`);
  const job = finishJobCte(taskId, jobId, status, now, sql`and exists (select 1 from reported where imposed is null)`);
  const counted = countRun
    ? sql`, case when job.id is null then null else action_run_job_counts_now(${runId}, ${jobId}) end as run_counts`
    : sql``;
  return sql<LockingRow>`
    with ${current},
    task as (${task})${closeSteps ? sql`, steps as (${closeStepsCte(now)})` : sql``},
    job as (${job})
    select job.*, (select count(*) from task) as task_finished${counted}${hooksExist(arg<number>(5), arg<number>(6))},
      coalesce((select status from task), (select was from reported)) as task_status,
      (select row_to_json(l) from locked as l) as locked_run
    from (select 1) as one left join job on true`;
});

type LockingRow = Partial<Selectable<ActionRunJobTable>> & {
  task_finished: number | string;
  run_counts?: CountsJson | null;
  any_active_hook?: boolean;
  task_status: ActionStatusValue | null;
  locked_run: Selectable<ActionRunTable> | null;
};

/** A step as a report gives it: its index, result (0: none), whether it reported a start, log index and length. */
export interface ReportedStep {
  index: number;
  result: ActionStatusValue;
  started: boolean;
  logIndex: number;
  logLength: number;
}

/** A ReportedStep list as reportedStepsCte's five arrays. */
function stepArrays(steps: readonly ReportedStep[]): unknown[] {
  return [
    steps.map((step) => step.index),
    steps.map((step) => step.result),
    steps.map((step) => step.started),
    steps.map((step) => step.logIndex),
    steps.map((step) => step.logLength),
  ];
}

/** What finishReportAlone did. */
export interface FinishedAlone {
  /** The task, its job and output keys as findReportedTaskWithJob reads them, before any lock; null: no such task. */
  seen: SeenTask | null;
  /** True when the statement finished the task, its open steps and its job, and committed them. */
  finished: boolean;
  /** The task's status when it was done already (nothing was done), else null. */
  doneAs: ActionStatusValue | null;
}

/**
 * A runner's final report on PostgreSQL in one autocommitted statement, when
 * nothing but the task, its open steps and its job would be written in its
 * transaction. The statement finds the task's run through an unlocked look,
 * then takes the locks in the order every writer of a run's jobs takes
 * (run-progress.ts: the run's row, then the task and its job, read again as
 * they are once the lock is held), counts the run's other jobs as committed
 * once the lock is held (action_run_job_counts_now, as
 * finishReportLockingRun) and finishes the task (with `status`, only when
 * `runnerId` is its runner), its steps (`steps` applied, the others still
 * open closed) and its job only when settling
 * the run would then write nothing more: the task still unfinished and its
 * job still its own and unfinished (no status imposed), the run without job
 * groups and not a push run (no commit status), no active webhook of its
 * repository or owner, no job of the run blocked by its needs (none to
 * unblock or skip), and the run's status as its jobs would now aggregate
 * (RunProgress.settleLocked: unchanged, so no run event, no concurrency
 * group to release). Otherwise it writes nothing: the caller finishes the
 * report in a transaction. So the run's lock is held for this statement
 * alone, not until a commit sent after it.
 */
export async function finishReportAlone(
  db: Queryable,
  taskId: number,
  runnerId: number,
  status: ActionStatusValue,
  now: number,
  /** The steps the report names, each at most once (index, result, log index and length: safe integers). */
  steps: readonly ReportedStep[] = [],
): Promise<FinishedAlone> {
  const { rows } = await FINISH_ALONE.execute(db, [taskId, runnerId, status, now, ...stepArrays(steps)]);
  const { task_finished: finished, done_as: doneAs, ...row } = rows[0] as AloneRow;
  return {
    seen: row.id === undefined || row.id === null ? null : seenFromRow(row as SeenRow),
    finished: Number(finished) > 0,
    doneAs,
  };
}

/** A final report finishReportsAlone takes: as finishReportAlone's arguments. */
export interface AloneReport {
  taskId: number;
  runnerId: number;
  status: ActionStatusValue;
  /** The steps the report names, each at most once (as finishReportAlone's). */
  steps: readonly ReportedStep[];
}

/**
 * finishReportAlone for several final reports at once (PostgreSQL), in one
 * autocommitted statement: each report gets what finishReportAlone would
 * have answered it, in order. The statement looks up every task unlocked,
 * locks the runs that may finish alone in id order (the order claim groups
 * settle runs in, so two groups never wait for each other's), then the
 * reported tasks and their jobs, counts each run's jobs once as committed
 * once its lock is held, and decides per run: the reports of one run
 * finish together when every one of them would finish alone (its task and
 * job still its own and unfinished) and the run's jobs, with all of theirs
 * finished, would still aggregate to the run's status with none blocked by
 * its needs; failing that, all but the last of them (in the order given)
 * when those would (the last leg of a matrix ends its run: it alone takes
 * the transaction); otherwise none of that run's is written and each takes
 * the transaction (a report whose task is done already answers as it is
 * and does not hold the others back). Each report is written whole or not at
 * all: one statement. Each task at most once per call.
 */
export async function finishReportsAlone(
  db: Queryable,
  reports: readonly AloneReport[],
  now: number,
): Promise<FinishedAlone[]> {
  const stepOf = reports.flatMap((report) => report.steps.map((step) => ({ taskId: report.taskId, step })));
  const { rows } = await FINISH_GROUP_ALONE.execute(db, [
    reports.map((report) => report.taskId),
    reports.map((report) => report.runnerId),
    reports.map((report) => report.status),
    now,
    stepOf.map(({ taskId }) => taskId),
    ...stepArrays(stepOf.map(({ step }) => step)),
  ]);
  return (rows as GroupAloneRow[]).map(({ task_finished: finished, done_as: doneAs, ord: _ord, ...row }) => ({
    seen: row.id === undefined || row.id === null ? null : seenFromRow(row as SeenRow),
    finished: finished === true,
    doneAs,
  }));
}

type GroupAloneRow = Partial<SeenRow> & {
  ord: number | string;
  task_finished: boolean;
  done_as: ActionStatusValue | null;
};

/** The two ways a run's reports may finish together: 0 all of them, 1 all but the last (which ends the run). */
const VARIANTS = sql`(values (0), (1)) as v(v)`;

/**
 * finishReportsAlone's statement. Arguments: 0 the task ids, 1 their
 * reporting runners, 2 the reported statuses (arrays of one length, a
 * report each), 3 now, 4 to 9 every report's steps: the task each belongs
 * to, then reportedStepsCte's five arrays. Each lock waits for what an
 * InitPlan (an uncorrelated sub-select, evaluated whole before the scan
 * it filters reads a row) has locked before it: every run (`array(select
 * id from locked)`) before any task or job, and every task and job
 * before the runs are counted; runs, tasks and jobs each in id order.
 * `alone` is materialized: inlined into `fin`, a plan made while the tables
 * were small aggregated it again for every report of the statement.
 */
const FINISH_GROUP_ALONE = compiledStatement((_db, arg) => {
  const now = arg<number>(3);
  const blocked = LITERAL_STATUS.blocked;
  /** A looked-up report of a task that is still its runner's and unfinished (a row `c` of look). */
  const ownUnfinished = sql`c.runner_id = c.reporter and c.status not in (${done})`;
  return sql<GroupAloneRow>`
    with input as materialized (
      select * from unnest(${arg<number[]>(0)}::bigint[], ${arg<number[]>(1)}::bigint[], ${arg<number[]>(2)}::int[])
        with ordinality as i(task_id, reporter, reported, ord)
    ),
    look as materialized (
      select i.ord, i.reporter, i.reported, t.id, t.job_id, t.runner_id, t.status, t.started, t.stopped,
        t.repo_id, t.owner_id, t.log_filename, t.log_in_storage, t.log_length, t.log_size, t.updated,
        j.id as j_id, j.run_id as j_run_id, j.task_id as j_task_id, j.status as j_status, j.repo_id as j_repo_id,
        r.job_concurrency as r_job_concurrency,
        (select coalesce(json_agg(o.output_key order by o.id), '[]') from action_task_output as o
         where o.task_id = t.id) as output_keys
      from input as i join action_task as t on t.id = i.task_id
        left join action_run_job as j on j.id = t.job_id
        left join action_run as r on r.id = j.run_id
    ),
    locked as (
      select * from action_run as l
      where l.id in (select c.j_run_id from look as c where ${ownUnfinished})
        and l.job_concurrency = 0 and l.event <> 'push'
        and not exists (select 1 from webhook as w where w.is_active = 1
          and ((w.owner_id = 0 and w.repo_id = l.repo_id) or (w.owner_id = l.owner_id and w.repo_id = 0)))
      order by l.id
      for update
    ),
    cand as materialized (
      select c.ord, c.id as task_id, c.job_id, c.j_run_id as run_id, c.reported from look as c
      where ${ownUnfinished} and c.j_run_id = any(array(select id from locked))
    ),
    task_now as (
      select id, status from action_task where id = any(array(select task_id from cand)) order by id for update
    ),
    job_now as (
      select id, task_id, status, concurrency_held from action_run_job
      where id = any(array(select job_id from cand)) order by id for update
    ),
    current as materialized (
      select c.ord, c.task_id, c.run_id, c.reported, t.status as task_status,
        j.id as job_id, j.task_id as job_task_id, j.status as job_status, j.concurrency_held
      from cand as c left join task_now as t on t.id = c.task_id left join job_now as j on j.id = c.job_id
    ),
    ok as materialized (
      select c.*, c.ord = max(c.ord) over (partition by c.run_id) as last from current as c
      where c.task_status not in (${done}) and c.job_task_id = c.task_id and c.job_status not in (${done})
    ),
    counted as (
      select l.id as run_id, action_run_job_counts_now(l.id, 0) as counts from locked as l
      where l.id = any(array(select run_id from ok))
    ),
    tally as (
      select x.run_id, x.v, x.status, x.held from (
        select c.run_id, v.v, (e ->> 0)::int as status, (e ->> 1)::int as held, (e ->> 2)::bigint as n
        from counted as c cross join json_array_elements(c.counts) as e cross join ${VARIANTS}
        union all select o.run_id, v.v, o.job_status, o.concurrency_held, -1 from ok as o cross join ${VARIANTS}
          where v.v = 0 or not o.last
        union all select o.run_id, v.v, o.reported, 0, 1 from ok as o cross join ${VARIANTS}
          where v.v = 0 or not o.last
      ) as x
      group by x.run_id, x.v, x.status, x.held having sum(x.n) > 0
    ),
    shown as (
      select t.run_id, t.v,
        case when t.status = ${blocked} and t.held = 1 then ${LITERAL_STATUS.waiting} else t.status end as status,
        t.status = ${blocked} and t.held = 0 as needs_wait
      from tally as t
    ),
    fits as (
      select l.id, v.v from locked as l cross join ${VARIANTS}
      where l.id in (select run_id from ok)
        and (v.v = 0 or exists (select 1 from ok where ok.run_id = l.id and not ok.last))
        and not exists (select 1 from current as c where c.run_id = l.id
          and c.ord not in (select ord from ok) and coalesce(c.task_status not in (${done}), true))
        and not exists (select 1 from shown as s where s.run_id = l.id and s.v = v.v and s.needs_wait)
        and l.status = (select ${AGGREGATE_STATUS} from shown where shown.run_id = l.id and shown.v = v.v)
    ),
    alone as materialized (select id, min(v) as v from fits group by id),
    fin as materialized (
      select ok.* from ok join alone as a on a.id = ok.run_id where a.v = 0 or not ok.last
    ),
    task as (
      update action_task as t
      set status = f.reported, stopped = ${now}, updated = ${now},
          started = case when t.started = 0 then ${now} else t.started end
      from fin as f
      where t.id = f.task_id and t.status not in (${done})
      returning t.id, t.status
    ),
    steps as (${groupStepsCte(arg, now, 4)}),
    job as (
      update action_run_job as j set status = f.reported, stopped = ${now}, updated = ${now}
      from fin as f
      where j.id = f.job_id and j.task_id = f.task_id and j.status not in (${done})
        and f.task_id in (select id from task)
      returning j.id
    )
    select look.*, i.ord, exists (select 1 from task where task.id = i.task_id) as task_finished,
      case when not exists (select 1 from task where task.id = i.task_id) then coalesce(
        (select c.task_status from current as c where c.ord = i.ord and c.task_status in (${done})),
        case when look.status in (${done}) then look.status end) end as done_as
    from input as i left join look on look.ord = i.ord
    order by i.ord`;
});

/**
 * reportedStepsCte for the tasks the `task` CTE finished, each with its
 * own reported steps, closing every step still unfinished after them with
 * its task's status. Arguments from slot `from`: the task each step belongs
 * to, then reportedStepsCte's five arrays.
 */
function groupStepsCte(arg: ArgSlot, now: number, from: number): RawBuilder<unknown> {
  const steps = sql`unnest(${arg<number[]>(from)}::bigint[], ${arg<number[]>(from + 1)}::bigint[],
      ${arg<number[]>(from + 2)}::int[], ${arg<boolean[]>(from + 3)}::boolean[],
      ${arg<number[]>(from + 4)}::bigint[], ${arg<number[]>(from + 5)}::bigint[])
    as r(task_id, step_index, result, started, log_index, log_length)`;
  const finished = sql`st.status in (${done})`;
  return sql`update action_task_step as s
      set status = x.status, started = x.started, stopped = x.stopped,
          log_index = x.log_index, log_length = x.log_length,
          updated = case when s.status not in (${done})
            or (x.status, x.started, x.stopped, x.log_index, x.log_length)
              is distinct from (s.status, s.started, s.stopped, s.log_index, s.log_length)
            then ${now} else s.updated end
      from (
        select st.id,
          case when ${finished} then st.status when r.result <> 0 then r.result else tk.status end as status,
          case when ${finished} or st.started <> 0 then st.started else ${now} end as started,
          case when not ${finished} then ${now} else st.stopped end as stopped,
          coalesce(r.log_index, st.log_index) as log_index,
          coalesce(r.log_length, st.log_length) as log_length
        from action_task_step as st join task as tk on tk.id = st.task_id
          left join ${steps} on r.task_id = st.task_id and r.step_index = st.step_index
        where r.step_index is not null or not ${finished}
      ) as x
      where s.id = x.id`;
}

/**
 * The reported steps in one update, as TaskReportService.applySteps applies
 * them (matched by index, a reported step that does not exist ignored: the
 * log range copied; an unfinished step takes a reported result, or becomes
 * running once it reports a start; `updated` moves when anything changed),
 * for the task in CTE `source` (none when it is empty). With `close`, every
 * step still unfinished after that ends with the task's status, as
 * closeUnfinishedSteps then does (`source` is the finished task). Arguments
 * from slot `from`: the steps' indexes, results, whether each reported a
 * start, log indexes and log lengths (arrays of one length).
 */
function reportedStepsCte(
  arg: ArgSlot,
  source: 'task' | 'touched',
  close: boolean,
  now: number,
  from: number,
): RawBuilder<unknown> {
  const steps = sql`unnest(${arg<number[]>(from)}::bigint[], ${arg<number[]>(from + 1)}::int[],
      ${arg<boolean[]>(from + 2)}::boolean[], ${arg<number[]>(from + 3)}::bigint[], ${arg<number[]>(from + 4)}::bigint[])
    as r(step_index, result, started, log_index, log_length)`;
  const finished = sql`st.status in (${done})`;
  const closing = close ? sql`true` : sql`false`;
  return sql`update action_task_step as s
      set status = x.status, started = x.started, stopped = x.stopped,
          log_index = x.log_index, log_length = x.log_length,
          updated = case when (${closing} and s.status not in (${done}))
            or (x.status, x.started, x.stopped, x.log_index, x.log_length)
              is distinct from (s.status, s.started, s.stopped, s.log_index, s.log_length)
            then ${now} else s.updated end
      from (
        select st.id,
          case when ${finished} then st.status
               when r.result <> 0 then r.result
               when ${closing} then (select status from ${sql.raw(source)})
               when r.started then ${LITERAL_STATUS.running}
               else st.status end as status,
          case when ${finished} or st.started <> 0 then st.started
               when r.result <> 0 or ${closing} or r.started then ${now}
               else st.started end as started,
          case when not ${finished} and (r.result <> 0 or ${closing}) then ${now} else st.stopped end as stopped,
          coalesce(r.log_index, st.log_index) as log_index,
          coalesce(r.log_length, st.log_length) as log_length
        from action_task_step as st left join ${steps} on r.step_index = st.step_index
        where st.task_id in (select id from ${sql.raw(source)})
          and (r.step_index is not null or (${closing} and not ${finished}))
      ) as x
      where s.id = x.id`;
}

/**
 * A runner's heartbeat on PostgreSQL (UpdateTask with no result) in one
 * autocommitted statement: the task is touched as touchTask does and
 * `steps` applied as TaskReportService.applySteps does, only when it is
 * `runnerId`'s, still unfinished, and its job is still its own and
 * unfinished (no status imposed on it, as in the statement's snapshot;
 * touching is conditional on the task being unfinished as it now is).
 * Otherwise nothing is written and the caller takes the transaction. True
 * in `touched` when it was touched.
 */
export async function touchReportAlone(
  db: Queryable,
  taskId: number,
  runnerId: number,
  now: number,
  steps: readonly ReportedStep[],
): Promise<{ seen: SeenTask | null; touched: boolean }> {
  const { rows } = await TOUCH_ALONE.execute(db, [taskId, runnerId, now, ...stepArrays(steps)]);
  const { touched, ...row } = rows[0] as Partial<SeenRow> & { touched: number | string };
  return {
    seen: row.id === undefined || row.id === null ? null : seenFromRow(row as SeenRow),
    touched: Number(touched) > 0,
  };
}

/** touchReportAlone's statement. Arguments: 0 task id, 1 runner id, 2 now, 3 to 7 the reported steps. */
const TOUCH_ALONE = compiledStatement((db, arg) => {
  const taskId = arg<number>(0);
  const now = arg<number>(2);
  return sql`
    with look as (${seenTaskQuery(db, taskId)}),
    touched as (
      update action_task set updated = ${now}, started = case when started = 0 then ${now} else started end
      where id = ${taskId} and status not in (${done})
        and exists (select 1 from look where runner_id = ${arg<number>(1)} and j_task_id = look.id
          and j_status not in (${done}))
      returning id, status
    ),
    steps as (${reportedStepsCte(arg, 'touched', false, now, 3)})
    select look.*, (select count(*) from touched) as touched
    from (select 1) as one left join look on true`;
});

/** The statuses as SQL literals: in a CASE of parameters alone PostgreSQL would take them for text. */
const LITERAL_STATUS = Object.fromEntries(
  Object.entries(ActionStatus).map(([name, value]) => [name, sql.lit(value)]),
) as Record<keyof typeof ActionStatus, RawBuilder<unknown>>;

/**
 * A run's status from its shown job statuses in column `status` of the rows
 * aggregated (aggregateJobStatus, first rule that matches).
 */
const AGGREGATE_STATUS = ((s: Record<keyof typeof ActionStatus, RawBuilder<unknown>>) => sql`case
    when bool_and(status = ${s.skipped}) then ${s.skipped}
    when bool_and(status in (${s.success}, ${s.skipped})) then ${s.success}
    when bool_or(status = ${s.cancelled}) then ${s.cancelled}
    when bool_or(status = ${s.running}) then ${s.running}
    when bool_or(status = ${s.waiting}) then ${s.waiting}
    when bool_or(status = ${s.failure}) then ${s.failure}
    when bool_or(status = ${s.blocked}) then ${s.blocked}
    else ${s.unknown} end`)(LITERAL_STATUS);

/**
 * finishReportAlone's statement. Arguments: 0 task id, 1 runner id, 2
 * status, 3 now, 4 to 8 the reported steps (reportedStepsCte). `look`
 * reads the task and its job's run unlocked (a task's job and a job's run
 * never change), and only an unfinished task of that runner in a run that
 * may finish alone (no job groups, not a push run, no active webhook: what
 * never changes or, for the hooks, is read in the statement's snapshot
 * wherever it is read) locks the run, so a report bound for the
 * transaction does not lock it twice. Every later part is gated on
 * `locked` (an uncorrelated EXISTS: a one-time filter evaluated before any
 * row is read), so the run's row is locked before the task's and the
 * job's, and the run's jobs are counted (by a function with a fresh
 * snapshot) once those locks are held. The writes are gated on `alone`.
 */
const FINISH_ALONE = compiledStatement((db, arg) => {
  const taskId = arg<number>(0);
  const runnerId = arg<number>(1);
  const status = arg<ActionStatusValue>(2);
  const now = arg<number>(3);
  const locked = sql`and exists (select 1 from locked)`;
  const blocked = LITERAL_STATUS.blocked;
  const current = sql`look as (${seenTaskQuery(db, taskId)}),
    locked as (
      select * from action_run as l
      where id = (select j_run_id from look where runner_id = ${runnerId} and status not in (${done}))
        and l.job_concurrency = 0 and l.event <> 'push'
        and not exists (select 1 from webhook as w where w.is_active = 1
          and ((w.owner_id = 0 and w.repo_id = l.repo_id) or (w.owner_id = l.owner_id and w.repo_id = 0)))
      for update
    ),
    task_now as (select id, status from action_task where id = ${taskId} ${locked} for update),
    job_now as (
      select id, task_id, status from action_run_job where id = (select job_id from look) ${locked} for update
    ),
    current as (
      select t.status as task_status, j.id, j.task_id, j.status from task_now as t left join job_now as j on true
    ),
    counted as (
      select action_run_job_counts_now(l.id, c.id) as counts
      from locked as l join current as c on c.id is not null
    ),
    shown as (
      select case when (e ->> 0)::int = ${blocked} and (e ->> 1)::int = 1
               then ${LITERAL_STATUS.waiting} else (e ->> 0)::int end as status,
             (e ->> 0)::int = ${blocked} and (e ->> 1)::int = 0 as needs_wait
      from counted as c cross join json_array_elements(c.counts) as e
      union all select ${status}::int, false from counted
    ),
    alone as (
      select 1 from locked as l join current as c on true
      where c.task_status not in (${done}) and c.task_id = ${taskId} and c.status not in (${done})
        and not exists (select 1 from shown where needs_wait)
        and l.status = (select ${AGGREGATE_STATUS} from shown)
    )`;
  const task = finishTaskCte(taskId, status, now, sql`and exists (select 1 from alone)`);
  const job = finishJobCte(taskId, sql`(select id from current)`, status, now, sql`and exists (select 1 from alone)`);
  return sql<AloneRow>`
    with ${current},
    task as (${task}),
    steps as (${reportedStepsCte(arg, 'task', true, now, 4)}),
    job as (${job})
    select look.*, (select count(*) from task) as task_finished,
      case when (select count(*) from task) = 0 then coalesce(
        (select task_status from current where task_status in (${done})),
        (select status from look where status in (${done}))) end as done_as
    from (select 1) as one left join look on true`;
});

type AloneRow = Partial<SeenRow> & {
  task_finished: number | string;
  done_as: ActionStatusValue | null;
};

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
  await CLOSE_UNFINISHED_STEPS.execute(tx, [taskId, status, now]);
}

const CLOSE_UNFINISHED_STEPS = compiledStatement((db, arg) =>
  db
    .updateTable('action_task_step')
    .set({
      status: arg<ActionStatusValue>(1),
      stopped: arg<number>(2),
      updated: arg<number>(2),
      started: sql<number>`case when started = 0 then ${arg<number>(2)} else started end`,
    })
    .where('task_id', '=', arg<number>(0))
    .where('status', 'not in', DONE),
);

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
