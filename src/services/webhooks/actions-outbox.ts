// The webhook outbox for Actions: turns run and job status changes into
// hook_task rows, in the transaction of the change, for the active hooks of
// the repository and then of its owner that subscribe to them:
// - `workflow_run` when the run is requested (created), starts and completes;
// - `workflow_job` on every job status change (and for each job of a new run);
// - when a run finishes, Forgejo's `action_run_success` or
//   `action_run_failure`, plus `action_run_recover` when it succeeded and the
//   previous finished run of the same workflow on the same ref did not.
//   (Forgejo compares with the last run of the whole repository that stopped
//   before; per workflow and ref is what "recovered" means to its readers.)
// Cancelled and skipped runs send no action_run_* event, as in Forgejo.
//
// The hot path (a runner claiming or finishing a job) pays one indexed query
// when neither the repository nor its owner has a hook that wants these events,
// and none when the statement that changed the jobs already found that they
// have no active hook at all (`noActiveHooks`), for the jobs' change and for
// the run's status change it makes (a run starting with its first claim,
// finishing with its last report: that read was 1.8–2.3 % of `gantry web`'s
// busy samples in PostgreSQL throughput profiles of 2026-11-28, 0.9 % once
// compiled, and a round trip while the run's row is locked).
import { randomUUID } from 'node:crypto';
import { ActionStatus, isDone } from '../../modules/actions-status.ts';
import type { Clock } from '../../modules/clock.ts';
import { findPreviousFinishedRun, runAttempts } from '../../models/action-runs.ts';
import type { ActionRun, ActionRunJob } from '../../models/action-runs.ts';
import { findTaskSummary } from '../../models/action-tasks.ts';
import type { Queryable } from '../../models/database.ts';
import { insertHookTasks } from '../../models/hook-tasks.ts';
import { findRepositoryById } from '../../models/repos.ts';
import { findAccountById, findPossibleUserById } from '../../models/users.ts';
import { listActiveHooksForRepository } from '../../models/webhooks.ts';
import type { WebhookRecord } from '../../models/webhooks.ts';
import type { DomainEvent, DomainEventHandler } from '../events.ts';
import { actionRunPayload, workflowJobPayload, workflowRunAction, workflowRunPayload } from './action-payloads.ts';
import type { ActionHookContext } from './action-payloads.ts';
import { hookWantsEvent } from './hook-events.ts';

const ACTION_EVENTS = [
  'workflow_run',
  'workflow_job',
  'action_run_success',
  'action_run_failure',
  'action_run_recover',
] as const;
type ActionEvent = (typeof ACTION_EVENTS)[number];

export interface ActionsWebhookOutboxOptions {
  clock: Clock;
  rootUrl: string;
}

type Subscribers = Map<ActionEvent, WebhookRecord[]>;

async function subscribersOf(tx: Queryable, repoId: number, ownerId: number): Promise<Subscribers | null> {
  const hooks = await listActiveHooksForRepository(tx, repoId, ownerId);
  const out: Subscribers = new Map();
  for (const event of ACTION_EVENTS) {
    const wanting = hooks.filter((hook) => hookWantsEvent(hook, event));
    if (wanting.length > 0) out.set(event, wanting);
  }
  return out.size > 0 ? out : null;
}

