// A run of one job with a running task, written straight to the database
// before the server under test starts: what a scenario about a job's log or
// artifacts needs, without a runner or a pushed workflow.
import { randomUUID } from 'node:crypto';
import { insertRunWithJobs } from '../../src/models/action-runs.ts';
import type { ActionRunJob } from '../../src/models/action-runs.ts';
import type { Db } from '../../src/models/database.ts';
import { ActionStatus } from '../../src/modules/actions-status.ts';

export interface RunningTaskOf {
  repoId: number;
  ownerId: number;
  /** The run's title and workflow file name. */
  title: string;
  workflowId: string;
  commitSha: string;
}

/** The job (linked to its task) and the task's id. */
export async function insertRunningTask(
  db: Db,
  of: RunningTaskOf,
  now: number,
): Promise<{ job: ActionRunJob; taskId: number }> {
  const created = await db.transaction().execute((tx) =>
    insertRunWithJobs(
      tx,
      {
        repoId: of.repoId,
        ownerId: of.ownerId,
        title: of.title,
        workflowId: of.workflowId,
        workflowDirectory: '.forgejo/workflows',
        triggerUserId: of.ownerId,
        ref: 'refs/heads/main',
        commitSha: of.commitSha,
        event: 'push',
        eventPayload: '{}',
        triggerEvent: 'push',
        status: ActionStatus.running,
      },
      [
        {
          name: 'build',
          jobId: 'build',
          handle: randomUUID(),
          needs: [],
          runsOn: ['docker'],
          hasIf: false,
          workflowPayload: 'jobs: {build: {}}',
          status: ActionStatus.running,
        },
      ],
      now,
    ),
  );
  const job = created.jobs[0];
  if (job === undefined) throw new Error('no job inserted');
  const task = await db
    .insertInto('action_task')
    .values({
      job_id: job.id,
      attempt: 1,
      runner_id: 0,
      status: ActionStatus.running,
      started: now,
      repo_id: of.repoId,
      owner_id: of.ownerId,
      commit_sha: job.commitSha,
      token_hash: null,
      created: now,
      updated: now,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  await db.updateTable('action_run_job').set({ task_id: task.id, attempt: 1 }).where('id', '=', job.id).execute();
  return { job, taskId: task.id };
}
