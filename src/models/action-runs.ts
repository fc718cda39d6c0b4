// Workflow runs and their jobs: insertion with the per-repository run number,
// the filtered runs list, and the run counts kept beside them.
import type { Selectable } from 'kysely';
import { sql } from 'kysely';
import { ActionStatus } from '../modules/actions-status.ts';
import { columnsOf, valuesOf } from './array-rows.ts';
import { compiledArrayStatement, compiledStatement } from './compiled-statements.ts';
import { isPostgres } from './database.ts';
import type { Queryable, Tx } from './database.ts';
import type { ActionRunJobTable, ActionRunTable } from './tables.ts';
import type { ActionStatusValue } from '../modules/actions-status.ts';

// 17 values a row: 1,000 rows stay far below either database's bound-value limit.
const JOBS_PER_INSERT = 1000;

export interface ActionRun {
  id: number;
  repoId: number;
  ownerId: number;
  /** The per-repository run number (Forgejo's `index`). */
  index: number;
  title: string;
  workflowId: string;
  workflowDirectory: string;
  triggerUserId: number;
  scheduleId: number;
  ref: string;
  commitSha: string;
  isForkPullRequest: boolean;
  needApproval: boolean;
  approvedBy: number;
  event: string;
  eventPayload: string;
  triggerEvent: string;
  status: ActionStatusValue;
  preExecutionError: string;
  started: number;
  stopped: number;
  previousDuration: number;
  /** Lowercased concurrency group ('' none). */
  concurrencyGroup: string;
  /** ConcurrencyMode (modules/concurrency-mode.ts). */
  concurrencyType: number;
  /** Some job of the run declares a job-level `concurrency:` (services/actions/job-concurrency.ts). */
  jobConcurrency: boolean;
  created: number;
  updated: number;
}

export interface ActionRunJob {
  id: number;
  runId: number;
  repoId: number;
  ownerId: number;
  commitSha: string;
  name: string;
  attempt: number;
  handle: string;
  workflowPayload: string;
  jobId: string;
  needs: string[];
  runsOn: string[];
  hasIf: boolean;
  taskId: number;
  status: ActionStatusValue;
  /** Stored `blocked` only because the run queues behind an older member of its concurrency group. */
  concurrencyHeld: boolean;
  /** The job's `concurrency:` with its contexts (JSON, job-concurrency.ts); '' none. */
  rawConcurrency: string;
  /** The job's evaluated group ('' none or not yet evaluated). */
  concurrencyGroup: string;
  concurrencyCancel: boolean;
  /** Stored `blocked` because another member of its job group is waiting or running. */
  groupHeld: boolean;
  /** Why the job's `concurrency:` did not evaluate (the job failed); '' none. */
  concurrencyError: string;
  started: number;
  stopped: number;
  created: number;
  updated: number;
}

export function runFromRow(row: Selectable<ActionRunTable>): ActionRun {
  return {
    id: row.id,
    repoId: row.repo_id,
    ownerId: row.owner_id,
    index: row.index_in_repo,
    title: row.title,
    workflowId: row.workflow_id,
    workflowDirectory: row.workflow_directory,
    triggerUserId: row.trigger_user_id,
    scheduleId: row.schedule_id,
    ref: row.ref,
    commitSha: row.commit_sha,
    isForkPullRequest: row.is_fork_pull_request === 1,
    needApproval: row.need_approval === 1,
    approvedBy: row.approved_by,
    event: row.event,
    eventPayload: row.event_payload,
    triggerEvent: row.trigger_event,
    status: row.status,
    preExecutionError: row.pre_execution_error,
    started: row.started,
    stopped: row.stopped,
    previousDuration: row.previous_duration,
    concurrencyGroup: row.concurrency_group,
    concurrencyType: row.concurrency_type,
    jobConcurrency: row.job_concurrency === 1,
    created: row.created,
    updated: row.updated,
  };
}

function parseList(json: string): string[] {
  const value: unknown = JSON.parse(json);
  return Array.isArray(value) ? value.map(String) : [];
}

