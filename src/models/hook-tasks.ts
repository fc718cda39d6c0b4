// The webhook outbox (hook_task) and its attempt history (hook_task_attempt):
// enqueue in the caller's transaction, claim due rows with a lease, record
// each attempt. Two workers never hold one row: on PostgreSQL a claim is one
// UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED) (graphile-worker's
// get_job, in one statement); SQLite has no row locks but serialises
// writers, so an UPDATE that re-checks the row is still claimable is enough.
import type { Expression, ExpressionBuilder, Insertable, Selectable, SqlBool } from 'kysely';
import { sql } from 'kysely';
import { isPostgres } from './database.ts';
import type { Queryable } from './database.ts';
import type { Database, HookTaskAttemptTable, HookTaskTable } from './tables.ts';

export type HookTask = Selectable<HookTaskTable>;
export type HookTaskAttempt = Selectable<HookTaskAttemptTable>;

export const HookTaskStatus = { pending: 0, delivering: 1, delivered: 2, failed: 3 } as const;

export interface NewHookTask {
  hookId: number;
  uuid: string;
  eventType: string;
  payload: string;
  isRedelivery?: boolean;
  nowMs: number;
}

function hookTaskRow(task: NewHookTask) {
  return {
    hook_id: task.hookId,
    uuid: task.uuid,
    event_type: task.eventType,
    payload_content: task.payload,
    next_attempt_at: task.nowMs,
    is_redelivery: task.isRedelivery ? 1 : 0,
    created: task.nowMs,
    updated: task.nowMs,
  };
}

export async function insertHookTask(db: Queryable, task: NewHookTask): Promise<number> {
  const row = await db.insertInto('hook_task').values(hookTaskRow(task)).returning('id').executeTakeFirstOrThrow();
  return row.id;
}

// 8 columns a row: far under SQLite's 32,766 parameters.
const TASKS_PER_INSERT = 1000;

/** Many rows in few statements (one event for many hooks: a push to an organization with 100 hooks). */
export async function insertHookTasks(db: Queryable, tasks: readonly NewHookTask[]): Promise<void> {
  for (let i = 0; i < tasks.length; i += TASKS_PER_INSERT)
    await db
      .insertInto('hook_task')
      .values(tasks.slice(i, i + TASKS_PER_INSERT).map(hookTaskRow))
      .execute();
}

/**
 * Leases up to `limit` pending rows whose time has come to `owner` until
 * `nowMs + leaseMs`, oldest due first. The subquery walks the
 * (status, next_attempt_at) index in order and stops at `limit`, so a claim
 * costs the same with 10 or 100,000 rows waiting.
 */
export function claimDueHookTasks(
  db: Queryable,
  owner: string,
  nowMs: number,
  leaseMs: number,
  limit: number,
): Promise<HookTask[]> {
  return claimWhere(
    db,
    owner,
    nowMs,
    leaseMs,
    limit,
    (eb) => eb.and([eb('status', '=', HookTaskStatus.pending), eb('next_attempt_at', '<=', nowMs)]),
    true,
  );
}

/**
 * Leases up to `limit` rows whose lease expired (their worker died
 * mid-delivery: the row is delivered again, at least once).
 */
export function claimExpiredHookTasks(
  db: Queryable,
  owner: string,
  nowMs: number,
  leaseMs: number,
  limit: number,
): Promise<HookTask[]> {
  return claimWhere(
    db,
    owner,
    nowMs,
    leaseMs,
    limit,
    (eb) => eb.and([eb('status', '=', HookTaskStatus.delivering), eb('lease_until', '<=', nowMs)]),
    false,
  );
}

async function claimWhere(
  db: Queryable,
  owner: string,
  nowMs: number,
  leaseMs: number,
  limit: number,
  claimable: (eb: ExpressionBuilder<Database, 'hook_task'>) => Expression<SqlBool>,
  oldestDueFirst: boolean,
): Promise<HookTask[]> {
  if (limit <= 0) return [];
  let candidates = db.selectFrom('hook_task').select('id').where(claimable).limit(limit);
  // Not also by id: PostgreSQL would then sort every due row instead of reading the index in order.
  if (oldestDueFirst) candidates = candidates.orderBy('next_attempt_at');
  // One statement, so that no other writer comes between choosing and taking:
  // on PostgreSQL the subquery locks what it picks and skips what another
  // claim holds (a row changed meanwhile is re-checked under its lock);
  // SQLite runs the whole statement under its single write lock. No
  // re-check outside the subquery: SQLite's planner would then drive the
  // UPDATE by the status index and test every due row against the subquery,
  // a scan of the whole backlog per claim.
  if (isPostgres(db)) candidates = candidates.forUpdate().skipLocked();
  return db
    .updateTable('hook_task')
    .set({
      status: HookTaskStatus.delivering,
      lease_owner: owner,
      lease_until: nowMs + leaseMs,
      updated: nowMs,
    })
    .where('id', 'in', candidates)
    .returningAll()
    .execute();
}

