// Claims of several runners made by one statement (PostgreSQL): the runners
// of a group see the same waiting jobs (one scope, one label set), so the N
// oldest claimable jobs are picked FOR UPDATE SKIP LOCKED and paired with the
// N runners, oldest job to the runner that asked first. Each runner gets one
// job or none, and a job one runner at most, by the same conditional UPDATE
// of the job row (task_id = 0 AND status = waiting) as a claim of one
// (task-claims.ts). The runners' rows are locked first, in id order, as a
// claim of one locks its runner inside its statement: nothing is claimed for
// a runner deleted meanwhile, and two groups sharing a runner cannot
// deadlock on their rows.
//
// A runner that sent a request key gets no job when a task claimed under
// that key is still running (the retry of a FetchTask whose answer got lost:
// it is answered with that task, as a claim of one is, runner-protocol.ts).
// That check must see every claim committed under the runner's row lock. The
// claim statement locks the rows itself, but its reads keep the snapshot
// from before its wait for a lock: it leaves out the keys it sees claimed,
// and the group's second statement, whose snapshot is taken once the locks
// are held, looks again (afterGroupClaim's keyTaken). A key claimed in the
// meantime (a retry served by another process) sends the group back: it
// rolls back and runs again with the rows locked in a statement of their
// own first (lockRunnersForClaim), its claim statement then seeing every
// such claim. The task claimed for a key records it, in the same statement.
//
// A second statement (afterGroupClaim) does the rest of the group's work in
// the database in one round trip: the steps of every claimed task, the lock
// claims share on each run (when every run of the group takes that one), and
// the secrets and variables of the runs' repositories.
//
// Cost of a crash: none beyond the transaction's; the statements are part of
// the claim's transaction, and nothing is claimed until it commits.
// Forgejo: models/actions/task.go (CreateTaskForRunner), once per runner;
// services/actions/task.go (a request key's tasks, GetTasksByRunnerRequestKey).
import { sql } from 'kysely';
import type { Selectable } from 'kysely';
import type { ActionRunTable } from './tables.ts';
import { ActionStatus } from '../modules/actions-status.ts';
import type { ScopeColumns } from '../modules/scope.ts';
import { runFromRow } from './action-runs.ts';
import type { ActionRun } from './action-runs.ts';
import { compiledStatement } from './compiled-statements.ts';
import { isPostgres } from './database.ts';
import type { Queryable } from './database.ts';
import {
  CLAIMED_FROM_JOB,
  claimableArgs,
  claimableQuery,
  claimableShape,
  claimedFromRow,
  storedValues,
} from './task-claims.ts';
import type { ClaimedJob, ClaimedRow, NewTaskToken, StoredScopedValue } from './task-claims.ts';

/** What a job of a repository sees, as the payload reads it (task-payload.ts): secrets and variables as stored. */
export interface RepositoryValues {
  secrets: StoredScopedValue[];
  variables: StoredScopedValue[];
}

/** A runner of a group and the token of the task it would get. */
export interface GroupClaimant {
  runnerId: number;
  token: NewTaskToken;
  /** The x-runner-request-key it sent ('' for none). */
  requestKey?: string;
}

/** What a group's claim statement did: the claims made, and the runners whose request key has a task already. */
export interface GroupClaims {
  claimed: GroupClaimed[];
  /** Runners whose request key has a running task (claimed earlier, by any process): nothing claimed for them. */
  claimedUnderKey: Set<number>;
}

/** A claim of a group: ClaimedJob, and the runner it went to. */
export interface GroupClaimed extends ClaimedJob {
  runnerId: number;
}

/**
 * Locks the rows of `runnerIds` in id order, inside the caller's
 * transaction, before a group's claim with request keys: the claim
 * statement then sees every task another transaction claimed under those
 * rows' locks (a retry of the same key served by another process).
 * PostgreSQL only.
 */
