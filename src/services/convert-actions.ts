// Runs and tasks → Forgejo's JSON (services/convert/action.go, ToActionTask).
import { statusName, isDone } from '../modules/actions-status.ts';
import type { ActionRun } from '../models/action-runs.ts';
import type { TaskListEntry } from '../models/action-tasks.ts';
import type { Repository } from '../models/repos.ts';
import type { User } from '../models/users.ts';
import type { ActionRunJson, ActionTaskJson, RepositoryJson, UserJson } from '../api-types/schemas.ts';
import { apiTime, toApiRepo, toApiUser } from './convert.ts';
import type { Viewer } from './convert.ts';

/** refs/heads/x → x, refs/tags/v1 → v1, refs/pull/7/head → #7, anything else as is. */
export function prettyRef(ref: string): string {
  if (ref.startsWith('refs/heads/')) return ref.slice('refs/heads/'.length);
  if (ref.startsWith('refs/tags/')) return ref.slice('refs/tags/'.length);
  const pull = /^refs\/pull\/(\d+)\/head$/.exec(ref);
  return pull ? `#${pull[1]}` : ref;
}

/**
 * The `event` field: the webhook event family of the stored event type. Forgejo
 * answers "" for events that are not webhook events (dispatch, schedule, package).
 */
export function apiEventName(stored: string): string {
  if (stored === 'workflow_dispatch' || stored === 'schedule' || stored === 'package') return '';
  if (stored === 'pull_request_comment') return 'issue_comment';
  if (stored === 'pull_request_review_approved') return 'pull_request_approved';
  if (stored === 'pull_request_review_rejected') return 'pull_request_rejected';
  if (stored === 'pull_request_review_comment') return 'pull_request_comment';
  if (stored.startsWith('pull_request_')) return 'pull_request';
  if (stored.startsWith('issue_') && stored !== 'issue_comment') return 'issues';
  return stored;
}

const NANOS_PER_SECOND = 1_000_000_000;

/** Go's time.Duration in nanoseconds: finished runs stopped−started, running ones now−started, plus earlier attempts. */
function durationNanos(run: ActionRun, nowSec: number): number {
  if (run.started === 0) return run.previousDuration * NANOS_PER_SECOND;
  const end = isDone(run.status) && run.stopped >= run.started ? run.stopped : nowSec;
  return (Math.max(0, end - run.started) + run.previousDuration) * NANOS_PER_SECOND;
}

/**
 * Renders runs of one repository for one caller (`mode` is the caller's access,
 * shown as `repository.permissions`). The repository object and
 * each trigger user are the same for many runs of a page: built once.
 */
export function runRenderer(
  repo: Repository,
  owner: User,
  mode: number,
  viewer: Viewer,
  rootUrl: string,
  nowSec: number,
): (run: ActionRun, triggerUser: User) => ActionRunJson {
  const repository = toApiRepo(repo, owner, mode, viewer, rootUrl);
  const users = new Map<number, UserJson>();
  return (run, triggerUser) => {
    let user = users.get(triggerUser.id);
    if (user === undefined) {
      user = toApiUser(triggerUser, viewer, rootUrl);
      users.set(triggerUser.id, user);
    }
    return renderRun(run, repository, user, nowSec);
  };
}

function renderRun(run: ActionRun, repository: RepositoryJson, triggerUser: UserJson, nowSec: number): ActionRunJson {
  const json: ActionRunJson = {
    id: run.id,
    title: run.title,
    repository,
    workflow_id: run.workflowId,
    index_in_repo: run.index,
    trigger_user: triggerUser,
    ScheduleID: run.scheduleId,
    prettyref: prettyRef(run.ref),
    is_ref_deleted: false,
    commit_sha: run.commitSha,
    is_fork_pull_request: run.isForkPullRequest,
    need_approval: run.needApproval,
    approved_by: run.approvedBy,
    event: apiEventName(run.event),
    event_payload: run.eventPayload,
    trigger_event: run.triggerEvent,
    status: statusName(run.status),
    started: apiTime(run.started),
    stopped: apiTime(run.stopped),
    created: apiTime(run.created),
    updated: apiTime(run.updated),
    html_url: `${repository.html_url}/actions/runs/${run.index}`,
  };
  const duration = durationNanos(run, nowSec);
  if (duration > 0) json.duration = duration;
  if (run.preExecutionError !== '') json.pre_execution_error = run.preExecutionError;
  return json;
}

export function toApiTask(task: TaskListEntry, repoHtmlUrl: string): ActionTaskJson {
  return {
    id: task.id,
    name: task.jobName,
    head_branch: prettyRef(task.runRef),
    head_sha: task.commitSha,
    run_number: task.runIndex,
    event: task.runTriggerEvent,
    display_title: task.runTitle,
    status: statusName(task.status),
    workflow_id: task.workflowId,
    url: `${repoHtmlUrl}/actions/runs/${task.runIndex}`,
    created_at: apiTime(task.created),
    updated_at: apiTime(task.updated),
    run_started_at: apiTime(task.started),
  };
}
