// Tasks (one attempt of a job on a runner) as the repository's tasks list shows them.
import type { Queryable } from './database.ts';
import type { Slice } from './action-runs.ts';
import type { ActionStatusValue } from '../modules/actions-status.ts';

/** A task with the job and run facts Forgejo's ActionTask carries. */
export interface TaskListEntry {
  id: number;
  status: ActionStatusValue;
  jobName: string;
  commitSha: string;
  runIndex: number;
  runRef: string;
  runTitle: string;
  runTriggerEvent: string;
  workflowId: string;
  started: number;
  created: number;
  updated: number;
}

/** Newest first, optionally only the given statuses. */
export async function listTasksOfRepo(
  db: Queryable,
  repoId: number,
  statuses: readonly ActionStatusValue[],
  slice: Slice,
): Promise<TaskListEntry[]> {
  let query = db
    .selectFrom('action_task as t')
    .innerJoin('action_run_job as j', 'j.id', 't.job_id')
    .innerJoin('action_run as r', 'r.id', 'j.run_id')
    .select([
      't.id as id',
      't.status as status',
      'j.name as job_name',
      't.commit_sha as commit_sha',
      'r.index_in_repo as run_index',
      'r.ref as run_ref',
      'r.title as run_title',
      'r.trigger_event as run_trigger_event',
      'r.workflow_id as workflow_id',
      't.started as started',
      't.created as created',
      't.updated as updated',
    ])
    .where('t.repo_id', '=', repoId);
  if (statuses.length > 0) query = query.where('t.status', 'in', [...statuses]);
  const rows = await query.orderBy('t.id', 'desc').limit(slice.limit).offset(slice.offset).execute();
  return rows.map((row) => ({
    id: row.id,
    status: row.status,
    jobName: row.job_name,
    commitSha: row.commit_sha,
    runIndex: row.run_index,
    runRef: row.run_ref,
    runTitle: row.run_title,
    runTriggerEvent: row.run_trigger_event,
    workflowId: row.workflow_id,
    started: row.started,
    created: row.created,
    updated: row.updated,
  }));
}

export async function countTasksOfRepo(
  db: Queryable,
  repoId: number,
  statuses: readonly ActionStatusValue[],
): Promise<number> {
  let query = db.selectFrom('action_task').select(db.fn.countAll<number>().as('n')).where('repo_id', '=', repoId);
  if (statuses.length > 0) query = query.where('status', 'in', [...statuses]);
  const row = await query.executeTakeFirstOrThrow();
  return Number(row.n);
}

/** What a workflow_job payload shows of a task: its runner and its steps. */
export interface TaskSummary {
  runnerId: number;
  runnerName: string;
  steps: Array<{ name: string; status: ActionStatusValue; started: number; stopped: number }>;
}

export async function findTaskSummary(db: Queryable, taskId: number): Promise<TaskSummary | null> {
  const task = await db
    .selectFrom('action_task as t')
    .leftJoin('action_runner as r', 'r.id', 't.runner_id')
    .select(['t.runner_id as runner_id', 'r.name as runner_name'])
    .where('t.id', '=', taskId)
    .executeTakeFirst();
  if (task === undefined) return null;
  const steps = await db
    .selectFrom('action_task_step')
    .select(['name', 'status', 'started', 'stopped'])
    .where('task_id', '=', taskId)
    .orderBy('step_index')
    .execute();
  return { runnerId: task.runner_id, runnerName: task.runner_name ?? '', steps };
}