export async function lockRunnersForClaim(tx: Queryable, runnerIds: readonly number[]): Promise<void> {
  if (!isPostgres(tx)) throw new Error('lockRunnersForClaim is for PostgreSQL');
  await LOCK_RUNNERS.execute(tx, [[...runnerIds]]);
}

const LOCK_RUNNERS = compiledStatement(
  (_db, arg) => sql`select id from action_runner where id = any(${arg<number[]>(0)}::bigint[]) order by id for update`,
);

/**
 * Claims up to one job for each of `claimants` (distinct runners of `scope`
 * with `labels`), in one statement, inside the caller's transaction: the
 * oldest claimable jobs, the first to the first claimant. Returns the claims
 * made, in job id order; a claimant without one is left without (fewer jobs
 * than runners, its row is gone, or its request key has a running task:
 * claimedUnderKey). With request keys, lockRunnersForClaim must have locked
 * the claimants' rows first in the transaction (see the header); each key
 * is kept on its task until `keyExpires`. PostgreSQL only: SQLite claims
 * under its write lock one runner at a time (claimNextJob).
 */
export async function claimJobsForRunners(
  tx: Queryable,
  scope: ScopeColumns,
  labels: readonly string[],
  claimants: readonly GroupClaimant[],
  now: number,
  keyExpires = 0,
): Promise<GroupClaims> {
  if (!isPostgres(tx)) throw new Error('claimJobsForRunners is for PostgreSQL');
  if (claimants.length === 0) return { claimed: [], claimedUnderKey: new Set() };
  const keyed = claimants.some((c) => (c.requestKey ?? '') !== '');
  const args = claimableArgs(tx, scope, labels, undefined, [
    claimants.map((c) => c.runnerId),
    claimants.map((c) => c.token.hash),
    claimants.map((c) => c.token.lastEight),
    now,
    keyed ? claimants.map((c) => c.requestKey ?? '') : [],
    keyExpires,
  ]);
  const { rows } = await CLAIM_GROUP.execute(
    tx,
    args,
    `${keyed ? 'K' : 'N'}${claimableShape(scope, labels, undefined)}`,
  );
  const claimed: GroupClaimed[] = [];
  const claimedUnderKey = new Set<number>();
  for (const row of rows) {
    if (row.key_claimed_runner_id !== null && row.key_claimed_runner_id !== undefined)
      claimedUnderKey.add(Number(row.key_claimed_runner_id));
    else claimed.push({ ...claimedFromRow(row), runnerId: Number(row.claim_runner_id) });
  }
  return { claimed, claimedUnderKey };
}

// 0 runner ids, 1 token hashes, 2 their last eights, 4 request keys ('' for
// none; arrays, one entry per claimant, in the claimants' order; keys only in
// a K shape), 3 now, 5 the keys' expiry; then claimableArgs'.
const GROUP_FIRST = 6;

