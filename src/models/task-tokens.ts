// Per-task tokens: what a running job uses as GITHUB_TOKEN / GITEA_TOKEN /
// FORGEJO_TOKEN. Stored as a digest on the task row (unique index).
import { ActionStatus } from '../modules/actions-status.ts';
import type { Queryable } from './database.ts';

export interface RunningTaskToken {
  taskId: number;
  repoId: number;
  ownerId: number;
  tokenHash: string;
}

/** The task this token belongs to, only while the task is running. */
export async function findRunningTaskByTokenHash(db: Queryable, tokenHash: string): Promise<RunningTaskToken | null> {
  const row = await db
    .selectFrom('action_task')
    .select(['id', 'repo_id', 'owner_id', 'token_hash'])
    .where('token_hash', '=', tokenHash)
    .where('status', '=', ActionStatus.running)
    .executeTakeFirst();
  if (row === undefined || row.token_hash === null) return null;
  return { taskId: row.id, repoId: row.repo_id, ownerId: row.owner_id, tokenHash: row.token_hash };
}
