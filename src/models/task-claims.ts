// Claiming waiting jobs for runners: the queries behind FetchTask. A claim is
// one SELECT (findFirstClaimable) picking the oldest waiting job in the
// runner's scope whose runs-on labels the runner has, then claimJob, in the
// runner's transaction. Several Gantry processes may share one PostgreSQL
// database, so nothing here trusts a value it read earlier: the conditional
// UPDATE of the job row (task_id = 0 AND status = waiting) decides who gets a
// job, and on PostgreSQL the pick is locked with FOR UPDATE SKIP LOCKED so that
// racing runners spread over the queue instead of queueing behind one row
// (graphile-worker's pattern).
// Forgejo: models/actions/task.go (CreateTaskForRunner).
import { sql } from 'kysely';
import { ActionStatus } from '../modules/actions-status.ts';
import { jobFromRow } from './action-runs.ts';
import type { ActionRunJob } from './action-runs.ts';
import { isPostgres } from './database.ts';
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
  if (isPostgres(tx)) {
    const row = await tx
      .selectFrom('action_runner')
      .select('id')
      .where('id', '=', runnerId)
      .forUpdate()
      .executeTakeFirst();
    return row !== undefined;
  }
  const result = await tx
    .updateTable('action_runner')
    .set({ updated: sql<number>`updated` })
    .where('id', '=', runnerId)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

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
  const query = claimableQuery(tx, scope, labels, handle).selectAll().orderBy('id').limit(1);
  const row = await (isPostgres(tx) ? query.forUpdate().skipLocked() : query).executeTakeFirst();
  return row === undefined ? null : jobFromRow(row);
}

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
  const row = await claimableQuery(db, scope, labels, handle).select('id').limit(1).executeTakeFirst();
  return row !== undefined;
}

function claimableQuery(tx: Queryable, scope: ScopeColumns, labels: readonly string[], handle?: string) {
  const postgres = isPostgres(tx);
  let query = tx.selectFrom('action_run_job').where('status', '=', ActionStatus.waiting).where('task_id', '=', 0);
  if (scope.repoId !== 0) query = query.where('repo_id', '=', scope.repoId);
  else if (scope.ownerId !== 0) query = query.where('owner_id', '=', scope.ownerId);
  if (handle !== undefined) query = query.where('handle', '=', handle);
  if (postgres) {
    // jsonb containment: every element of runs_on is one of the labels ([] is in everything).
    query = query.where(sql<boolean>`runs_on::jsonb <@ ${JSON.stringify(labels)}::jsonb`);
  } else if (labels.length === 0) {
    query = query.where(sql<boolean>`json_array_length(runs_on) = 0`);
  } else {
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
}

/**
 * Gives `job` to the runner: inserts the task (running, with the token's
 * digest), then moves the job to running only if it is still waiting and
 * unassigned. When that conditional update changes nothing another runner won,
 * the task row is removed again and null is returned. Call inside the claim's
 * transaction.
 */
export async function claimJob(
  tx: Queryable,
  job: ActionRunJob,
  runnerId: number,
  token: NewTaskToken,
  now: number,
  requestKey: ClaimRequestKey | null = null,
): Promise<ClaimedJob | null> {
  const task = await tx
    .insertInto('action_task')
    .values({
      job_id: job.id,
      // The job's attempt, numbered from 1 (a rerun has already counted its own).
      attempt: Math.max(job.attempt, 1),
      runner_id: runnerId,
      status: ActionStatus.running,
      started: now,
      repo_id: job.repoId,
      owner_id: job.ownerId,
      commit_sha: job.commitSha,
      is_fork_pull_request: 0,
      token_hash: token.hash,
      token_last_eight: token.lastEight,
      ...(requestKey === null
        ? {}
        : { runner_request_key: requestKey.key, runner_request_key_expires: requestKey.expires }),
      created: now,
      updated: now,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const updated = await tx
    .updateTable('action_run_job')
    .set({
      task_id: task.id,
      status: ActionStatus.running,
      attempt: sql<number>`case when attempt < 1 then 1 else attempt end`,
      started: now,
      updated: now,
    })
    .where('id', '=', job.id)
    .where('task_id', '=', 0)
    .where('status', '=', ActionStatus.waiting)
    .returningAll()
    .executeTakeFirst();
  if (updated === undefined) {
    await tx.deleteFrom('action_task').where('id', '=', task.id).execute();
    return null;
  }
  // The fork flag lives on the job; copy it now that the row is ours.
  if (updated.is_fork_pull_request !== 0) {
    await tx
      .updateTable('action_task')
      .set({ is_fork_pull_request: updated.is_fork_pull_request })
      .where('id', '=', task.id)
      .execute();
  }
  return { taskId: task.id, job: jobFromRow(updated) };
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
  await tx
    .insertInto('action_task_step')
    .values(
      names.map((name, index) => ({
        task_id: taskId,
        name,
        step_index: index,
        repo_id: repoId,
        status: ActionStatus.waiting,
        created: now,
        updated: now,
      })),
    )
    .execute();
}

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