/** The group's claim; its shape is K (request keys) or N, then claimableShape. */
const CLAIM_GROUP = compiledStatement((db, arg, fullShape) => {
  const keyed = fullShape[0] === 'K';
  const shape = fullShape.slice(1);
  const now = arg<number>(3);
  const pick = claimableQuery(db, arg, shape, GROUP_FIRST)
    .select('id')
    .orderBy('id')
    .limit(sql<number>`(select count(*) from runner)`)
    .forUpdate()
    .skipLocked();
  // A key with a running task claimed under it (its runner's row locked by
  // lockRunnersForClaim before this statement's snapshot): that runner gets no job.
  // A runner deleted meanwhile gets nothing either way, as a claim of one.
  const keyedRunners = keyed
    ? sql`
    given as (
      select w.id, w.hash, w.last_eight, w.key, w.ord
      from unnest(${arg<number[]>(0)}::bigint[], ${arg<string[]>(1)}::text[], ${arg<string[]>(2)}::text[],
        ${arg<string[]>(4)}::text[]) with ordinality as w(id, hash, last_eight, key, ord)
    ),
    key_claimed as (
      select g.id from given as g
      where g.key <> '' and g.id in (select id from locked) and exists (select 1 from action_task as t
        where t.runner_id = g.id and t.runner_request_key = g.key
          and t.runner_request_key_expires > ${now} and t.status = ${ActionStatus.running})
    ),
    runner as (
      select g.id, g.hash, g.last_eight, g.key, row_number() over (order by g.ord) as n
      from given as g
      where g.id in (select id from locked) and g.id not in (select id from key_claimed)
    ),`
    : sql`
    runner as (
      select w.id, w.hash, w.last_eight, '' as key, row_number() over (order by w.ord) as n
      from unnest(${arg<number[]>(0)}::bigint[], ${arg<string[]>(1)}::text[], ${arg<string[]>(2)}::text[])
        with ordinality as w(id, hash, last_eight, ord)
      where w.id in (select id from locked)
    ),`;
  const keyExpires = keyed ? sql`case when pair.key = '' then 0 else ${arg<number>(5)} end` : sql`0`;
  // The job's update finds each picked job by its id alone: its still-waiting check is written
  // so that no index can serve it (`is not distinct from`). Written as plain equalities, a plan
  // made while few jobs waited (the statement is prepared, its generic plan kept per connection)
  // walked every waiting job through the status index and compared each with every pair: a group
  // of 64 with 1,600 jobs queued made 103,000 comparisons (47 ms under auto_explain's timing in
  // the throughput bench), its runners' and jobs' locks held.
  const waitingStill = sql`(j.task_id, j.status) is not distinct from (0, ${ActionStatus.waiting})`;
  const claimedRows = sql`${CLAIMED_FROM_JOB}`;
  // The runners whose key was claimed come back as rows of their own (the claims' columns null).
  const result = keyed
    ? sql`select c.*, k.id as key_claimed_runner_id
    from (${claimedRows}) as c full join key_claimed as k on false
    order by c.id`
    : sql`${claimedRows}
    order by job.id`;
  return sql<ClaimedRow & { claim_runner_id: number | string; key_claimed_runner_id?: number | string | null }>`
    with locked as (
      select id from action_runner where id = any(${arg<number[]>(0)}::bigint[]) order by id for update
    ),
    ${keyedRunners}
    pick as (${pick}),
    picked as (select id, row_number() over (order by id) as n from pick),
    pair as (
      select picked.id as job_id, runner.id as runner_id, runner.hash, runner.last_eight, runner.key,
        nextval(pg_get_serial_sequence('action_task', 'id')) as task_id
      from picked join runner on runner.n = picked.n
    ),
    job as (
      update action_run_job as j
      set task_id = pair.task_id, status = ${ActionStatus.running},
          attempt = case when j.attempt < 1 then 1 else j.attempt end, started = ${now}, updated = ${now}
      from pair
      where j.id = pair.job_id and ${waitingStill}
      returning j.*, pair.runner_id as claim_runner_id
    ),
    task as (
      insert into action_task (id, job_id, attempt, runner_id, status, started, repo_id, owner_id, commit_sha,
        is_fork_pull_request, token_hash, token_last_eight, runner_request_key, runner_request_key_expires,
        created, updated)
      select job.task_id, job.id, job.attempt, job.claim_runner_id, ${ActionStatus.running}, ${now}, job.repo_id,
        job.owner_id, job.commit_sha, job.is_fork_pull_request, pair.hash, pair.last_eight, pair.key, ${keyExpires},
        ${now}, ${now}
      from job join pair on pair.job_id = job.id
    )
    ${result}`;
});

/** The steps of one claimed task: its id, its repository, its steps' names in order. */
export interface TaskStepNames {
  taskId: number;
  repoId: number;
  names: readonly string[];
}

/** A run a group claimed jobs of: its id, its repository and that repository's owner (0 when it is gone: no values). */
export interface ClaimedRunRef {
  runId: number;
  repoId: number;
  ownerId: number;
}

