// Claiming waiting jobs for runners: the queries behind FetchTask. A claim
// picks the oldest waiting job in the runner's scope whose runs-on labels the
// runner has, inserts its task and moves the job to running (claimNextJob),
// in the runner's transaction. Several Gantry processes may share one
// PostgreSQL database, so nothing here trusts a value it read earlier: the
// conditional UPDATE of the job row (task_id = 0 AND status = waiting)
// decides who gets a job, and on PostgreSQL the pick is locked with FOR
// UPDATE SKIP LOCKED so that racing runners spread over the queue instead of
// queueing behind one row (graphile-worker's pattern).
// Forgejo: models/actions/task.go (CreateTaskForRunner).
import { sql } from 'kysely';
import type { Selectable } from 'kysely';
import { ActionStatus } from '../modules/actions-status.ts';
import type { ActionStatusValue } from '../modules/actions-status.ts';
import { JOB_COLUMNS, RUN_COLUMNS, jobFromRow, jobRowFromValues, runFromRow, runRowFromValues } from './action-runs.ts';
import type { ActionRun, ActionRunJob } from './action-runs.ts';
import { valuesOf } from './array-rows.ts';
import { compiledArrayStatement, compiledStatement } from './compiled-statements.ts';
import type { ArgSlot } from './compiled-statements.ts';
import { isPostgres } from './database.ts';
import type { ActionRunJobTable } from './tables.ts';
import type { Queryable } from './database.ts';
import type { ScopeColumns } from '../modules/scope.ts';

/**
 * Serialises the claims of one runner (an ephemeral runner polling twice at
 * once still gets one task) with the runner's row lock on PostgreSQL. On
 * SQLite a no-op write takes the database write lock first, so the claim's
 * reads see the newest data and no other process interleaves (a deferred
 * transaction that read first could fail with SQLITE_BUSY when it later
 * writes). False when the runner is gone.
 */
export async function lockRunnerForClaim(tx: Queryable, runnerId: number): Promise<boolean> {
  if (isPostgres(tx)) return (await LOCK_RUNNER_ROW.takeFirst(tx, [runnerId])) !== undefined;
  return (await LOCK_RUNNER_WRITE.affected(tx, [runnerId])) > 0;
}

const LOCK_RUNNER_ROW = compiledStatement((db, arg) =>
  db.selectFrom('action_runner').select('id').where('id', '=', arg<number>(0)).forUpdate(),
);
const LOCK_RUNNER_WRITE = compiledStatement((db, arg) =>
  db
    .updateTable('action_runner')
    .set({ updated: sql<number>`updated` })
    .where('id', '=', arg<number>(0)),
);

