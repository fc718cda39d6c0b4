// The commit statuses Actions writes (Forgejo's services/actions/commit_status.go):
// a DomainEvents subscriber that, in the transaction of the change, appends a
// status for each new or changed job of a push run to the pushed commit
// (the push payload's head_commit.id). One context per job,
// `<workflow name> / <job name> (push)`; a row is written only when the state
// or the description differs from that context's latest, so a job that is
// reported again without change adds nothing.
//
// Only push runs get statuses here: Forgejo also writes them for the
// pull_request family and release, which Gantry does not trigger yet, and
// never for dispatch, schedule and the rest.
import { ActionStatus, isDone, shownJobStatus } from '../../modules/actions-status.ts';
import type { Clock } from '../../modules/clock.ts';
import { payloadFacts } from '../../modules/workflows/payload-facts.ts';
import type { ActionRun, ActionRunJob } from '../../models/action-runs.ts';
import { latestStatusOfContext } from '../../models/commit-statuses.ts';
import type { Tx } from '../../models/database.ts';
import { findRepositoryById } from '../../models/repos.ts';
import type { Repository } from '../../models/repos.ts';
import { actionsUser, findAccountById } from '../../models/users.ts';
import type { User } from '../../models/users.ts';
import { writeCommitStatus } from '../commit-statuses.ts';
import type { DomainEvent, DomainEventHandler } from '../events.ts';
import type { ActionStatusValue } from '../../modules/actions-status.ts';

export interface CommitStatusWriterOptions {
  clock: Clock;
  rootUrl: string;
}

/** Go's time.Duration.String for whole seconds: `0s`, `42s`, `1m2s`, `1h0m5s`. */
export function goDuration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = s % 60;
  if (h > 0) return `${h}h${m}m${rest}s`;
  if (m > 0) return `${m}m${rest}s`;
  return `${rest}s`;
}

/** Forgejo's calculateDuration: 0 before the start, to now while running, to the stop once done. */
function jobDuration(job: ActionRunJob, nowSec: number): number {
  if (job.started === 0) return 0;
  return (isDone(job.status) ? job.stopped : nowSec) - job.started;
}

/** Forgejo 16's state of a job status (skipped → `skipped`; F15 said `success`). */
export function commitStatusState(status: ActionStatusValue): string {
  switch (status) {
    case ActionStatus.success:
      return 'success';
    case ActionStatus.failure:
    case ActionStatus.cancelled:
      return 'failure';
    case ActionStatus.waiting:
    case ActionStatus.blocked:
    case ActionStatus.running:
      return 'pending';
    case ActionStatus.skipped:
      return 'skipped';
    default:
      return 'error';
  }
}

export function commitStatusDescription(job: ActionRunJob, nowSec: number): string {
  // A job held by its run's concurrency group waits, as in Forgejo (which holds such jobs `waiting`).
  switch (shownJobStatus(job)) {
    case ActionStatus.success:
      return `Successful in ${goDuration(jobDuration(job, nowSec))}`;
    case ActionStatus.failure:
      return `Failing after ${goDuration(jobDuration(job, nowSec))}`;
    case ActionStatus.cancelled:
      return 'Has been cancelled';
    case ActionStatus.skipped:
      return 'Has been skipped';
    case ActionStatus.running:
      return 'Has started running';
    case ActionStatus.waiting:
      return 'Waiting to run';
    case ActionStatus.blocked:
      return 'Blocked by required conditions';
    default:
      return '';
  }
}

/**
 * The workflow's `name:` from the job's payload (which keeps the workflow's header), else the
 * file name. Asked on every status change of every job of a push run: the payload's parse is
 * shared by the jobs and runs with the same payload (payload-facts.ts).
 */
function workflowName(run: ActionRun, job: ActionRunJob): string {
  // A payload that does not parse names the run by its file, as Forgejo does.
  return payloadFacts(job.workflowPayload).workflowName ?? run.workflowId.split('/').pop() ?? run.workflowId;
}

/** The pushed commit a push run reports on: the payload's head_commit, or null for any other run. */
function pushedCommit(run: ActionRun): { sha: string; commit: unknown } | null {
  if (run.event !== 'push') return null;
  try {
    const payload = JSON.parse(run.eventPayload) as { head_commit?: { id?: unknown } | null };
    const commit = payload.head_commit;
    if (typeof commit?.id !== 'string' || commit.id === '') return null;
    return { sha: commit.id, commit };
  } catch {
    return null;
  }
}

export function createCommitStatusWriter(options: CommitStatusWriterOptions): DomainEventHandler {
  const { clock, rootUrl } = options;

  const write = async (
    tx: Tx,
    run: ActionRun,
    repo: Repository,
    owner: User,
    jobs: readonly ActionRunJob[],
    order: readonly number[],
  ): Promise<void> => {
    const pushed = pushedCommit(run);
    if (pushed === null) return;
    const nowSec = clock.nowSec();
    const target = { repo, owner, creator: actionsUser(), commit: pushed.commit };
    for (const job of jobs) {
      const context = `${workflowName(run, job)} / ${job.name} (push)`.trim();
      const state = commitStatusState(shownJobStatus(job));
      const description = commitStatusDescription(job, nowSec);
      const latest = await latestStatusOfContext(tx, repo.id, pushed.sha, context);
      if (latest !== null && latest.state === state && latest.description === description) continue;
      const position = Math.max(0, order.indexOf(job.id));
      await writeCommitStatus(tx, clock, rootUrl, target, {
        repoId: repo.id,
        sha: pushed.sha,
        state,
        targetUrl: `${rootUrl}${repo.ownerName}/${repo.name}/actions/runs/${run.index}/jobs/${position}`,
        description,
        context,
        creatorId: target.creator.id,
      });
    }
  };

  return async (tx: Tx, event: DomainEvent): Promise<void> => {
    if (event.type === 'actions.run.created') {
      await write(
        tx,
        event.run,
        event.repo,
        event.owner,
        event.jobs,
        event.jobs.map((job) => job.id),
      );
    } else if (event.type === 'actions.jobs.changed') {
      // Cheap exit before any read: only push runs report.
      if (pushedCommit(event.run) === null) return;
      const repo = await findRepositoryById(tx, event.run.repoId);
      const owner = repo === null ? null : await findAccountById(tx, repo.ownerId);
      if (repo === null || owner === null) return;
      await write(tx, event.run, repo, owner, event.jobs, await event.runJobIds());
    }
  };
}
