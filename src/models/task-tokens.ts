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

/** What the artifact protocols need to know about a running task: its job, run, repository and commit. */
export interface RunningTaskScope {
  taskId: number;
  jobId: number;
  runId: number;
  repoId: number;
  ownerId: number;
  commitSha: string;
}

/** The running task `taskId` with its job's run; null when it is not running (or does not exist). */
export async function findRunningTaskScope(db: Queryable, taskId: number): Promise<RunningTaskScope | null> {
  const row = await db
    .selectFrom('action_task as t')
    .innerJoin('action_run_job as j', 'j.id', 't.job_id')
    .select(['t.id', 't.job_id', 'j.run_id', 't.repo_id', 't.owner_id', 't.commit_sha'])
    .where('t.id', '=', taskId)
    .where('t.status', '=', ActionStatus.running)
    .executeTakeFirst();
  if (row === undefined) return null;
  return {
    taskId: row.id,
    jobId: row.job_id,
    runId: row.run_id,
    repoId: row.repo_id,
    ownerId: row.owner_id,
    commitSha: row.commit_sha,
  };
}