/**
 * Gives leased rows back (a stopping worker had claimed them but not started
 * them): due again at once for any worker, instead of when the lease expires.
 */
export async function releaseHookTasks(
  db: Queryable,
  owner: string,
  ids: readonly number[],
  nowMs: number,
): Promise<void> {
  if (ids.length === 0) return;
  await db
    .updateTable('hook_task')
    .set({ status: HookTaskStatus.pending, lease_owner: '', lease_until: 0, updated: nowMs })
    .where('id', 'in', ids)
    .where('status', '=', HookTaskStatus.delivering)
    .where('lease_owner', '=', owner)
    .execute();
}

export interface AttemptRecord {
  started: number;
  durationMs: number;
  requestUrl: string;
  requestHeaders: Record<string, string>;
  requestBody: string;
  responseStatus: number;
  responseHeaders: Record<string, string>;
  responseBody: string;
  error: string;
}

export type AttemptOutcome = { kind: 'delivered' } | { kind: 'retry'; nextAttemptAt: number } | { kind: 'failed' };

/** One finished attempt of a leased row, to record. */
export interface SettledAttempt {
  task: HookTask;
  attempt: AttemptRecord;
  outcome: AttemptOutcome;
  /** When the attempt ended. */
  nowMs: number;
}

// One statement settles or records this many rows (at most 14 parameters
// each): far under SQLite's 32,766 parameters.
const ROWS_PER_STATEMENT = 500;

/**
 * Records attempts and settles their rows, each only if this worker still
 * holds its lease (otherwise another worker took it over after the lease
 * expired: the attempt is kept in the history, the row is left to that
 * worker). All or nothing: on PostgreSQL one statement per 500 attempts (an
 * UPDATE and an INSERT joined in a WITH: one round trip, where a transaction
 * of per-row statements took two per row plus BEGIN and COMMIT); on SQLite a
 * transaction of one UPDATE … FROM (VALUES …) and one multi-row INSERT.
 */
export async function recordHookTaskAttempts(
  db: Queryable,
  owner: string,
  settled: readonly SettledAttempt[],
): Promise<void> {
  if (isPostgres(db)) {
    for (let i = 0; i < settled.length; i += ROWS_PER_STATEMENT)
      await recordInOneStatement(db, owner, settled.slice(i, i + ROWS_PER_STATEMENT));
    return;
  }
  const record = async (tx: Queryable): Promise<void> => {
    for (let i = 0; i < settled.length; i += ROWS_PER_STATEMENT)
      await recordInTwoStatements(tx, owner, settled.slice(i, i + ROWS_PER_STATEMENT));
  };
  await (db.isTransaction ? record(db) : db.transaction().execute(record));
}

/** What an attempt changes in its row: the values of the settling UPDATE. */
function settlement({ task, attempt, outcome, nowMs }: SettledAttempt) {
  return {
    id: task.id,
    status:
      outcome.kind === 'delivered'
        ? HookTaskStatus.delivered
        : outcome.kind === 'failed'
          ? HookTaskStatus.failed
          : HookTaskStatus.pending,
    // 0: unchanged.
    nextAttemptAt: outcome.kind === 'retry' ? outcome.nextAttemptAt : 0,
    delivered: outcome.kind === 'delivered' ? nowMs : 0,
    statusCode: attempt.responseStatus,
    durationMs: attempt.durationMs,
    error: attempt.error,
    updated: nowMs,
  };
}

/** The SET list of a settling UPDATE from a relation `v` with settlement()'s columns. */
const SETTLE_ASSIGNMENTS = sql`
  status = v.status,
  attempts = hook_task.attempts + 1,
  next_attempt_at = case when v.next_attempt_at > 0 then v.next_attempt_at else hook_task.next_attempt_at end,
  lease_until = 0,
  lease_owner = '',
  last_status_code = v.status_code,
  last_duration_ms = v.duration_ms,
  last_error = v.error,
  delivered = case when v.delivered > 0 then v.delivered else hook_task.delivered end,
  updated = v.updated`;