/** What a group's second statement read: each run it locked, and each run's repository's values. */
export interface AfterClaim {
  /**
   * Whether a runner of `keyed` has a running task under its request key
   * that this group did not claim (claimed by another transaction before
   * this group took the runner's row lock): the group must roll back and run
   * again with the keys looked up first (lockRunnersForClaim).
   */
  keyTaken: boolean;
  /** The runs locked FOR SHARE (absent: not asked to lock; null: gone), as locked. */
  locked: Map<number, ActionRun | null>;
  /** The secrets and variables the jobs of each run see, by run id. */
  values: Map<number, RepositoryValues>;
}

/**
 * A group's second statement, after its claim (PostgreSQL): inserts every
 * claimed task's steps (all waiting, one row per step), locks FOR SHARE the
 * runs of `lockRunIds` in run id order, the lock claims share
 * (RunProgress.lockForClaim: the caller passes them only when every run of
 * the group takes that one), and reads the secrets and variables the jobs
 * of each of `runs` see (its repository's owner's and its own, each in id
 * order, as listScopedValuesForRepository reads them). One round trip where
 * it took one per run and two more (the steps, then after the commit the
 * values). The values are read in the claim's transaction, after its claim:
 * a value changed before the claim is seen by it, as Forgejo's FetchTask
 * reads them for each task (routers/api/actions/runner/utils.go).
 */
export async function afterGroupClaim(
  tx: Queryable,
  tasks: readonly TaskStepNames[],
  runs: readonly ClaimedRunRef[],
  lockRunIds: readonly number[],
  now: number,
  /** Runners whose request key the claim did not look up under their row locks first (their keys). */
  keyed: readonly { runnerId: number; key: string }[],
  /** Whether the runs' locks give up after GROUP_LOCK_TIMEOUT (the transaction's lock waits from here on). */
  guarded = false,
): Promise<AfterClaim> {
  if (!isPostgres(tx)) throw new Error('afterGroupClaim is for PostgreSQL');
  const taskIds: number[] = [];
  const names: string[] = [];
  const indexes: number[] = [];
  const repoIds: number[] = [];
  for (const task of tasks)
    task.names.forEach((name, index) => {
      taskIds.push(task.taskId);
      names.push(name);
      indexes.push(index);
      repoIds.push(task.repoId);
    });
  const { rows } = await AFTER_GROUP_CLAIM.execute(
    tx,
    [
      taskIds,
      names,
      indexes,
      repoIds,
      now,
      [...lockRunIds].sort((a, b) => a - b),
      runs.map((run) => run.runId),
      runs.map((run) => run.repoId),
      runs.map((run) => run.ownerId),
      keyed.map((k) => k.runnerId),
      keyed.map((k) => k.key),
      // The tasks the group claimed, which the key check leaves out.
      tasks.map((task) => task.taskId),
    ],
    guarded ? 'G' : 'N',
  );
  const locked = new Map<number, ActionRun | null>(lockRunIds.map((id) => [id, null]));
  const values = new Map<number, RepositoryValues>();
  let keyTaken = false;
  for (const row of rows) {
    if (row.key_taken === true) keyTaken = true;
    if (row.claimed_run_id === null) continue;
    const runId = Number(row.claimed_run_id);
    if (row.id !== null) locked.set(runId, runFromRow(row as Selectable<ActionRunTable>));
    values.set(runId, { secrets: storedValues(row.secrets_json), variables: storedValues(row.variables_json) });
  }
  return { locked, values, keyTaken };
}

/**
 * How long a guarded group waits for a run's lock before it gives up
 * (lock_not_available) and runs again unguarded. A claim locks the jobs it
 * picks before its run, a final report its run before its jobs; and a claim
 * whose snapshot predates another group's commit locks the jobs that group
 * just claimed too (PostgreSQL keeps the lock of a row it locked and then
 * found changed), so a report of such a job, holding the job's run, can wait
 * for the claim while the claim waits for the run: a deadlock PostgreSQL
 * breaks after its deadlock_timeout (1 s), every runner of the group waiting
 * that long. Given up after 100 ms, the group's transaction ends, the report
 * goes on, and the group runs again at once; a run's lock held that long by
 * a report costs the group one run more.
 */
