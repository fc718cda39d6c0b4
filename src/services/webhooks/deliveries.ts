// The delivery history of an organization or repository hook, its
// redelivery and its ping (filling Forgejo's gap #38463 with GitHub's
// hook-deliveries vocabulary).
//
// Redelivery: a NEW delivery (new id, new guid, redelivery=true) with the
// stored payload, sent with the hook's current URL, secret and header — as
// Forgejo's UI replay does (the guid column is unique). Automatic retries of
// one delivery keep its guid; only an explicit redelivery gets a fresh one.
//
// Ping: a `ping` event (GitHub's shape: zen, hook_id, hook) queued like any
// delivery but past the event and branch gates, so a receiver can be tested
// whatever it subscribes to. Forgejo has no ping (#37055); receivers that only
// know Forgejo events see an unknown X-Gitea-Event and may ignore it.

import { randomUUID } from 'node:crypto';
import { AppError } from '../../modules/errors.ts';
import type { Clock } from '../../modules/clock.ts';
import type { Page } from '../../modules/pagination.ts';
import type { Db } from '../../models/database.ts';
import {
  findHookTask,
  HookTaskStatus,
  insertHookTask,
  listHookTaskAttempts,
  listHookTasks,
} from '../../models/hook-tasks.ts';
import type { HookTask, HookTaskAttempt } from '../../models/hook-tasks.ts';
import { findWebhookOfScope } from '../../models/webhooks.ts';
import type { WebhookRecord } from '../../models/webhooks.ts';
import { orgScope, repoScope } from '../../modules/scope.ts';
import type { Scope } from '../../modules/scope.ts';
import type { Repository } from '../../models/repos.ts';
import type { User } from '../../models/users.ts';
import { AccessMode } from '../../modules/access-mode.ts';
import { toApiOrg, toApiRepo, toApiUser } from '../convert.ts';
import { ANONYMOUS_VIEWER } from '../push-payloads.ts';
import { apiEventsOf } from './hook-events.ts';

const STATUS_NAMES = ['pending', 'delivering', 'delivered', 'failed'] as const;

export interface HookDeliverySummary {
  id: number;
  guid: string;
  event: string;
  /** pending (waiting for its first or next attempt), delivering, delivered, failed (no more attempts). */
  state: (typeof STATUS_NAMES)[number];
  /** GitHub's text: `OK`, `Invalid HTTP Response: 500`, or the error of the last attempt. */
  status: string;
  status_code: number;
  /** Seconds the last attempt took. */
  duration: number;
  delivered_at: string | null;
  created_at: string;
  next_attempt_at: string | null;
  redelivery: boolean;
  attempts: number;
}

export interface HookDeliveryAttempt {
  attempt: number;
  started_at: string;
  duration: number;
  url: string;
  request: { headers: Record<string, string>; payload: string };
  response: { status_code: number; headers: Record<string, string>; payload: string };
  error: string;
}

export interface HookDeliveryDetail extends HookDeliverySummary {
  /** The last attempt's request and response (GitHub's shape); null before the first attempt. */
  request: { headers: Record<string, string>; payload: unknown } | null;
  response: { headers: Record<string, string>; payload: string } | null;
  /** Every attempt, oldest first. */
  attempt_history: HookDeliveryAttempt[];
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function parseJsonObject(text: string): Record<string, string> {
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed && typeof parsed === 'object' ? (parsed as Record<string, string>) : {};
  } catch {
    return {};
  }
}

function summary(task: HookTask): HookDeliverySummary {
  const state = STATUS_NAMES[task.status] ?? 'pending';
  const statusText =
    task.attempts === 0
      ? ''
      : task.last_status_code >= 200 && task.last_status_code < 300
        ? 'OK'
        : task.last_status_code > 0
          ? `Invalid HTTP Response: ${task.last_status_code}`
          : task.last_error;
  return {
    id: task.id,
    guid: task.uuid,
    event: task.event_type,
    state,
    status: statusText,
    status_code: task.last_status_code,
    duration: task.last_duration_ms / 1000,
    delivered_at: task.delivered > 0 ? iso(task.delivered) : null,
    // To the second, as before hook_task kept milliseconds (migration 0012).
    created_at: iso(Math.floor(task.created / 1000) * 1000),
    next_attempt_at: task.status === HookTaskStatus.pending ? iso(task.next_attempt_at) : null,
    redelivery: task.is_redelivery === 1,
    attempts: task.attempts,
  };
}