/** Whether the runner was ever given a task (an ephemeral runner gets one at most). */
export async function runnerHasAnyTask(db: Queryable, runnerId: number): Promise<boolean> {
  const row = await db
    .selectFrom('action_task')
    .select('id')
    .where('runner_id', '=', runnerId)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * The oldest waiting, unassigned job in `scope` whose runs-on labels are all
 * among `labels` (Forgejo's CanMatchLabels), in one statement: the label
 * match runs in the database, so a claim reads one row however long the
 * queue of jobs for other labels is. On PostgreSQL the row is locked for this
 * transaction and rows other transactions hold are skipped, not waited for
 * (they are being claimed); on SQLite the claim already holds the write lock
 * (lockRunnerForClaim). `handle` narrows the search to one job (Forgejo's
 * FetchSingleTask).
 */
export async function findFirstClaimable(
  tx: Queryable,
  scope: ScopeColumns,
  labels: readonly string[],
  handle?: string,
): Promise<ActionRunJob | null> {
  const row = await FIRST_CLAIMABLE.takeFirst(
    tx,
    claimableArgs(tx, scope, labels, handle),
    claimableShape(scope, labels, handle),
  );
  return row === undefined ? null : jobFromRow(row);
}

const FIRST_CLAIMABLE = compiledStatement((db, arg, shape) => {
  const query = claimableQuery(db, arg, shape, 0).selectAll().orderBy('id').limit(1);
  return isPostgres(db) ? query.forUpdate().skipLocked() : query;
});

/**
 * Whether any job findFirstClaimable would consider exists, locked or not:
 * when it found none only because other transactions hold the rows
 * (PostgreSQL's SKIP LOCKED), the runner has not seen the last of the queue.
 */
export async function anyClaimable(
  db: Queryable,
  scope: ScopeColumns,
  labels: readonly string[],
  handle?: string,
): Promise<boolean> {
  const row = await ANY_CLAIMABLE.takeFirst(
    db,
    claimableArgs(db, scope, labels, handle),
    claimableShape(scope, labels, handle),
  );
  return row !== undefined;
}

const ANY_CLAIMABLE = compiledStatement((db, arg, shape) => claimableQuery(db, arg, shape, 0).select('id').limit(1));

/**
 * What changes the text of claimableQuery: the scope's kind, whether a handle
 * narrows it, how many labels the runner has (SQLite lists them).
 */
export function claimableShape(scope: ScopeColumns, labels: readonly string[], handle: string | undefined): string {
  const kind = scope.repoId !== 0 ? 'r' : scope.ownerId !== 0 ? 'o' : 'i';
  return `${kind}${handle === undefined ? 0 : 1}${labels.length}`;
}

/** claimableQuery's arguments, from its first slot on: the scope's id, the handle, the labels (as JSON on PostgreSQL). */
export function claimableArgs(
  db: Queryable,
  scope: ScopeColumns,
  labels: readonly string[],
  handle: string | undefined,
  before: readonly unknown[] = [],
): unknown[] {
  const scopeId = scope.repoId !== 0 ? scope.repoId : scope.ownerId;
  if (isPostgres(db)) return [...before, scopeId, handle ?? '', JSON.stringify(labels)];
  return [...before, scopeId, handle ?? '', '', ...labels];
}

/** The waiting jobs claimableShape describes; its arguments (claimableArgs) start at slot `first`. */
export function claimableQuery(db: Queryable, arg: ArgSlot, shape: string, first: number) {
  const kind = shape[0];
  const narrowed = shape[1] === '1';
  const labelCount = Number(shape.slice(2));
  let query = db.selectFrom('action_run_job').where('status', '=', ActionStatus.waiting).where('task_id', '=', 0);
  if (kind === 'r') query = query.where('repo_id', '=', arg<number>(first));
  else if (kind === 'o') query = query.where('owner_id', '=', arg<number>(first));
  if (narrowed) query = query.where('handle', '=', arg<string>(first + 1));
  if (isPostgres(db)) {
    // jsonb containment: every element of runs_on is one of the labels ([] is in everything).
    query = query.where(sql<boolean>`runs_on::jsonb <@ ${arg<string>(first + 2)}::jsonb`);
  } else if (labelCount === 0) {
    query = query.where(sql<boolean>`json_array_length(runs_on) = 0`);
  } else {
    const labels = Array.from({ length: labelCount }, (_, i) => arg<string>(first + 3 + i));
    query = query.where(
      sql<boolean>`not exists (select 1 from json_each(action_run_job.runs_on) as l where l.value not in (${sql.join(labels)}))`,
    );
  }
  return query;
}

export interface NewTaskToken {
  hash: string;
  lastEight: string;
}

/** The x-runner-request-key a claim was made under, and until when a retry may find it (Unix seconds). */
export interface ClaimRequestKey {
  key: string;
  expires: number;
}

export interface ClaimedJob {
  taskId: number;
  /** The job as it is after the claim: running, attempt at least 1, task_id set. */
  job: ActionRunJob;
  /** The job's run as the claim statement saw it, unlocked (RunProgress.settleClaimed decides from it). */
  run: ClaimedRunLook;
  /**
   * SQLite: the whole run as the claim read it, under the database's write
   * lock, which the claim holds until its commit: so nothing can change it
   * before then and settleClaimed needs no read of its own (null when the run
   * is gone). Undefined on PostgreSQL, whose claim reads it under a lock of
   * its own (settleClaimed).
   */
  lockedRun?: ActionRun | null;
  /** Null when the repository is gone. */
  refs: ClaimedPayloadRefs | null;
  /**
   * Whether the run's repository or its owner has an active webhook, read in
   * the claim's statement: when neither has, the webhook outbox needs no
   * lookup of its own for the claim's job event.
   */
  anyActiveHook: boolean;
}

export interface ClaimedRunLook {
  status: ActionStatusValue;
  jobConcurrency: boolean;
}

/** What the task payload needs besides the run and the job, read by the claim statement (task-payload.ts). */
export interface ClaimedPayloadRefs {
  repoOwnerId: number;
  repoOwnerName: string;
  repoName: string;
  /** Null when the trigger user has no row (the Actions user, or deleted): the payload resolves it. */
  triggerUserName: string | null;
  /**
   * The secrets a job of the repository sees, as stored (ciphertext): its
   * owner's and its own, in id order. SQLite's claim reads them; on
   * PostgreSQL a claim group (claim-groups.ts) reads those of all its jobs'
   * repositories in its second statement, and they are null for a
   * claim of its own, whose payload reads them after the commit: read in its
   * claim statement they made the bench no faster there (measured once the
   * deadlock of claims upgrading their run's lock was fixed, run-progress.ts).
   */
  secrets: StoredScopedValue[] | null;
  /** The same for Actions variables. */
  variables: StoredScopedValue[] | null;
}

/** A secret or variable row as the claim reads it: the owner's level has repoId 0, the repository's ownerId 0. */
export interface StoredScopedValue {
  ownerId: number;
  repoId: number;
  name: string;
  /** Ciphertext for a secret, the value for a variable. */
  data: string;
}

export type ClaimedRow = Selectable<ActionRunJobTable> & {
  run_status: ActionStatusValue;
  run_job_concurrency: number;
  repo_owner_id: number | null;
  repo_owner_name: string | null;
  repo_name: string | null;
  trigger_user_name: string | null;
  any_active_hook: number | boolean;
};

/**
 * The rows of `table` (secret or action_variable) a job of the repository
 * sees, its owner's and its own, as one JSON array of [owner_id, repo_id,
 * name, data] in id order: the claim's statement returns them, so the
 * payload needs no statement of its own for them. Read in the claim's
 * transaction, so a value changed before the claim is seen by it, as
 * Forgejo's FetchTask reads them for each task (routers/api/actions/runner/utils.go).
 * `repoId` and `ownerId` are SQL expressions of the claimed job's row.
 */
function scopedValuesJson(table: 'secret' | 'action_variable', repoId: string, ownerId: string) {
  const where = sql.raw(`(v.owner_id = ${ownerId} and v.repo_id = 0) or (v.owner_id = 0 and v.repo_id = ${repoId})`);
  return sql`(select json_group_array(json_array(v.owner_id, v.repo_id, v.name, v.data) order by v.id)
    from ${sql.table(table)} as v where ${where})`;
}

/**
 * Claims the oldest job findFirstClaimable would pick for the runner: the
 * task (running, with the token's digest, the job's fork flag) is inserted
 * and the job moved to running only while it is still waiting and
 * unassigned, in one statement on PostgreSQL (a data-modifying CTE: the
 * pick locked FOR UPDATE SKIP LOCKED, the task's id drawn from its sequence
 * first so the job and the task name each other) and in two on SQLite,
 * whose claim already holds the write lock (lockRunnerForClaim): the task
 * inserted from the picked row, then the job's conditional update. Null
 * when nothing in scope matches. Call inside the claim's transaction.
 *
 * The same statement returns what the claim needs next without another round
 * trip (on SQLite a select of its own, CLAIMED_SQLITE, in the same
 * transaction): the run as it saw it (unlocked; on SQLite the whole run, read
 * under the write lock, and the repository's secrets and variables too); the
 * repository's and the trigger user's names for the task payload; whether any
 * webhook could want the job's event. (Locking the run FOR SHARE in this statement too made 200 runners
 * claiming from four runs on two servers several times slower on PostgreSQL
 * than the lock in a statement of its own, which RunProgress.settleClaimed
 * takes.) With `lockRunner` the runner's row is locked first, as
 * lockRunnerForClaim does, inside the statement: nothing is claimed when the
 * runner is gone (on SQLite the insert, a write, holds the write lock from
 * its start, which is all lockRunnerForClaim's no-op write takes there).
 * Forgejo: models/actions/task.go (CreateTaskForRunner).
 */
export async function claimNextJob(
  tx: Queryable,
  scope: ScopeColumns,
  labels: readonly string[],
  handle: string | undefined,
  runnerId: number,
  token: NewTaskToken,
  now: number,
  requestKey: ClaimRequestKey | null = null,
  lockRunner = false,
): Promise<ClaimedJob | null> {
  const postgres = isPostgres(tx);
  const shape = claimableShape(scope, labels, handle);
  const args = claimableArgs(tx, scope, labels, handle, [
    runnerId,
    now,
    token.hash,
    token.lastEight,
    requestKey?.key ?? '',
    requestKey?.expires ?? 0,
  ]);
  const claimShape = `${lockRunner ? 'L' : 'N'}${shape}`;
  if (postgres) {
    const row = await CLAIM_POSTGRES.takeFirst(tx, args, claimShape);
    return row === undefined ? null : claimedFromRow(row);
  }
  const inserted = await CLAIM_SQLITE_TASK.execute(tx, args, claimShape);
  if (Number(inserted.numAffectedRows ?? 0n) === 0) return null;
  const taskId = Number(inserted.insertId);
  if ((await CLAIM_SQLITE_JOB.affected(tx, [taskId, now])) === 0) {
    // Under the write lock nothing can take the job between the two statements; never leave a task without its job.
    await tx.deleteFrom('action_task').where('id', '=', taskId).execute();
    return null;
  }
  const row = await CLAIMED_SQLITE.takeFirst(tx, [taskId]);
  if (row === undefined) throw new Error(`claimed task ${taskId} is not there`);
  return claimedFromValues(valuesOf(row));
}

/**
 * The last part of PostgreSQL's claim statements (ClaimedRow): the rows of
 * their `job` CTE (the jobs the statement marked running, RETURNING j.*)
 * with their run's status, what the task payload needs of the repository
 * and the trigger user, and whether an active webhook of the repository or
 * its owner could want the job's event. A claim of one and a group's claim
 * (group-claims.ts) end with it, so both read rows claimedFromRow maps.
 */
export const CLAIMED_FROM_JOB = sql`
  select job.*, r.status as run_status, r.job_concurrency as run_job_concurrency,
    repo.owner_id as repo_owner_id, repo.owner_name as repo_owner_name, repo.name as repo_name,
    u.name as trigger_user_name,
    exists (select 1 from webhook as w where w.is_active = 1
      and ((w.owner_id = 0 and w.repo_id = job.repo_id) or (w.owner_id = r.owner_id and w.repo_id = 0)))
      as any_active_hook
  from job join action_run as r on r.id = job.run_id
  left join repository as repo on repo.id = job.repo_id
  left join "user" as u on u.id = r.trigger_user_id`;

// The claim's statements take these arguments first, then claimableArgs'.
// 0 runner id, 1 now, 2 token hash, 3 its last eight, 4 request key, 5 its expiry.
const CLAIM_FIRST = 6;

/** PostgreSQL's claim; its shape is L (lock the runner) or N, then claimableShape. */
const CLAIM_POSTGRES = compiledStatement((db, arg, shape) => {
  const lockRunner = shape[0] === 'L';
  const runnerId = arg<number>(0);
  const now = arg<number>(1);
  let pick = claimableQuery(db, arg, shape.slice(1), CLAIM_FIRST);
  if (lockRunner) pick = pick.where(sql<boolean>`exists (select 1 from runner)`);
  const runnerLock = lockRunner
    ? sql`runner as (select id from action_runner where id = ${runnerId} for update),`
    : sql``;
  return sql<ClaimedRow>`
    with ${runnerLock}
    pick as (${pick.select('id').orderBy('id').limit(1).forUpdate().skipLocked()}),
    next_task as (select nextval(pg_get_serial_sequence('action_task', 'id')) as id from pick),
    job as (
      update action_run_job as j
      set task_id = next_task.id, status = ${ActionStatus.running},
          attempt = case when j.attempt < 1 then 1 else j.attempt end, started = ${now}, updated = ${now}
      from next_task
      where j.id = (select id from pick) and j.task_id = 0 and j.status = ${ActionStatus.waiting}
      returning j.*
    ),
    task as (
      insert into action_task (id, job_id, attempt, runner_id, status, started, repo_id, owner_id, commit_sha,
        is_fork_pull_request, token_hash, token_last_eight, runner_request_key, runner_request_key_expires,
        created, updated)
      select task_id, id, attempt, ${runnerId}, ${ActionStatus.running}, ${now}, repo_id, owner_id, commit_sha,
        is_fork_pull_request, ${arg<string>(2)}, ${arg<string>(3)}, ${arg<string>(4)}, ${arg<number>(5)}, ${now}, ${now}
      from job
    )
    ${CLAIMED_FROM_JOB}`;
});

/**
 * SQLite's claim, first statement: the task, from the picked job; its shape
 * is L or N, then claimableShape. A write, so it takes the database's write
 * lock before it reads (as lockRunnerForClaim's would), and with L nothing is
 * inserted when the runner is gone. SQLite's claim statements return nothing
 * (the task's id is the connection's last insert id): a RETURNING clause
 * runs as a trigger program of its own per row, and on the job's update it
 * cost more than the update itself; CLAIMED_SQLITE then reads what the claim
 * needs in one select.
 */
const CLAIM_SQLITE_TASK = compiledStatement((db, arg, shape) => {
  const now = arg<number>(1);
  const claimable = claimableQuery(db, arg, shape.slice(1), CLAIM_FIRST);
  const pick = (
    shape[0] === 'L'
      ? claimable.where(sql<boolean>`exists (select 1 from action_runner where id = ${arg<number>(0)})`)
      : claimable
  )
    .select('id')
    .orderBy('id')
    .limit(1);
  return sql`
    insert into action_task (job_id, attempt, runner_id, status, started, repo_id, owner_id, commit_sha,
      is_fork_pull_request, token_hash, token_last_eight, runner_request_key, runner_request_key_expires,
      created, updated)
    select id, max(attempt, 1), ${arg<number>(0)}, ${ActionStatus.running}, ${now}, repo_id, owner_id, commit_sha,
      is_fork_pull_request, ${arg<string>(2)}, ${arg<string>(3)}, ${arg<string>(4)}, ${arg<number>(5)}, ${now}, ${now}
    from action_run_job where id = (${pick})`;
});

/** SQLite's claim, second statement: the task's job, if still waiting and unassigned (0 task id, 1 now). */
const CLAIM_SQLITE_JOB = compiledStatement((_db, arg) => {
  const now = arg<number>(1);
  return sql`
    update action_run_job
    set task_id = ${arg<number>(0)}, status = ${ActionStatus.running}, attempt = max(attempt, 1), started = ${now}, updated = ${now}
    where id = (select t.job_id from action_task as t where t.id = ${arg<number>(0)})
      and task_id = 0 and status = ${ActionStatus.waiting}`;
});

/** Where CLAIMED_SQLITE's values start: the job's, the run's (all null when it is gone), then the rest. */
const CLAIMED_RUN_AT = JOB_COLUMNS.length;
const CLAIMED_REST_AT = CLAIMED_RUN_AT + RUN_COLUMNS.length;

/**
 * SQLite's claim, third statement (0 task id): the claimed job and its run,
 * what the task payload needs of the repository, the trigger user, the
 * secrets and variables, and whether any webhook could want the job's event,
 * as arrays of values (array-rows.ts): 60 columns, cheaper read so than as an
 * object.
 */
const CLAIMED_SQLITE = compiledArrayStatement((_db, arg) => {
  // Every name distinct (the run's prefixed), so that rows read as objects keep every column (valuesOf).
  const columns = (alias: string, names: readonly string[], prefix: string) =>
    sql.raw(names.map((name) => `${alias}.${name}${prefix === '' ? '' : ` as ${prefix}${name}`}`).join(', '));
  return sql`
    select ${columns('j', JOB_COLUMNS, '')}, ${columns('r', RUN_COLUMNS, 'r_')},
      repo.owner_id as repo_owner_id, repo.owner_name as repo_owner_name, repo.name as repo_name,
      u.name as trigger_user_name,
      exists (select 1 from webhook as w where w.is_active = 1
        and ((w.owner_id = 0 and w.repo_id = j.repo_id) or (w.owner_id = r.owner_id and w.repo_id = 0)))
        as any_active_hook,
      ${scopedValuesJson('secret', 'j.repo_id', 'repo.owner_id')} as secrets_json,
      ${scopedValuesJson('action_variable', 'j.repo_id', 'repo.owner_id')} as variables_json
    from action_task as t
    join action_run_job as j on j.id = t.job_id
    left join action_run as r on r.id = j.run_id
    left join repository as repo on repo.id = j.repo_id
    left join "user" as u on u.id = r.trigger_user_id
    where t.id = ${arg<number>(0)}`;
});

/** CLAIMED_SQLITE's row. */
function claimedFromValues(values: readonly unknown[]): ClaimedJob {
  const job = jobFromRow(jobRowFromValues(values, 0));
  const run = values[CLAIMED_RUN_AT] === null ? null : runFromRow(runRowFromValues(values, CLAIMED_RUN_AT));
  const at = CLAIMED_REST_AT;
  const repoOwnerId = values[at] as number | null;
  const repoOwnerName = values[at + 1] as string | null;
  const repoName = values[at + 2] as string | null;
  return {
    taskId: job.taskId,
    job,
    // A run that is gone reads as no status, as PostgreSQL's claim reads it: settleClaimed settles (and finds nothing).
    run: { status: run?.status ?? ActionStatus.unknown, jobConcurrency: run?.jobConcurrency ?? false },
    lockedRun: run,
    refs:
      repoOwnerId === null || repoOwnerName === null || repoName === null
        ? null
        : {
            repoOwnerId,
            repoOwnerName,
            repoName,
            triggerUserName: values[at + 3] as string | null,
            secrets: storedValues(values[at + 5] as string | null),
            variables: storedValues(values[at + 6] as string | null),
          },
    anyActiveHook: Number(values[at + 4]) === 1,
  };
}

export function claimedFromRow(row: ClaimedRow): ClaimedJob {
  // The extra columns ride along into jobFromRow, which reads the job's own: no copy of the row without them.
  const { repo_owner_id: repoOwnerId, repo_owner_name: repoOwnerName, repo_name: repoName } = row;
  return {
    taskId: row.task_id,
    job: jobFromRow(row),
    run: { status: Number(row.run_status) as ActionStatusValue, jobConcurrency: Number(row.run_job_concurrency) === 1 },
    refs:
      repoOwnerId === null || repoOwnerName === null || repoName === null
        ? null
        : {
            repoOwnerId: Number(repoOwnerId),
            repoOwnerName,
            repoName,
            triggerUserName: row.trigger_user_name,
            secrets: null,
            variables: null,
          },
    anyActiveHook: row.any_active_hook === true || Number(row.any_active_hook) === 1,
  };
}

/** scopedValuesJson's array (or a group's, group-claims.ts) as rows (none when the repository is gone). */
export function storedValues(json: string | null): StoredScopedValue[] {
  if (json === null) return [];
  const rows = JSON.parse(json) as [number, number, string, string][];
  return rows.map(([ownerId, repoId, name, data]) => ({
    ownerId: Number(ownerId),
    repoId: Number(repoId),
    name,
    data,
  }));
}

/** One row per step of the job, in order, all waiting. */
export async function insertTaskSteps(
  tx: Queryable,
  taskId: number,
  repoId: number,
  names: readonly string[],
  now: number,
): Promise<void> {
  if (names.length === 0) return;
  await TASK_STEPS.execute(tx, [taskId, repoId, now, ...names], String(names.length));
}

/** One row per name: 0 task id, 1 repository id, 2 now, then the names; the shape is how many. */
const TASK_STEPS = compiledStatement((db, arg, shape) =>
  db.insertInto('action_task_step').values(
    Array.from({ length: Number(shape) }, (_, index) => ({
      task_id: arg<number>(0),
      name: arg<string>(3 + index),
      step_index: index,
      repo_id: arg<number>(1),
      status: ActionStatus.waiting,
      created: arg<number>(2),
      updated: arg<number>(2),
    })),
  ),
);

/**
 * Undoes a claim whose answer never reached the runner: the job waits again
 * for the next runner as its next attempt: the lost claim used one up
 * (attempt + 1), so the next claim's task and workflow_job events carry a new
 * attempt number. Only while the task is still running and still the job's;
 * true when undone.
 */
export async function releaseClaim(tx: Queryable, taskId: number, jobId: number, now: number): Promise<boolean> {
  const job = await tx
    .updateTable('action_run_job')
    .set({ task_id: 0, status: ActionStatus.waiting, started: 0, attempt: sql<number>`attempt + 1`, updated: now })
    .where('id', '=', jobId)
    .where('task_id', '=', taskId)
    .where('status', '=', ActionStatus.running)
    .executeTakeFirst();
  if (Number(job.numUpdatedRows) === 0) return false;
  await tx.deleteFrom('action_task_step').where('task_id', '=', taskId).execute();
  await tx.deleteFrom('action_task_output').where('task_id', '=', taskId).execute();
  await tx.deleteFrom('action_task').where('id', '=', taskId).execute();
  return true;
}

/** A task as FetchTask needs it to answer again (request-key recovery). */
export interface ClaimedTaskRow {
  id: number;
  jobId: number;
}

/**
 * The tasks the runner was given under `requestKey` that are still running
 * and whose key has not expired, oldest first (Forgejo:
 * GetTasksByRunnerRequestKey, which also requires the runner: a leaked key
 * alone gives nothing).
 */
export async function findTasksByRequestKey(
  db: Queryable,
  runnerId: number,
  requestKey: string,
  now: number,
): Promise<ClaimedTaskRow[]> {
  const rows = await db
    .selectFrom('action_task')
    .select(['id', 'job_id'])
    .where('runner_id', '=', runnerId)
    .where('runner_request_key', '=', requestKey)
    .where('runner_request_key_expires', '>', now)
    .where('status', '=', ActionStatus.running)
    .orderBy('id')
    .execute();
  return rows.map((row) => ({ id: row.id, jobId: row.job_id }));
}

/** A recovered task gets a new token: only the digest of the old one was kept. */
export async function replaceTaskToken(
  db: Queryable,
  taskId: number,
  token: NewTaskToken,
  now: number,
): Promise<boolean> {
  const result = await db
    .updateTable('action_task')
    .set({ token_hash: token.hash, token_last_eight: token.lastEight, updated: now })
    .where('id', '=', taskId)
    .where('status', '=', ActionStatus.running)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export async function findJobById(db: Queryable, jobId: number): Promise<ActionRunJob | null> {
  const row = await db.selectFrom('action_run_job').selectAll().where('id', '=', jobId).executeTakeFirst();
  return row === undefined ? null : jobFromRow(row);
}

/** The outputs each task stored, keyed by task id. */
export async function outputsOfTasks(
  db: Queryable,
  taskIds: readonly number[],
): Promise<Map<number, Map<string, string>>> {
  const outputs = new Map<number, Map<string, string>>();
  if (taskIds.length === 0) return outputs;
  const rows = await db
    .selectFrom('action_task_output')
    .select(['task_id', 'output_key', 'output_value'])
    .where('task_id', 'in', [...taskIds])
    .orderBy('id')
    .execute();
  for (const row of rows) {
    let map = outputs.get(row.task_id);
    if (map === undefined) outputs.set(row.task_id, (map = new Map()));
    map.set(row.output_key, row.output_value);
  }
  return outputs;
}