async function recordInOneStatement(db: Queryable, owner: string, settled: readonly SettledAttempt[]): Promise<void> {
  const rows = settled.map((one) => {
    const s = settlement(one);
    const a = one.attempt;
    return sql`(${s.id}::bigint, ${s.status}::integer, ${s.nextAttemptAt}::bigint, ${s.statusCode}::integer, ${s.durationMs}::bigint, ${s.error}::text, ${s.delivered}::bigint, ${s.updated}::bigint,
      ${a.started}::bigint, ${a.requestUrl}::text, ${JSON.stringify(a.requestHeaders)}::text, ${a.requestBody}::text, ${JSON.stringify(a.responseHeaders)}::text, ${a.responseBody}::text)`;
  });
  // A row whose lease was lost is not in `settled`: its attempt is numbered after those recorded.
  await sql`
    with v (id, status, next_attempt_at, status_code, duration_ms, error, delivered, updated, started, request_url, request_headers, request_body, response_headers, response_body) as (
      values ${sql.join(rows)}
    ), settled as (
      update hook_task set ${SETTLE_ASSIGNMENTS}
      from v
      where hook_task.id = v.id and hook_task.status = ${HookTaskStatus.delivering} and hook_task.lease_owner = ${owner}
      returning hook_task.id, hook_task.attempts
    )
    insert into hook_task_attempt (task_id, attempt, started, duration_ms, request_url, request_headers, request_body, response_status, response_headers, response_body, error)
    select v.id, coalesce(settled.attempts, (select coalesce(max(a.attempt), 0) + 1 from hook_task_attempt a where a.task_id = v.id)),
      v.started, v.duration_ms, v.request_url, v.request_headers, v.request_body, v.status_code, v.response_headers, v.response_body, v.error
    from v left join settled on settled.id = v.id`.execute(db);
}

async function recordInTwoStatements(tx: Queryable, owner: string, settled: readonly SettledAttempt[]): Promise<void> {
  // SQLite names VALUES columns column1…column8 and takes no column list on a derived table: rename them in a subquery.
  const values = settled.map((one) => {
    const s = settlement(one);
    return sql`(${s.id}, ${s.status}, ${s.nextAttemptAt}, ${s.statusCode}, ${s.durationMs}, ${s.error}, ${s.delivered}, ${s.updated})`;
  });
  const result = await sql<{ id: number; attempts: number }>`
    update hook_task set ${SETTLE_ASSIGNMENTS}
    from (
      select column1 as id, column2 as status, column3 as next_attempt_at, column4 as status_code, column5 as duration_ms, column6 as error, column7 as delivered, column8 as updated
      from (values ${sql.join(values)})
    ) as v
    where hook_task.id = v.id and hook_task.status = ${HookTaskStatus.delivering} and hook_task.lease_owner = ${owner}
    returning hook_task.id, hook_task.attempts`.execute(tx);
  const numbers = new Map(result.rows.map((row) => [Number(row.id), Number(row.attempts)]));
  const rows: Array<Insertable<HookTaskAttemptTable>> = [];
  for (const { task, attempt } of settled) {
    let number = numbers.get(task.id);
    if (number === undefined) {
      // The lease was lost: number the attempt after those recorded.
      const last = await tx
        .selectFrom('hook_task_attempt')
        .select((eb) => eb.fn.max('attempt').as('n'))
        .where('task_id', '=', task.id)
        .executeTakeFirst();
      number = Number(last?.n ?? 0) + 1 + rows.filter((r) => r.task_id === task.id).length;
    }
    rows.push({
      task_id: task.id,
      attempt: number,
      started: attempt.started,
      duration_ms: attempt.durationMs,
      request_url: attempt.requestUrl,
      request_headers: JSON.stringify(attempt.requestHeaders),
      request_body: attempt.requestBody,
      response_status: attempt.responseStatus,
      response_headers: JSON.stringify(attempt.responseHeaders),
      response_body: attempt.responseBody,
      error: attempt.error,
    });
  }
  await tx.insertInto('hook_task_attempt').values(rows).execute();
}

export async function listHookTasks(
  db: Queryable,
  hookId: number,
  offset: number,
  limit: number,
): Promise<{ tasks: HookTask[]; total: number }> {
  const [tasks, count] = await Promise.all([
    db
      .selectFrom('hook_task')
      .selectAll()
      .where('hook_id', '=', hookId)
      .orderBy('id', 'desc')
      .offset(offset)
      .limit(limit)
      .execute(),
    db
      .selectFrom('hook_task')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('hook_id', '=', hookId)
      .executeTakeFirst(),
  ]);
  return { tasks, total: Number(count?.n ?? 0) };
}

export async function findHookTask(db: Queryable, hookId: number, taskId: number): Promise<HookTask | null> {
  const row = await db
    .selectFrom('hook_task')
    .selectAll()
    .where('hook_id', '=', hookId)
    .where('id', '=', taskId)
    .executeTakeFirst();
  return row ?? null;
}

export async function listHookTaskAttempts(db: Queryable, taskId: number): Promise<HookTaskAttempt[]> {
  return db
    .selectFrom('hook_task_attempt')
    .selectAll()
    .where('task_id', '=', taskId)
    .orderBy('attempt')
    .orderBy('id')
    .execute();
}