const GROUP_LOCK_TIMEOUT = '100ms';

/**
 * Bounds the rest of a guarded group's transaction's lock waits at
 * GROUP_LOCK_TIMEOUT, for a group whose runs' locks afterGroupClaim did not
 * take (one of its runs is settled whole: RunProgress.lockForClaim takes each).
 * PostgreSQL only.
 */
export async function boundGroupLockWaits(tx: Queryable): Promise<void> {
  if (!isPostgres(tx)) throw new Error('boundGroupLockWaits is for PostgreSQL');
  await BOUND_LOCK_WAITS.execute(tx, []);
}

const BOUND_LOCK_WAITS = compiledStatement(
  () => sql`select set_config('lock_timeout', ${sql.lit(GROUP_LOCK_TIMEOUT)}, true)`,
);

// 0-3 the steps (task ids, names, indexes, repository ids), 4 now, 5 the run
// ids to lock, 6-8 the runs whose values are read (ids, repository ids,
// owner ids), 9-10 the runners whose keys are looked up (ids, keys), 11 the
// tasks the group claimed.
const AFTER_GROUP_CLAIM = compiledStatement((_db, arg, shape) => {
  const now = arg<number>(4);
  // Evaluated once, before the first run is locked (an init plan of the lock's scan).
  const guard =
    shape === 'G' ? sql` and (select set_config('lock_timeout', ${GROUP_LOCK_TIMEOUT}, true)) is not null` : sql``;
  const values = (table: 'secret' | 'action_variable') => sql`(
    select coalesce(json_agg(json_build_array(v.owner_id, v.repo_id, v.name, v.data) order by v.id), '[]')::text
    from ${sql.table(table)} as v
    where (v.owner_id = c.owner_id and v.repo_id = 0) or (v.owner_id = 0 and v.repo_id = c.repo_id))`;
  // The locks are taken by their CTE alone, in id order (LockRows above the sort), and the run
  // read from it is its newest version, which a lock that waited reads (not the statement's snapshot).
  return sql<
    Partial<Selectable<ActionRunTable>> & {
      claimed_run_id: number | string | null;
      key_taken: boolean;
      secrets_json: string;
      variables_json: string;
    }
  >`
    with steps as (
      insert into action_task_step (task_id, name, step_index, repo_id, status, created, updated)
      select s.task_id, s.name, s.step_index, s.repo_id, ${ActionStatus.waiting}, ${now}, ${now}
      from unnest(${arg<number[]>(0)}::bigint[], ${arg<string[]>(1)}::text[], ${arg<number[]>(2)}::bigint[],
        ${arg<number[]>(3)}::bigint[]) as s(task_id, name, step_index, repo_id)
    ),
    locked as materialized (
      select r.* from action_run as r where r.id = any(${arg<number[]>(5)}::bigint[])${guard}
      order by r.id for share
    ),
    key_check as (
      select exists (
        select 1 from unnest(${arg<number[]>(9)}::bigint[], ${arg<string[]>(10)}::text[]) as k(runner_id, key)
        join action_task as t on t.runner_id = k.runner_id and t.runner_request_key = k.key
        where t.id <> all(${arg<number[]>(11)}::bigint[])
          and t.runner_request_key_expires > ${now} and t.status = ${ActionStatus.running}
      ) as key_taken
    )
    select k.key_taken, c.id as claimed_run_id, l.*, ${values('secret')} as secrets_json,
      ${values('action_variable')} as variables_json
    from key_check as k
    left join (
      unnest(${arg<number[]>(6)}::bigint[], ${arg<number[]>(7)}::bigint[], ${arg<number[]>(8)}::bigint[])
        as c(id, repo_id, owner_id)
      left join locked as l on l.id = c.id
    ) on true`;
});
