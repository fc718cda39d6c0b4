// Payloads of the Actions webhook events:
// - Forgejo's `action_run_success` / `action_run_failure` / `action_run_recover`
//   (ActionPayload: action, run, prior_status, last_run — Forgejo v12);
// - Gitea's `workflow_run` and `workflow_job` (WorkflowRunPayload and
//   WorkflowJobPayload, Gitea 1.24/1.25; GitHub's shapes), with Gitea's status
//   mapping (Gitea: services/convert/convert.go ToActionWorkflowJob): waiting → queued, blocked → waiting, running →
//   in_progress, done → completed + conclusion.
// Pure functions: the caller loads the rows.
import { AccessMode } from '../../modules/access-mode.ts';
import { ActionStatus, isDone, statusName } from '../../modules/actions-status.ts';
import type { ActionRun, ActionRunJob } from '../../models/action-runs.ts';
import type { TaskSummary } from '../../models/action-tasks.ts';
import type { Repository } from '../../models/repos.ts';
import type { User } from '../../models/users.ts';
import { runRenderer } from '../convert-actions.ts';
import { apiTime, toApiOrg, toApiRepo, toApiUser } from '../convert.ts';
import { ANONYMOUS_VIEWER } from '../push-payloads.ts';
import type { ActionWorkflowRunJson } from '../../api-types/workflow-schemas.ts';
import type { ActionStatusValue } from '../../modules/actions-status.ts';

export interface ActionHookContext {
  repo: Repository;
  owner: User;
  triggerUser: User;
  rootUrl: string;
  nowSec: number;
}

/** GitHub's status and conclusion of a run or job status (Gitea's ToActionsStatus). */
export function githubStatusOf(status: ActionStatusValue): { status: string; conclusion: string | null } {
  if (isDone(status)) return { status: 'completed', conclusion: statusName(status) };
  if (status === ActionStatus.waiting) return { status: 'queued', conclusion: null };
  if (status === ActionStatus.blocked) return { status: 'waiting', conclusion: null };
  if (status === ActionStatus.running) return { status: 'in_progress', conclusion: null };
  return { status: 'queued', conclusion: null };
}

/**
 * The `action` of a workflow_run event, GitHub's vocabulary: requested until
 * the run starts, in_progress from then on — also while it waits between
 * jobs, which Forgejo's aggregate status shows as waiting again — completed
 * when done. (Gitea maps the aggregate status alone, so its receivers see a
 * started run "requested" again.)
 */
export function workflowRunAction(run: Pick<ActionRun, 'status' | 'started'>): string {
  if (isDone(run.status)) return 'completed';
  if (run.status === ActionStatus.running || run.started > 0) return 'in_progress';
  return 'requested';
}

function branchOf(ref: string): string {
  return ref.startsWith('refs/heads/') ? ref.slice('refs/heads/'.length) : '';
}

function urls(ctx: ActionHookContext): { api: string; html: string } {
  const path = `${encodeURIComponent(ctx.owner.name)}/${encodeURIComponent(ctx.repo.name)}`;
  return { api: `${ctx.rootUrl}api/v1/repos/${path}`, html: `${ctx.rootUrl}${path}` };
}

function common(ctx: ActionHookContext): Record<string, unknown> {
  const out: Record<string, unknown> = {
    repository: toApiRepo(ctx.repo, ctx.owner, AccessMode.none, ANONYMOUS_VIEWER, ctx.rootUrl),
  };
  if (ctx.owner.isOrganization) out.organization = toApiOrg(ctx.owner, ctx.rootUrl);
  out.sender = toApiUser(ctx.triggerUser, ANONYMOUS_VIEWER, ctx.rootUrl);
  return out;
}

/** Forgejo's ActionPayload; `lastRun` is the previous finished run of the workflow on the ref. */
export function actionRunPayload(
  ctx: ActionHookContext,
  action: 'success' | 'failure' | 'recover',
  run: ActionRun,
  priorStatus: ActionStatusValue,
  lastRun: { run: ActionRun; triggerUser: User } | undefined,
): Record<string, unknown> {
  const render = runRenderer(ctx.repo, ctx.owner, AccessMode.none, ANONYMOUS_VIEWER, ctx.rootUrl, ctx.nowSec);
  return {
    action,
    run: render(run, ctx.triggerUser),
    prior_status: statusName(priorStatus),
    last_run: lastRun ? render(lastRun.run, lastRun.triggerUser) : null,
  };
}

