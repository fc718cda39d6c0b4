// Reading the jobs of a run (Forgejo 16's ListActionRunJobs) and one job
// (Gitea's GetWorkflowJob). Both answer 404 with Forgejo's messages for an
// unknown id and for another repository's run or job, which must not leak.
import { AppError } from '../../modules/errors.ts';
import { findRunById, listJobsOfRun } from '../../models/action-runs.ts';
import type { ActionRun, ActionRunJob } from '../../models/action-runs.ts';
import type { Db } from '../../models/database.ts';
import type { Repository } from '../../models/repos.ts';
import {
  findJobById,
  findJobTaskByAttempt,
  findJobTaskById,
  jobPosition,
  listNamedSteps,
} from '../../models/run-jobs.ts';
import type { JobTask, NamedStep } from '../../models/run-jobs.ts';
import type { JobDetails } from '../convert-jobs.ts';

/** A run of `repo`, or Forgejo's 404 (models/actions/run.go GetRunByID: "run with id N: resource does not exist"). */
export async function runOfRepo(db: Db, repo: Repository, runId: number): Promise<ActionRun> {
  const run = await findRunById(db, runId);
  if (run === null) throw AppError.notFoundMessage(`run with id ${runId}: resource does not exist`);
  if (run.repoId !== repo.id) throw AppError.notFoundMessage('resource does not exist');
  return run;
}

/** A job of `repo`, or Forgejo's 404 (models/actions/run_job.go GetRunJobByID). */
export async function jobOfRepo(db: Db, repo: Repository, jobId: number): Promise<ActionRunJob> {
  const job = await findJobById(db, jobId);
  if (job === null) throw AppError.notFoundMessage(`run job with id ${jobId}: resource does not exist`);
  if (job.repoId !== repo.id) throw AppError.notFoundMessage('resource does not exist');
  return job;
}

export class JobQueryService {
  constructor(private readonly db: Db) {}

  /** Every job of the run by id: Forgejo answers the whole list, unpaginated. */
  async listOfRun(repo: Repository, runId: number): Promise<ActionRunJob[]> {
    const run = await runOfRepo(this.db, repo, runId);
    return listJobsOfRun(this.db, run.id);
  }

  /** A job with its run, its current attempt's task and that task's steps. */
  async details(repo: Repository, jobId: number): Promise<JobDetails> {
    return this.detailsOf(await jobOfRepo(this.db, repo, jobId));
  }

  /**
   * One attempt of a job: its task and steps (none before a runner picked
   * it). Earlier attempts' tasks are kept by a rerun, so each stays readable.
   */
  async attempt(job: ActionRunJob, attempt: number): Promise<{ task: JobTask | null; steps: NamedStep[] }> {
    const task = await findJobTaskByAttempt(this.db, job.id, attempt);
    return { task, steps: task === null ? [] : await listNamedSteps(this.db, task.id) };
  }

  /** The same for a job already loaded (a rerun answers the job it changed). */
  async detailsOf(job: ActionRunJob): Promise<JobDetails> {
    const [run, position, task] = await Promise.all([
      findRunById(this.db, job.runId),
      jobPosition(this.db, job),
      job.taskId > 0 ? findJobTaskById(this.db, job.taskId) : Promise.resolve(null),
    ]);
    if (run === null) throw AppError.notFoundMessage('resource does not exist');
    const steps = task === null ? [] : await listNamedSteps(this.db, task.id);
    return { job, run, position, task, steps };
  }
}