export function createActionsWebhookOutbox(options: ActionsWebhookOutboxOptions): DomainEventHandler {
  const enqueue = async (
    tx: Queryable,
    hooks: readonly WebhookRecord[] | undefined,
    eventType: ActionEvent,
    payload: unknown,
  ): Promise<void> => {
    if (!hooks || hooks.length === 0) return;
    // Indented as Forgejo stores payloads.
    const body = JSON.stringify(payload, null, 2);
    const nowMs = options.clock.nowMs();
    await insertHookTasks(
      tx,
      hooks.map((hook) => ({ hookId: hook.id, uuid: randomUUID(), eventType, payload: body, nowMs })),
    );
  };

  /** Repository, owner and trigger user of a run; null when the repository is gone (nothing to report). */
  const contextOf = async (tx: Queryable, run: ActionRun): Promise<ActionHookContext | null> => {
    const repo = await findRepositoryById(tx, run.repoId);
    if (repo === null) return null;
    const owner = await findAccountById(tx, repo.ownerId);
    if (owner === null) return null;
    return {
      repo,
      owner,
      triggerUser: await findPossibleUserById(tx, run.triggerUserId),
      rootUrl: options.rootUrl,
      nowSec: options.clock.nowSec(),
    };
  };

  /** `order`: the ids of all the run's jobs in order; a job's position names its page (…/runs/N/jobs/<index>). */
  const jobEvents = async (
    tx: Queryable,
    ctx: ActionHookContext,
    subs: Subscribers,
    run: ActionRun,
    jobs: readonly ActionRunJob[],
    order: readonly number[],
  ): Promise<void> => {
    const hooks = subs.get('workflow_job');
    if (!hooks) return;
    for (const job of jobs) {
      const task = job.taskId !== 0 ? await findTaskSummary(tx, job.taskId) : null;
      await enqueue(
        tx,
        hooks,
        'workflow_job',
        workflowJobPayload(ctx, run, job, Math.max(0, order.indexOf(job.id)), task),
      );
    }
  };

  const runEvents = async (
    tx: Queryable,
    ctx: ActionHookContext,
    subs: Subscribers,
    run: ActionRun,
    previous: ActionRun | null,
  ): Promise<void> => {
    // One workflow_run per GitHub-level step (requested, in_progress, completed), not per aggregate status change.
    const runHooks = subs.get('workflow_run');
    if (
      runHooks !== undefined &&
      runHooks.length > 0 &&
      (previous === null || workflowRunAction(previous) !== workflowRunAction(run))
    ) {
      // Read in the rerun's own transaction: the rerun jobs already carry their new attempt.
      const attempt = (await runAttempts(tx, [run.id])).get(run.id) ?? 1;
      await enqueue(tx, runHooks, 'workflow_run', workflowRunPayload(ctx, run, attempt));
    }
    const previousStatus = previous?.status ?? ActionStatus.unknown;
    if (!isDone(run.status)) return;
    const success = run.status === ActionStatus.success;
    if (!success && run.status !== ActionStatus.failure) return;
    const wantsDone =
      subs.has('action_run_success') || subs.has('action_run_failure') || subs.has('action_run_recover');
    if (!wantsDone) return;
    const before = await findPreviousFinishedRun(tx, run);
    const lastRun = before
      ? { run: before, triggerUser: await findPossibleUserById(tx, before.triggerUserId) }
      : undefined;
    if (success) {
      await enqueue(
        tx,
        subs.get('action_run_success'),
        'action_run_success',
        actionRunPayload(ctx, 'success', run, previousStatus, lastRun),
      );
      if (before && before.status === ActionStatus.failure) {
        await enqueue(
          tx,
          subs.get('action_run_recover'),
          'action_run_recover',
          actionRunPayload(ctx, 'recover', run, previousStatus, lastRun),
        );
      }
    } else {
      await enqueue(
        tx,
        subs.get('action_run_failure'),
        'action_run_failure',
        actionRunPayload(ctx, 'failure', run, previousStatus, lastRun),
      );
    }
  };

  const handle = async (tx: Queryable, event: DomainEvent): Promise<void> => {
    if (
      event.type !== 'actions.run.created' &&
      event.type !== 'actions.jobs.changed' &&
      event.type !== 'actions.run.status-changed'
    )
      return;
    if (event.type !== 'actions.run.created' && event.noActiveHooks === true) return;
    const subs = await subscribersOf(tx, event.run.repoId, event.run.ownerId);
    if (subs === null) return;
    const ctx =
      event.type === 'actions.run.created'
        ? {
            repo: event.repo,
            owner: event.owner,
            triggerUser: event.triggerUser,
            rootUrl: options.rootUrl,
            nowSec: options.clock.nowSec(),
          }
        : await contextOf(tx, event.run);
    if (ctx === null) return;
    if (event.type === 'actions.run.created') {
      // A new run is "requested" (or already completed when its workflow could not be parsed).
      await runEvents(tx, ctx, subs, event.run, null);
      await jobEvents(
        tx,
        ctx,
        subs,
        event.run,
        event.jobs,
        event.jobs.map((job) => job.id),
      );
    } else if (event.type === 'actions.jobs.changed') {
      await jobEvents(tx, ctx, subs, event.run, event.jobs, await event.runJobIds());
    } else {
      await runEvents(tx, ctx, subs, event.run, event.previous);
    }
  };
  return handle;
}