export function jobFromRow(row: Selectable<ActionRunJobTable>): ActionRunJob {
  return {
    id: row.id,
    runId: row.run_id,
    repoId: row.repo_id,
    ownerId: row.owner_id,
    commitSha: row.commit_sha,
    name: row.name,
    attempt: row.attempt,
    handle: row.handle,
    workflowPayload: row.workflow_payload,
    jobId: row.job_id,
    needs: parseList(row.needs),
    runsOn: parseList(row.runs_on),
    hasIf: row.has_if === 1,
    taskId: row.task_id,
    status: row.status,
    concurrencyHeld: row.concurrency_held === 1,
    rawConcurrency: row.raw_concurrency,
    concurrencyGroup: row.concurrency_group,
    concurrencyCancel: row.concurrency_cancel === 1,
    groupHeld: row.group_held !== 0,
    concurrencyError: row.concurrency_error,
    started: row.started,
    stopped: row.stopped,
    created: row.created,
    updated: row.updated,
  };
}

/** The job table's columns, for statements that read rows as arrays (array-rows.ts). */
export const JOB_COLUMNS = columnsOf<ActionRunJobTable>()([
  'id',
  'run_id',
  'repo_id',
  'owner_id',
  'commit_sha',
  'is_fork_pull_request',
  'name',
  'attempt',
  'handle',
  'workflow_payload',
  'job_id',
  'needs',
  'runs_on',
  'has_if',
  'task_id',
  'status',
  'concurrency_held',
  'raw_concurrency',
  'concurrency_group',
  'concurrency_cancel',
  'group_held',
  'concurrency_error',
  'started',
  'stopped',
  'created',
  'updated',
]);

/** The row of JOB_COLUMNS's values from index `at` on: an object literal, one shape, no work per key. */
export function jobRowFromValues(values: readonly unknown[], at: number): Selectable<ActionRunJobTable> {
  return {
    id: values[at] as number,
    run_id: values[at + 1] as number,
    repo_id: values[at + 2] as number,
    owner_id: values[at + 3] as number,
    commit_sha: values[at + 4] as string,
    is_fork_pull_request: values[at + 5] as number,
    name: values[at + 6] as string,
    attempt: values[at + 7] as number,
    handle: values[at + 8] as string,
    workflow_payload: values[at + 9] as string,
    job_id: values[at + 10] as string,
    needs: values[at + 11] as string,
    runs_on: values[at + 12] as string,
    has_if: values[at + 13] as number,
    task_id: values[at + 14] as number,
    status: values[at + 15] as ActionStatusValue,
    concurrency_held: values[at + 16] as number,
    raw_concurrency: values[at + 17] as string,
    concurrency_group: values[at + 18] as string,
    concurrency_cancel: values[at + 19] as number,
    group_held: values[at + 20] as number,
    concurrency_error: values[at + 21] as string,
    started: values[at + 22] as number,
    stopped: values[at + 23] as number,
    created: values[at + 24] as number,
    updated: values[at + 25] as number,
  };
}

/** The run table's columns, for statements that read rows as arrays (array-rows.ts). */
export const RUN_COLUMNS = columnsOf<ActionRunTable>()([
  'id',
  'repo_id',
  'owner_id',
  'index_in_repo',
  'title',
  'workflow_id',
  'workflow_directory',
  'trigger_user_id',
  'schedule_id',
  'ref',
  'commit_sha',
  'is_fork_pull_request',
  'need_approval',
  'approved_by',
  'event',
  'event_payload',
  'trigger_event',
  'status',
  'pre_execution_error',
  'started',
  'stopped',
  'previous_duration',
  'concurrency_group',
  'concurrency_type',
  'job_concurrency',
  'created',
  'updated',
]);

/** The row of RUN_COLUMNS's values from index `at` on: an object literal, one shape, no work per key. */
export function runRowFromValues(values: readonly unknown[], at: number): Selectable<ActionRunTable> {
  return {
    id: values[at] as number,
    repo_id: values[at + 1] as number,
    owner_id: values[at + 2] as number,
    index_in_repo: values[at + 3] as number,
    title: values[at + 4] as string,
    workflow_id: values[at + 5] as string,
    workflow_directory: values[at + 6] as string,
    trigger_user_id: values[at + 7] as number,
    schedule_id: values[at + 8] as number,
    ref: values[at + 9] as string,
    commit_sha: values[at + 10] as string,
    is_fork_pull_request: values[at + 11] as number,
    need_approval: values[at + 12] as number,
    approved_by: values[at + 13] as number,
    event: values[at + 14] as string,
    event_payload: values[at + 15] as string,
    trigger_event: values[at + 16] as string,
    status: values[at + 17] as ActionStatusValue,
    pre_execution_error: values[at + 18] as string,
    started: values[at + 19] as number,
    stopped: values[at + 20] as number,
    previous_duration: values[at + 21] as number,
    concurrency_group: values[at + 22] as string,
    concurrency_type: values[at + 23] as number,
    job_concurrency: values[at + 24] as number,
    created: values[at + 25] as number,
    updated: values[at + 26] as number,
  };
}

