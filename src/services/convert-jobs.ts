// Jobs → JSON: Forgejo 16's ActionRunJob (services/convert/action.go
// ToActionRunJob, with run_id) and Gitea's ActionWorkflowJob
// (services/convert/convert.go ToActionWorkflowJob). Unlike Gitea, whose
// steps all repeat the job's status, each step shows its own status and times
// as the runner reported them (action_task_step).
import { ActionStatus, shownJobStatus, statusName } from '../modules/actions-status.ts';
import type { ActionRun, ActionRunJob } from '../models/action-runs.ts';
import type { JobTask, NamedStep } from '../models/run-jobs.ts';
import type { ActionRunJobOfRunJson, ActionWorkflowJobJson, ActionWorkflowStepJson } from '../api-types/job-schemas.ts';
import { apiTime } from './convert.ts';
import type { ActionStatusValue } from '../modules/actions-status.ts';

/** Empty `needs`/`runs-on` are null: Forgejo stores a job without them as a nil slice. */
export function toActionRunJob(job: ActionRunJob): ActionRunJobOfRunJson {
  return {
    id: job.id,
    run_id: job.runId,
    attempt: job.attempt,
    handle: job.handle,
    repo_id: job.repoId,
    owner_id: job.ownerId,
    name: job.name,
    needs: job.needs.length > 0 ? [...job.needs] : null,
    runs_on: job.runsOn.length > 0 ? [...job.runsOn] : null,
    task_id: job.taskId,
    // A job held by its run's concurrency group is `waiting`, as Forgejo shows a queued run's jobs.
    status: statusName(shownJobStatus(job)),
  };
}

/**
 * GitHub's status/conclusion pair of a Forgejo status (Gitea's
 * ToActionsStatus): waiting → queued, blocked → waiting, running →
 * in_progress, a done status → completed with it as the conclusion. Unknown
 * (never stored for a job; a step the runner never mentioned) reads as queued.
 */
export function toActionsStatus(status: ActionStatusValue): { status: string; conclusion?: string } {
  switch (status) {
    case ActionStatus.success:
    case ActionStatus.failure:
    case ActionStatus.cancelled:
    case ActionStatus.skipped:
      return { status: 'completed', conclusion: statusName(status) };
    case ActionStatus.running:
      return { status: 'in_progress' };
    case ActionStatus.blocked:
      return { status: 'waiting' };
    default:
      return { status: 'queued' };
  }
}

/** Everything ActionWorkflowJob shows about one job, loaded by JobQueryService.details. */
export interface JobDetails {
  job: ActionRunJob;
  run: Pick<ActionRun, 'id' | 'index' | 'ref' | 'commitSha'>;
  /** 0-based position of the job in its run (by id), as Forgejo's job page URL uses. */
  position: number;
  /** The task of the job's current attempt; null before a runner took it. */
  task: JobTask | null;
  /** That task's steps, by index. */
  steps: readonly NamedStep[];
}

function toStep(step: NamedStep): ActionWorkflowStepJson {
  const { status, conclusion } = toActionsStatus(step.status);
  return {
    name: step.name,
    number: step.index,
    status,
    ...(conclusion === undefined ? {} : { conclusion }),
    started_at: apiTime(step.started),
    completed_at: apiTime(step.stopped),
  };
}

/**
 * `repoApiUrl` is `<root>api/v1/repos/<owner>/<repo>`, `repoHtmlUrl`
 * `<root><owner>/<repo>`. `html_url` is Forgejo's job page
 * (`/actions/runs/<run number>/jobs/<position>`), the family of the run's
 * `html_url`, rather than Gitea's id-based one. Optional keys are omitted as
 * Go's omitempty does; the key order is Go's field order.
 */
export function toActionWorkflowJob(
  details: JobDetails,
  repoApiUrl: string,
  repoHtmlUrl: string,
): ActionWorkflowJobJson {
  const { job, run, task } = details;
  const { status, conclusion } = toActionsStatus(job.status);
  const runner = task !== null && task.runnerId > 0 ? task : undefined;
  return {
    id: job.id,
    url: `${repoApiUrl}/actions/jobs/${job.id}`,
    html_url: `${repoHtmlUrl}/actions/runs/${run.index}/jobs/${details.position}`,
    run_id: run.id,
    run_url: `${repoApiUrl}/actions/runs/${run.id}`,
    name: job.name,
    labels: [...job.runsOn],
    run_attempt: job.attempt,
    head_sha: run.commitSha,
    // Gitea's head_branch: the branch's short name, empty (omitted) for tags and pull request refs.
    ...(run.ref.startsWith('refs/heads/') ? { head_branch: run.ref.slice('refs/heads/'.length) } : {}),
    status,
    ...(conclusion === undefined ? {} : { conclusion }),
    ...(runner === undefined ? {} : { runner_id: runner.runnerId }),
    ...(runner === undefined || runner.runnerName === '' ? {} : { runner_name: runner.runnerName }),
    steps: details.steps.map(toStep),
    created_at: apiTime(job.created),
    started_at: apiTime(job.started),
    completed_at: apiTime(job.stopped),
  };
}