/**
 * Gitea's ActionWorkflowRun: the `workflow_run` of a webhook and an entry of
 * the workflows API's runs list. `attempt`: the run's attempt (runAttempts).
 */
export function workflowRunObject(ctx: ActionHookContext, run: ActionRun, attempt: number): ActionWorkflowRunJson {
  const { api, html } = urls(ctx);
  const { status, conclusion } = githubStatusOf(run.status);
  const repository = toApiRepo(ctx.repo, ctx.owner, AccessMode.none, ANONYMOUS_VIEWER, ctx.rootUrl);
  const actor = toApiUser(ctx.triggerUser, ANONYMOUS_VIEWER, ctx.rootUrl);
  return {
    id: run.id,
    url: `${api}/actions/runs/${run.id}`,
    html_url: `${html}/actions/runs/${run.index}`,
    display_title: run.title,
    path: `${run.workflowId}@${run.ref}`,
    event: run.event,
    run_attempt: attempt,
    run_number: run.index,
    repository_id: run.repoId,
    head_sha: run.commitSha,
    head_branch: branchOf(run.ref),
    status,
    conclusion: conclusion ?? '',
    actor,
    trigger_actor: actor,
    repository,
    head_repository: repository,
    started_at: apiTime(run.started),
    completed_at: apiTime(run.stopped),
    created_at: apiTime(run.created),
    updated_at: apiTime(run.updated),
    jobs_url: `${api}/actions/runs/${run.id}/jobs`,
  };
}

/** Gitea's WorkflowRunPayload; `attempt` as workflowRunObject. */
export function workflowRunPayload(ctx: ActionHookContext, run: ActionRun, attempt: number): Record<string, unknown> {
  const { api, html } = urls(ctx);
  const file = encodeURIComponent(run.workflowId);
  const branch = encodeURIComponent(ctx.repo.defaultBranch);
  return {
    action: workflowRunAction(run),
    workflow: {
      id: run.workflowId,
      name: run.workflowId,
      path: `${run.workflowDirectory}/${run.workflowId}`,
      state: 'active',
      created_at: apiTime(run.created),
      updated_at: apiTime(run.created),
      url: `${api}/actions/workflows/${file}`,
      html_url: `${html}/src/branch/${branch}/${run.workflowDirectory}/${file}`,
      badge_url: `${html}/actions/workflows/${file}/badge.svg?branch=${branch}`,
    },
    workflow_run: workflowRunObject(ctx, run, attempt),
    ...common(ctx),
  };
}

/** Gitea's WorkflowJobPayload; `jobIndex` is the job's position in its run (its page URL). */
export function workflowJobPayload(
  ctx: ActionHookContext,
  run: ActionRun,
  job: ActionRunJob,
  jobIndex: number,
  task: TaskSummary | null,
): Record<string, unknown> {
  const { api, html } = urls(ctx);
  const { status, conclusion } = githubStatusOf(job.status);
  return {
    action: status,
    workflow_job: {
      id: job.id,
      url: `${api}/actions/jobs/${job.id}`,
      html_url: `${html}/actions/runs/${run.index}/jobs/${jobIndex}`,
      run_id: run.id,
      run_url: `${api}/actions/runs/${run.id}`,
      name: job.name,
      labels: job.runsOn,
      run_attempt: job.attempt,
      head_sha: run.commitSha,
      head_branch: branchOf(run.ref),
      status,
      conclusion: conclusion ?? '',
      runner_id: task?.runnerId ?? 0,
      runner_name: task?.runnerName ?? '',
      // Each step's own status (Gitea 1.24 repeats the job's status on every step).
      steps: (task?.steps ?? []).map((step, number) => {
        const s = githubStatusOf(step.status);
        return {
          name: step.name,
          number,
          status: s.status,
          conclusion: s.conclusion ?? '',
          started_at: apiTime(step.started),
          completed_at: apiTime(step.stopped),
        };
      }),
      created_at: apiTime(job.created),
      started_at: apiTime(job.started),
      completed_at: apiTime(job.stopped),
    },
    ...common(ctx),
  };
}