export interface NewRun {
  repoId: number;
  ownerId: number;
  title: string;
  workflowId: string;
  workflowDirectory: string;
  triggerUserId: number;
  ref: string;
  commitSha: string;
  event: string;
  eventPayload: string;
  triggerEvent: string;
  status: ActionStatusValue;
  preExecutionError?: string;
  /** Set when the run is created already finished (a workflow that does not parse). */
  stopped?: number;
  /** The action_schedule row whose tick created the run; 0 otherwise. */
  scheduleId?: number;
  concurrencyGroup?: string;
  concurrencyType?: number;
  /** Some job carries `rawConcurrency`. */
  jobConcurrency?: boolean;
}

export interface NewJob {
  name: string;
  jobId: string;
  handle: string;
  needs: readonly string[];
  runsOn: readonly string[];
  hasIf: boolean;
  workflowPayload: string;
  status: ActionStatusValue;
  /** With `status` blocked: held behind an older run of the run's concurrency group. */
  concurrencyHeld?: boolean;
  /** The job's `concurrency:` with its contexts (job-concurrency.ts); the job is inserted blocked. */
  rawConcurrency?: string;
}

/**
 * Takes the repository's next run number. Must run inside the transaction
 * that inserts the run: the upsert locks the counter row until commit, so
 * concurrent inserts queue behind it and a rollback returns the number.
 */
async function nextRunIndex(tx: Queryable, repoId: number): Promise<number> {
  const row = await tx
    .insertInto('action_run_index')
    .values({ repo_id: repoId, max_index: 1 })
    .onConflict((oc) => oc.column('repo_id').doUpdateSet({ max_index: sql<number>`action_run_index.max_index + 1` }))
    .returning('max_index')
    .executeTakeFirstOrThrow();
  return Number(row.max_index);
}

interface CountKey {
  repoId: number;
  workflowId: string;
  ref: string;
  event: string;
  status: ActionStatusValue;
}

async function adjustRunCount(tx: Queryable, key: CountKey, delta: number): Promise<void> {
  await ADJUST_RUN_COUNT.execute(tx, [key.repoId, key.workflowId, key.ref, key.event, key.status, delta]);
}

// Compiled once (compiled-statements.ts), as updateRunStatus below, which runs it twice.
// Arguments: 0 repository, 1 workflow, 2 ref, 3 event, 4 status, 5 delta.
const ADJUST_RUN_COUNT = compiledStatement((db, arg) =>
  db
    .insertInto('action_run_count')
    .values({
      repo_id: arg<number>(0),
      workflow_id: arg<string>(1),
      ref: arg<string>(2),
      event: arg<string>(3),
      status: arg<ActionStatusValue>(4),
      count: arg<number>(5),
    })
    .onConflict((oc) =>
      oc
        .columns(['repo_id', 'workflow_id', 'ref', 'event', 'status'])
        .doUpdateSet({ count: sql<number>`action_run_count.count + ${arg<number>(5)}` }),
    ),
);

