// The webhook outbox (hook_task) and its attempt history (hook_task_attempt):
// enqueue in the caller's transaction, claim due rows with a lease, record
// each attempt. A claim is one UPDATE … WHERE id IN (SELECT …) so that two
// workers never hold one row: on PostgreSQL the inner SELECT takes the rows
// FOR UPDATE SKIP LOCKED; SQLite serialises writers, so the conditional
// UPDATE alone is enough (graphile-worker's get_job, in one statement).
import type { Selectable } from 'kysely';
import { isPostgres } from './database.ts';
import type { Queryable } from './database.ts';
import type { HookTaskAttemptTable, HookTaskTable } from './tables.ts';

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

export async function insertHookTask(db: Queryable, task: NewHookTask): Promise<number> {
  const nowSec = Math.floor(task.nowMs / 1000);
  const row = await db
    .insertInto('hook_task')
    .values({
      hook_id: task.hookId,
      uuid: task.uuid,
      event_type: task.eventType,
      payload_content: task.payload,
      next_attempt_at: task.nowMs,
      is_redelivery: task.isRedelivery ? 1 : 0,
      created: nowSec,
      updated: nowSec,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

/**
 * Leases up to `limit` due rows to `owner` until `nowMs + leaseMs`: pending rows
 * whose time has come, and rows whose previous lease expired (a worker died
 * mid-delivery: the row is delivered again, at least once).
 */
export async function claimDueHookTasks(db: Queryable, owner: string, nowMs: number, leaseMs: number, limit: number): Promise<HookTask[]> {
  if (limit <= 0) return [];
  let due = db
    .selectFrom('hook_task')
    .select('id')
    .where((eb) =>
      eb.or([
        eb.and([eb('status', '=', HookTaskStatus.pending), eb('next_attempt_at', '<=', nowMs)]),
        eb.and([eb('status', '=', HookTaskStatus.delivering), eb('lease_until', '<=', nowMs)]),
      ]),
    )
    .orderBy('next_attempt_at')
    .orderBy('id')
    .limit(limit);
  if (isPostgres(db)) due = due.forUpdate().skipLocked();
  return db
    .updateTable('hook_task')
    .set({ status: HookTaskStatus.delivering, lease_owner: owner, lease_until: nowMs + leaseMs, updated: Math.floor(nowMs / 1000) })
    .where('id', 'in', due)
    // Re-checked by the UPDATE itself (SQLite has no row locks).
    .where((eb) =>
      eb.or([
        eb.and([eb('status', '=', HookTaskStatus.pending), eb('next_attempt_at', '<=', nowMs)]),
        eb.and([eb('status', '=', HookTaskStatus.delivering), eb('lease_until', '<=', nowMs)]),
      ]),
    )
    .returningAll()
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

/**
 * Records one attempt and settles the row, if this worker still holds its
 * lease (otherwise another worker took it over after the lease expired: the
 * attempt is kept in the history, the row is left to that worker).
 */
export async function recordHookTaskAttempt(tx: Queryable, task: HookTask, owner: string, attempt: AttemptRecord, outcome: AttemptOutcome, nowMs: number): Promise<void> {
  const nowSec = Math.floor(nowMs / 1000);
  const status = outcome.kind === 'delivered' ? HookTaskStatus.delivered : outcome.kind === 'failed' ? HookTaskStatus.failed : HookTaskStatus.pending;
  const updated = await tx
    .updateTable('hook_task')
    .set((eb) => ({
      status,
      attempts: eb('attempts', '+', 1),
      next_attempt_at: outcome.kind === 'retry' ? outcome.nextAttemptAt : eb.ref('next_attempt_at'),
      lease_until: 0,
      lease_owner: '',
      last_status_code: attempt.responseStatus,
      last_duration_ms: attempt.durationMs,
      last_error: attempt.error,
      delivered: outcome.kind === 'delivered' ? nowMs : eb.ref('delivered'),
      updated: nowSec,
    }))
    .where('id', '=', task.id)
    .where('status', '=', HookTaskStatus.delivering)
    .where('lease_owner', '=', owner)
    .returning('attempts')
    .executeTakeFirst();
  let number = updated?.attempts;
  if (number === undefined) {
    const last = await tx.selectFrom('hook_task_attempt').select((eb) => eb.fn.max('attempt').as('n')).where('task_id', '=', task.id).executeTakeFirst();
    number = Number(last?.n ?? 0) + 1;
  }
  await tx
    .insertInto('hook_task_attempt')
    .values({
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
    })
    .execute();
}

export async function listHookTasks(db: Queryable, hookId: number, offset: number, limit: number): Promise<{ tasks: HookTask[]; total: number }> {
  const [tasks, count] = await Promise.all([
    db.selectFrom('hook_task').selectAll().where('hook_id', '=', hookId).orderBy('id', 'desc').offset(offset).limit(limit).execute(),
    db.selectFrom('hook_task').select((eb) => eb.fn.countAll().as('n')).where('hook_id', '=', hookId).executeTakeFirst(),
  ]);
  return { tasks, total: Number(count?.n ?? 0) };
}

export async function findHookTask(db: Queryable, hookId: number, taskId: number): Promise<HookTask | undefined> {
  return db.selectFrom('hook_task').selectAll().where('hook_id', '=', hookId).where('id', '=', taskId).executeTakeFirst();
}

export async function listHookTaskAttempts(db: Queryable, taskId: number): Promise<HookTaskAttempt[]> {
  return db.selectFrom('hook_task_attempt').selectAll().where('task_id', '=', taskId).orderBy('attempt').orderBy('id').execute();
}