function attemptOf(a: HookTaskAttempt): HookDeliveryAttempt {
  return {
    attempt: a.attempt,
    started_at: iso(a.started),
    duration: a.duration_ms / 1000,
    url: a.request_url,
    request: { headers: parseJsonObject(a.request_headers), payload: a.request_body },
    response: {
      status_code: a.response_status,
      headers: parseJsonObject(a.response_headers),
      payload: a.response_body,
    },
    error: a.error,
  };
}

/** What a ping names as the hook's place: the organization, or the repository and its owner. */
export type HookPlace = { kind: 'org'; org: User } | { kind: 'repo'; repo: Repository; owner: User };

export function scopeOfPlace(place: HookPlace): Scope {
  return place.kind === 'org' ? orgScope(place.org) : repoScope(place.repo);
}

export class HookDeliveryService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly rootUrl: string,
  ) {}

  private async hookOf(scope: Scope, hookId: number): Promise<WebhookRecord> {
    const hook = hookId > 0 ? await findWebhookOfScope(this.db, scope, hookId) : null;
    if (!hook) throw AppError.notFound();
    return hook;
  }

  /** Newest first. */
  async list(scope: Scope, hookId: number, page: Page): Promise<{ deliveries: HookDeliverySummary[]; total: number }> {
    const hook = await this.hookOf(scope, hookId);
    const { tasks, total } = await listHookTasks(this.db, hook.id, page.offset, page.limit);
    return { deliveries: tasks.map(summary), total };
  }

  async get(scope: Scope, hookId: number, deliveryId: number): Promise<HookDeliveryDetail> {
    const hook = await this.hookOf(scope, hookId);
    const task = deliveryId > 0 ? await findHookTask(this.db, hook.id, deliveryId) : null;
    if (!task) throw AppError.notFound();
    const attempts = (await listHookTaskAttempts(this.db, task.id)).map(attemptOf);
    const last = attempts.at(-1);
    let payload: unknown = task.payload_content;
    try {
      payload = JSON.parse(task.payload_content);
    } catch {
      // Kept as text.
    }
    return {
      ...summary(task),
      request: last ? { headers: last.request.headers, payload } : null,
      response: last ? { headers: last.response.headers, payload: last.response.payload } : null,
      attempt_history: attempts,
    };
  }

  /** A new delivery of the same payload (see the file comment); answers its summary. */
  async redeliver(scope: Scope, hookId: number, deliveryId: number): Promise<HookDeliverySummary> {
    const hook = await this.hookOf(scope, hookId);
    const task = deliveryId > 0 ? await findHookTask(this.db, hook.id, deliveryId) : null;
    if (!task) throw AppError.notFound();
    const id = await insertHookTask(this.db, {
      hookId: hook.id,
      uuid: randomUUID(),
      eventType: task.event_type,
      payload: task.payload_content,
      isRedelivery: true,
      nowMs: this.clock.nowMs(),
    });
    const created = await findHookTask(this.db, hook.id, id);
    if (!created) throw new Error('redelivery vanished');
    return summary(created);
  }

  /** Queues a `ping` delivery; answers its summary. */
  async ping(place: HookPlace, hookId: number, doer: User): Promise<HookDeliverySummary> {
    const hook = await this.hookOf(scopeOfPlace(place), hookId);
    const viewer = ANONYMOUS_VIEWER;
    const payload = {
      zen: 'Keep it logically awesome.',
      hook_id: hook.id,
      hook: {
        id: hook.id,
        type: hook.type,
        active: hook.isActive,
        events: apiEventsOf(hook.events),
        config: { url: hook.url, content_type: hook.contentType },
      },
      ...(place.kind === 'org'
        ? { organization: toApiOrg(place.org, this.rootUrl) }
        : { repository: toApiRepo(place.repo, place.owner, AccessMode.none, viewer, this.rootUrl) }),
      sender: toApiUser(doer, viewer, this.rootUrl),
    };
    const id = await insertHookTask(this.db, {
      hookId: hook.id,
      uuid: randomUUID(),
      eventType: 'ping',
      payload: JSON.stringify(payload, null, 2),
      nowMs: this.clock.nowMs(),
    });
    const created = await findHookTask(this.db, hook.id, id);
    if (!created) throw new Error('ping vanished');
    return summary(created);
  }
}