/** Inserts a run and its jobs. Call inside a transaction. */
export async function insertRunWithJobs(
  tx: Tx,
  run: NewRun,
  jobs: readonly NewJob[],
  now: number,
): Promise<{ run: ActionRun; jobs: ActionRunJob[] }> {
  const index = await nextRunIndex(tx, run.repoId);
  const runRow = await tx
    .insertInto('action_run')
    .values({
      repo_id: run.repoId,
      owner_id: run.ownerId,
      index_in_repo: index,
      title: run.title,
      workflow_id: run.workflowId,
      workflow_directory: run.workflowDirectory,
      trigger_user_id: run.triggerUserId,
      ref: run.ref,
      commit_sha: run.commitSha,
      event: run.event,
      event_payload: run.eventPayload,
      trigger_event: run.triggerEvent,
      status: run.status,
      pre_execution_error: run.preExecutionError ?? '',
      stopped: run.stopped ?? 0,
      schedule_id: run.scheduleId ?? 0,
      concurrency_group: run.concurrencyGroup ?? '',
      concurrency_type: run.concurrencyType ?? 0,
      job_concurrency: run.jobConcurrency === true ? 1 : 0,
      created: now,
      updated: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  await adjustRunCount(
    tx,
    { repoId: run.repoId, workflowId: run.workflowId, ref: run.ref, event: run.event, status: run.status },
    1,
  );
  if (jobs.length === 0) return { run: runFromRow(runRow), jobs: [] };
  const jobRows: Array<Selectable<ActionRunJobTable>> = [];
  // In slices: one statement for thousands of jobs would pass more bound
  // values than SQLite (32,766) or PostgreSQL (65,535) accept.
  for (let i = 0; i < jobs.length; i += JOBS_PER_INSERT) {
    const inserted = await tx
      .insertInto('action_run_job')
      .values(
        jobs.slice(i, i + JOBS_PER_INSERT).map((job) => ({
          run_id: runRow.id,
          repo_id: run.repoId,
          owner_id: run.ownerId,
          commit_sha: run.commitSha,
          name: job.name,
          handle: job.handle,
          workflow_payload: job.workflowPayload,
          job_id: job.jobId,
          needs: JSON.stringify(job.needs),
          runs_on: JSON.stringify(job.runsOn),
          has_if: job.hasIf ? 1 : 0,
          status: job.status,
          concurrency_held: job.concurrencyHeld === true ? 1 : 0,
          raw_concurrency: job.rawConcurrency ?? '',
          created: now,
          updated: now,
        })),
      )
      .returningAll()
      .execute();
    jobRows.push(...inserted);
  }
  jobRows.sort((a, b) => a.id - b.id);
  return { run: runFromRow(runRow), jobs: jobRows.map(jobFromRow) };
}

export interface RunStatusChange {
  status: ActionStatusValue;
  started?: number;
  stopped?: number;
}

/** Writes a run's new status (and timers) and moves it between the run counts. */
export async function updateRunStatus(
  tx: Queryable,
  run: ActionRun,
  change: RunStatusChange,
  now: number,
): Promise<ActionRun> {
  const shape = `${change.started !== undefined ? 's' : ''}${change.stopped !== undefined ? 't' : ''}`;
  const updated = await UPDATE_RUN_STATUS.takeFirst(
    tx,
    [run.id, change.status, change.started ?? null, change.stopped ?? null, now],
    shape,
  );
  // The caller holds the run's lock (RunProgress.settleLocked): a missing row is a bug, as with executeTakeFirstOrThrow.
  if (updated === undefined) throw new Error(`run ${run.id} vanished under its lock`);
  if (updated.status !== run.status) {
    const key = { repoId: run.repoId, workflowId: run.workflowId, ref: run.ref, event: run.event };
    // In ascending status order: two runs of one workflow moving opposite ways
    // (waiting → running, running → waiting) otherwise lock the two count rows
    // in opposite orders and deadlock on PostgreSQL.
    const moves = [
      { status: run.status, delta: -1 },
      { status: updated.status, delta: 1 },
    ].sort((a, b) => a.status - b.status);
    for (const move of moves) await adjustRunCount(tx, { ...key, status: move.status }, move.delta);
  }
  return runFromRow(updated);
}

// Compiled once per shape (compiled-statements.ts): in a PostgreSQL throughput
// profile (2026-11-28) a run's status change, this and its two adjustRunCount,
// was 2.7 % of `gantry web`'s busy samples, 1.1 % of them in Kysely building
// and compiling the statements anew for each call. Shape: `s` when `started`
// is set, `t` when `stopped` is; arguments: 0 run, 1 status, 2 started,
// 3 stopped, 4 now.
const UPDATE_RUN_STATUS = compiledStatement((db, arg, shape) =>
  db
    .updateTable('action_run')
    .set({
      status: arg<ActionStatusValue>(1),
      ...(shape.includes('s') ? { started: arg<number>(2) } : {}),
      ...(shape.includes('t') ? { stopped: arg<number>(3) } : {}),
      updated: arg<number>(4),
    })
    .where('id', '=', arg<number>(0))
    .returningAll(),
);

/**
 * A finished run starts its next attempt (Forgejo's rerun, services/actions/rerun.go):
 * `status` (the aggregate of its jobs' new statuses), times zeroed, the
 * finished attempt's duration added to `previous_duration`. Only while the
 * run still has the status the caller read; undefined when it moved meanwhile.
 */
export async function restartRun(
  tx: Queryable,
  run: ActionRun,
  status: ActionStatusValue,
  now: number,
): Promise<ActionRun | undefined> {
  const duration = run.started > 0 && run.stopped >= run.started ? run.stopped - run.started : 0;
  const updated = await tx
    .updateTable('action_run')
    .set({
      status,
      started: 0,
      stopped: 0,
      previous_duration: sql<number>`previous_duration + ${duration}`,
      updated: now,
    })
    .where('id', '=', run.id)
    .where('status', '=', run.status)
    .returningAll()
    .executeTakeFirst();
  if (updated === undefined) return undefined;
  if (status !== run.status) {
    const key = { repoId: run.repoId, workflowId: run.workflowId, ref: run.ref, event: run.event };
    // Ascending status order, as updateRunStatus (deadlock-free on PostgreSQL).
    const moves = [
      { status: run.status, delta: -1 },
      { status, delta: 1 },
    ].sort((a, b) => a.status - b.status);
    for (const move of moves) await adjustRunCount(tx, { ...key, status: move.status }, move.delta);
  }
  return runFromRow(updated);
}

/** Where a deleted task's log may be on disk: the stored name and the plain name. */
export interface DeletedTaskLog {
  repoId: number;
  taskId: number;
  logFilename: string;
}

/**
 * Deletes a finished run with its jobs, tasks, steps and outputs, and takes
 * it out of the run counts. Conditional on the run being done (and still
 * having the status the caller read): undefined when it is not, nothing
 * deleted. Returns the deleted tasks, whose log files the caller removes
 * after the commit. Call inside a transaction.
 */
export async function deleteFinishedRun(tx: Tx, run: ActionRun): Promise<DeletedTaskLog[] | undefined> {
  const deleted = await tx
    .deleteFrom('action_run')
    .where('id', '=', run.id)
    .where('status', '=', run.status)
    .where('status', 'in', [ActionStatus.success, ActionStatus.failure, ActionStatus.cancelled, ActionStatus.skipped])
    .executeTakeFirst();
  if (Number(deleted.numDeletedRows) === 0) return undefined;
  const jobsOfRun = tx.selectFrom('action_run_job').select('id').where('run_id', '=', run.id);
  const tasks = await tx
    .selectFrom('action_task')
    .select(['id', 'repo_id', 'log_filename'])
    .where('job_id', 'in', jobsOfRun)
    .execute();
  const taskIds = tasks.map((task) => task.id);
  if (taskIds.length > 0) {
    await tx.deleteFrom('action_task_output').where('task_id', 'in', taskIds).execute();
    await tx.deleteFrom('action_task_step').where('task_id', 'in', taskIds).execute();
    await tx.deleteFrom('action_task').where('id', 'in', taskIds).execute();
  }
  await tx.deleteFrom('action_run_job').where('run_id', '=', run.id).execute();
  await adjustRunCount(
    tx,
    { repoId: run.repoId, workflowId: run.workflowId, ref: run.ref, event: run.event, status: run.status },
    -1,
  );
  return tasks.map((task) => ({ repoId: task.repo_id, taskId: task.id, logFilename: task.log_filename }));
}

const RUN_BY_ID = compiledStatement((db, arg) =>
  db.selectFrom('action_run').selectAll().where('id', '=', arg<number>(0)),
);

export async function findRunById(db: Queryable, id: number): Promise<ActionRun | null> {
  const row = await RUN_BY_ID.takeFirst(db, [id]);
  return row === undefined ? null : runFromRow(row);
}

export async function findRunByIndex(db: Queryable, repoId: number, index: number): Promise<ActionRun | null> {
  const row = await db
    .selectFrom('action_run')
    .selectAll()
    .where('repo_id', '=', repoId)
    .where('index_in_repo', '=', index)
    .executeTakeFirst();
  return row === undefined ? null : runFromRow(row);
}

/**
 * The run's row, locked as lockRun locks it (FOR UPDATE on PostgreSQL; SQLite
 * writers hold the database's write lock) and read in the same statement.
 */
export async function findRunForUpdate(tx: Tx, runId: number): Promise<ActionRun | null> {
  if (!isPostgres(tx)) {
    const values = await RUN_BY_ID_SQLITE.takeFirst(tx, [runId]);
    return values === undefined ? null : runFromRow(runRowFromValues(valuesOf(values), 0));
  }
  const row = await RUN_FOR_UPDATE.takeFirst(tx, [runId]);
  return row === undefined ? null : runFromRow(row);
}

/**
 * SQLite's RUN_FOR_UPDATE (a final report's read of its run), as an array of RUN_COLUMNS's
 * values: a row read as an object costs a property and its name per column (array-rows.ts).
 */
const RUN_BY_ID_SQLITE = compiledArrayStatement((_db, arg) => {
  const columns = sql.raw(RUN_COLUMNS.map((name) => `r.${name}`).join(', '));
  return sql`select ${columns} from action_run as r where r.id = ${arg<number>(0)}`;
});

/** PostgreSQL's. */
const RUN_FOR_UPDATE = compiledStatement((db, arg) =>
  db.selectFrom('action_run').selectAll().where('id', '=', arg<number>(0)).forUpdate(),
);

/**
 * findRunForUpdate on PostgreSQL without waiting: it fails with lock_not_available (55P03) when
 * another transaction holds a lock on the run. A transaction that holds the run's shared lock
 * alone gets it at once (RunProgress.settleClaimed upgrades so).
 */
export async function findRunForUpdateNoWait(tx: Tx, runId: number): Promise<ActionRun | null> {
  if (!isPostgres(tx)) throw new Error('findRunForUpdateNoWait is for PostgreSQL');
  const row = await RUN_FOR_UPDATE_NOWAIT.takeFirst(tx, [runId]);
  return row === undefined ? null : runFromRow(row);
}

const RUN_FOR_UPDATE_NOWAIT = compiledStatement((db, arg) =>
  db.selectFrom('action_run').selectAll().where('id', '=', arg<number>(0)).forUpdate().noWait(),
);

/**
 * The run, for a transaction that claimed some of its jobs. On PostgreSQL the
 * row is locked FOR SHARE: claims of one run share it and go on in parallel,
 * while a transaction that recomputes the run from its jobs (lockRun, FOR
 * UPDATE) waits until they commit and then reads their jobs as they left
 * them; and the status read here cannot change before this transaction ends.
 * On SQLite the claim already holds the database's write lock.
 */
export async function findRunSharedForClaim(tx: Tx, runId: number): Promise<ActionRun | null> {
  const row = await RUN_SHARED_FOR_CLAIM.takeFirst(tx, [runId]);
  return row === undefined ? null : runFromRow(row);
}

const RUN_SHARED_FOR_CLAIM = compiledStatement((db, arg) => {
  const query = db.selectFrom('action_run').selectAll().where('id', '=', arg<number>(0));
  return isPostgres(db) ? query.forShare() : query;
});

/** The ids of the run's jobs, in id order (a job's position in its run): read from the (run_id, id) index alone. */
export async function listJobIdsOfRun(db: Queryable, runId: number): Promise<number[]> {
  const rows = await db.selectFrom('action_run_job').select('id').where('run_id', '=', runId).orderBy('id').execute();
  return rows.map((row) => row.id);
}

export async function listJobsOfRun(db: Queryable, runId: number): Promise<ActionRunJob[]> {
  const rows = await db.selectFrom('action_run_job').selectAll().where('run_id', '=', runId).orderBy('id').execute();
  return rows.map(jobFromRow);
}

/**
 * Each run's attempt, for GitHub's `run_attempt` (Gitea's ToActionWorkflowRun
 * sends its latest ActionRunAttempt's number): the highest attempt of the
 * run's jobs, at least 1. A rerun, of the run or of some of its jobs, moves
 * the rerun jobs to their next attempt at once (run-control.ts), so this is
 * the run's attempt without a column of its own. One difference: a job
 * requeued after its runner lost the claim also counts an attempt
 * (task-claims.ts), which GitHub would not call a new run attempt.
 */
export async function runAttempts(db: Queryable, runIds: readonly number[]): Promise<Map<number, number>> {
  const attempts = new Map<number, number>(runIds.map((id) => [id, 1]));
  if (runIds.length === 0) return attempts;
  const rows = await db
    .selectFrom('action_run_job')
    .select(['run_id', (eb) => eb.fn.max('attempt').as('attempt')])
    .where('run_id', 'in', [...new Set(runIds)])
    .groupBy('run_id')
    .execute();
  for (const row of rows) attempts.set(Number(row.run_id), Math.max(1, Number(row.attempt)));
  return attempts;
}

/** What recomputing a run's status needs of each of its jobs, in id order: no payloads, no timestamps. */
export interface JobStatusRow {
  id: number;
  jobId: string;
  needs: string[];
  hasIf: boolean;
  status: ActionStatusValue;
  /** Stored `blocked` only because the run queues behind its concurrency group. */
  concurrencyHeld: boolean;
  /** Stored `blocked` because another member of its job group is waiting or running. */
  groupHeld: boolean;
  /** Declares a job-level `concurrency:`. */
  hasConcurrency: boolean;
}

/**
 * The run's jobs as JobStatusRow, in id order: what RunProgress.settle reads
 * after every claim and report. A large matrix makes the full rows (with each
 * leg's workflow payload) the bulk of a claim's cost, and settle only needs these.
 */
export async function listJobStatusesOfRun(db: Queryable, runId: number): Promise<JobStatusRow[]> {
  const rows = await db
    .selectFrom('action_run_job')
    .select([
      'id',
      'job_id',
      'needs',
      'has_if',
      'status',
      'concurrency_held',
      'group_held',
      (eb) => eb(eb.fn('length', ['raw_concurrency']), '>', 0).as('has_concurrency'),
    ])
    .where('run_id', '=', runId)
    .orderBy('id')
    .execute();
  return rows.map((row) => ({
    id: row.id,
    jobId: row.job_id,
    // Most jobs need nothing: skip the parse for the common '[]'.
    needs: row.needs === '[]' ? [] : parseList(row.needs),
    hasIf: row.has_if === 1,
    status: row.status,
    concurrencyHeld: row.concurrency_held === 1,
    groupHeld: row.group_held !== 0,
    // SQLite answers a comparison as 0/1, PostgreSQL as a boolean.
    hasConcurrency: Boolean(row.has_concurrency),
  }));
}

/** How many of a run's jobs have one status (and are held by their concurrency group, or not). */
export interface JobStatusCount {
  status: ActionStatusValue;
  concurrencyHeld: boolean;
  count: number;
}

/**
 * The run's jobs counted by status: all RunProgress.settle needs when no job
 * waits for its needs, a few rows however large the run's matrix.
 */
export async function countJobStatusesOfRun(db: Queryable, runId: number): Promise<JobStatusCount[]> {
  const { rows } = await JOB_STATUS_COUNTS.execute(db, [runId]);
  return rows.map((row) => ({
    status: row.status,
    concurrencyHeld: row.concurrency_held === 1,
    count: Number(row.n),
  }));
}

const JOB_STATUS_COUNTS = compiledStatement((db, arg) =>
  db
    .selectFrom('action_run_job')
    .select(['status', 'concurrency_held', db.fn.countAll<number | string>().as('n')])
    .where('run_id', '=', arg<number>(0))
    .groupBy(['status', 'concurrency_held']),
);

/** Whole jobs by id, in id order. */
export async function listJobsByIds(db: Queryable, ids: readonly number[]): Promise<ActionRunJob[]> {
  if (ids.length === 0) return [];
  const rows = await db
    .selectFrom('action_run_job')
    .selectAll()
    .where('id', 'in', [...ids])
    .orderBy('id')
    .execute();
  return rows.map(jobFromRow);
}

/** The filters of Forgejo's runs list, all combined with AND; lists are OR within. */
export interface RunFilter {
  events?: readonly string[];
  statuses?: readonly ActionStatusValue[];
  runNumber?: number;
  headSha?: string;
  ref?: string;
  workflowId?: string;
  /** Gitea's `actor` filter (the workflows API). */
  triggerUserId?: number;
}

export interface Slice {
  limit: number;
  offset: number;
  /**
   * Keyset paging (the web console): only runs with a smaller id, so a deep
   * page reads the same few index entries as the first instead of skipping
   * `offset` rows.
   */
  beforeId?: number;
}

/** Newest first. Each filter has an index ending in `id`, so a page reads an index range. */
export async function listRuns(db: Queryable, repoId: number, filter: RunFilter, slice: Slice): Promise<ActionRun[]> {
  let query = db.selectFrom('action_run').selectAll().where('repo_id', '=', repoId);
  if (filter.events !== undefined)
    query = query.where('event', 'in', filter.events.length > 0 ? [...filter.events] : ['']);
  if (filter.statuses !== undefined && filter.statuses.length > 0)
    query = query.where('status', 'in', [...filter.statuses]);
  if (filter.runNumber !== undefined) query = query.where('index_in_repo', '=', filter.runNumber);
  if (filter.headSha !== undefined) query = query.where('commit_sha', '=', filter.headSha);
  if (filter.ref !== undefined) query = query.where('ref', '=', filter.ref);
  if (filter.workflowId !== undefined) query = query.where('workflow_id', '=', filter.workflowId);
  if (filter.triggerUserId !== undefined) query = query.where('trigger_user_id', '=', filter.triggerUserId);
  if (slice.beforeId !== undefined) query = query.where('id', '<', slice.beforeId);
  const rows = await query.orderBy('id', 'desc').limit(slice.limit).offset(slice.offset).execute();
  return rows.map(runFromRow);
}

/**
 * The number of runs `listRuns` would list without paging. Filters on the
 * counted columns sum rows of action_run_count (a few per workflow, ref,
 * event and status); a run number or commit filter selects few runs and is
 * counted on its index. The trigger user is not a counted column: counted
 * on the runs themselves.
 */
export async function countRuns(db: Queryable, repoId: number, filter: RunFilter): Promise<number> {
  if (filter.runNumber !== undefined || filter.headSha !== undefined || filter.triggerUserId !== undefined) {
    let query = db.selectFrom('action_run').select(db.fn.countAll<number>().as('n')).where('repo_id', '=', repoId);
    if (filter.runNumber !== undefined) query = query.where('index_in_repo', '=', filter.runNumber);
    if (filter.headSha !== undefined) query = query.where('commit_sha', '=', filter.headSha);
    if (filter.events !== undefined)
      query = query.where('event', 'in', filter.events.length > 0 ? [...filter.events] : ['']);
    if (filter.statuses !== undefined && filter.statuses.length > 0)
      query = query.where('status', 'in', [...filter.statuses]);
    if (filter.ref !== undefined) query = query.where('ref', '=', filter.ref);
    if (filter.workflowId !== undefined) query = query.where('workflow_id', '=', filter.workflowId);
    if (filter.triggerUserId !== undefined) query = query.where('trigger_user_id', '=', filter.triggerUserId);
    const row = await query.executeTakeFirstOrThrow();
    return Number(row.n);
  }
  let query = db
    .selectFrom('action_run_count')
    .select(sql<number | string | null>`sum(count)`.as('n'))
    .where('repo_id', '=', repoId);
  if (filter.events !== undefined)
    query = query.where('event', 'in', filter.events.length > 0 ? [...filter.events] : ['']);
  if (filter.statuses !== undefined && filter.statuses.length > 0)
    query = query.where('status', 'in', [...filter.statuses]);
  if (filter.ref !== undefined) query = query.where('ref', '=', filter.ref);
  if (filter.workflowId !== undefined) query = query.where('workflow_id', '=', filter.workflowId);
  const row = await query.executeTakeFirstOrThrow();
  return Number(row.n ?? 0);
}

/**
 * Moves blocked jobs to their new status. Only rows still blocked change, so
 * a concurrent cancel is never overwritten; returns the ids that changed.
 */
export async function unblockJobs(
  tx: Queryable,
  changes: ReadonlyMap<number, ActionStatusValue>,
  now: number,
): Promise<number[]> {
  const changed: number[] = [];
  for (const [id, status] of changes) {
    const done = status === ActionStatus.skipped;
    const result = await tx
      .updateTable('action_run_job')
      .set({ status, updated: now, ...(done ? { stopped: now } : {}) })
      .where('id', '=', id)
      .where('status', '=', ActionStatus.blocked)
      .executeTakeFirst();
    if (Number(result.numUpdatedRows) > 0) changed.push(id);
  }
  return changed;
}

/**
 * Locks the run row (PostgreSQL) before its status is recomputed, so two
 * transactions changing jobs of one run recompute it one after the other,
 * each from the other's committed result, instead of both moving it from
 * the same old status (which would also skew action_run_count).
 */
export async function lockRun(tx: Tx, runId: number): Promise<void> {
  if (!isPostgres(tx)) return;
  await tx.selectFrom('action_run').select('id').where('id', '=', runId).forUpdate().execute();
}

/**
 * The latest finished run of the same workflow on the same ref before `run`
 * (what "recovered" is measured against), walking the (repo, workflow, id) index.
 */
export async function findPreviousFinishedRun(
  db: Queryable,
  run: Pick<ActionRun, 'id' | 'repoId' | 'workflowId' | 'ref'>,
): Promise<ActionRun | null> {
  const row = await db
    .selectFrom('action_run')
    .selectAll()
    .where('repo_id', '=', run.repoId)
    .where('workflow_id', '=', run.workflowId)
    .where('id', '<', run.id)
    .where('ref', '=', run.ref)
    .where('status', 'in', [ActionStatus.success, ActionStatus.failure, ActionStatus.cancelled, ActionStatus.skipped])
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row === undefined ? null : runFromRow(row);
}
