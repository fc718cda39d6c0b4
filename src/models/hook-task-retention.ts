// Retention of the webhook delivery history: finished deliveries (delivered or
// failed for good) older than a cutoff are deleted with their attempts, in
// bounded batches walking the hook_task(created) index. Pending and leased
// rows are never touched, whatever their age.
import type { Queryable } from './database.ts';
import { HookTaskStatus } from './hook-tasks.ts';

const FINISHED = [HookTaskStatus.delivered, HookTaskStatus.failed];

/** Up to `limit` ids of finished deliveries created before `cutoffMs` (Unix ms), oldest first. */
export async function findExpiredHookTasks(db: Queryable, cutoffMs: number, limit: number): Promise<number[]> {
  const rows = await db
    .selectFrom('hook_task')
    .select('id')
    .where('created', '<', cutoffMs)
    .where('status', 'in', FINISHED)
    .orderBy('created')
    .limit(limit)
    .execute();
  return rows.map((row) => row.id);
}

/** Deletes those of `ids` that are still finished, and their attempts; the number of deliveries deleted. */
export async function deleteFinishedHookTasks(tx: Queryable, ids: readonly number[]): Promise<number> {
  if (ids.length === 0) return 0;
  const deleted = await tx
    .deleteFrom('hook_task')
    .where('id', 'in', ids)
    .where('status', 'in', FINISHED)
    .returning('id')
    .execute();
  const gone = deleted.map((row) => row.id);
  if (gone.length > 0) await tx.deleteFrom('hook_task_attempt').where('task_id', 'in', gone).execute();
  return gone.length;
}
