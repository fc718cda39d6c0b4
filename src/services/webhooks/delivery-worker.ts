// Delivers the webhook outbox: every process runs one worker; each claims due
// hook_task rows with a lease (models/hook-tasks.ts: SKIP LOCKED on
// PostgreSQL, a conditional UPDATE on SQLite), delivers up to `concurrency`
// at once, records every attempt, and schedules a retry (retry.ts) or settles
// the row. A worker that dies mid-delivery leaves its rows leased; once the
// lease expires another worker (or the restarted one) claims them again — so
// a delivery is made at least once, with the same delivery id every time.
// Unlike Forgejo (deliver.go marks a task delivered BEFORE sending: at most
// once), the row is settled only after the attempt.
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { Dispatcher } from 'undici';
import type { Clock } from '../../modules/clock.ts';
import type { Db } from '../../models/database.ts';
import { claimDueHookTasks, recordHookTaskAttempt } from '../../models/hook-tasks.ts';
import type { AttemptOutcome, AttemptRecord, HookTask } from '../../models/hook-tasks.ts';
import { findWebhookById } from '../../models/webhooks.ts';
import { DEFAULT_RETRY_POLICY, parseRetryAfter, retryDelayMs } from './retry.ts';
import type { RetryPolicy } from './retry.ts';
import { prepareRequest } from './prepare-request.ts';
import type { HookSecrets } from './prepare-request.ts';
import { DEFAULT_DELIVER_TIMEOUT_MS, DEFAULT_MAX_RESPONSE_BYTES, redactHeaders, sendRequest } from './sender.ts';
import { createGuardedAgent } from './ssrf.ts';

export type { HookSecrets } from './prepare-request.ts';

export interface DeliveryWorkerOptions {
  /** Deliveries in flight at once in this process. */
  concurrency?: number;
  /** How often to look for due rows when idle. */
  pollIntervalMs?: number;
  /** How long a claim holds; longer than timeoutMs, or a slow attempt is duplicated. */
  leaseMs?: number;
  /** GANTRY_WEBHOOK_ALLOWED_HOSTS. */
  allowedHosts?: string;
  /** Whole-attempt deadline (Forgejo's DELIVER_TIMEOUT, 5 s). */
  timeoutMs?: number;
  maxResponseBytes?: number;
  retry?: Partial<RetryPolicy>;
  /** Tests and custom egress only: replaces the SSRF-guarded agent. */
  dispatcher?: Dispatcher;
  onError?: (error: unknown) => void;
}

export class WebhookDeliveryWorker {
  readonly owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly concurrency: number;
  private readonly pollIntervalMs: number;
  private readonly leaseMs: number;
  private readonly timeoutMs: number;
  private readonly maxResponseBytes: number;
  private readonly retry: RetryPolicy;
  private readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  private readonly inFlight = new Set<Promise<void>>();
  private running = false;
  private timer: NodeJS.Timeout | null = null;
  private polling: Promise<void> | null = null;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly secrets: HookSecrets,
    private readonly options: DeliveryWorkerOptions = {},
  ) {
    this.concurrency = options.concurrency ?? 8;
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_DELIVER_TIMEOUT_MS;
    this.leaseMs = options.leaseMs ?? Math.max(60_000, this.timeoutMs * 4);
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.retry = { ...DEFAULT_RETRY_POLICY, ...options.retry };
    this.ownsDispatcher = !options.dispatcher;
    this.dispatcher = options.dispatcher ?? createGuardedAgent(options.allowedHosts ?? 'external', { connectTimeoutMs: this.timeoutMs });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(0);
  }

  /** Stops claiming and waits for the deliveries in flight. */
  async stop(): Promise<void> {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.polling;
    await Promise.allSettled([...this.inFlight]);
    if (this.ownsDispatcher) await this.dispatcher.close();
  }

  /** Claims what fits in the free slots and starts delivering it; the number claimed. */
  async pollOnce(): Promise<number> {
    const free = this.concurrency - this.inFlight.size;
    if (free <= 0) return 0;
    const tasks = await claimDueHookTasks(this.db, this.owner, this.clock.nowMs(), this.leaseMs, free);
    for (const task of tasks) {
      const job: Promise<void> = this.deliver(task)
        .catch((error: unknown) => this.options.onError?.(error))
        .finally(() => {
          this.inFlight.delete(job);
          // A slot came free: look for more at once.
          if (this.running) this.schedule(0);
        });
      this.inFlight.add(job);
    }
    return tasks.length;
  }

  private schedule(delayMs: number): void {
    if (!this.running) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.polling) return this.schedule(delayMs);
      this.polling = (async () => {
        let claimed = 0;
        try {
          claimed = await this.pollOnce();
        } catch (error) {
          this.options.onError?.(error);
        }
        this.polling = null;
        // Full batch: more may be due right away; otherwise wait (or a finishing delivery wakes us).
        if (!this.timer) this.schedule(claimed > 0 && this.inFlight.size < this.concurrency ? 0 : this.pollIntervalMs);
      })();
    }, delayMs);
    this.timer.unref?.();
  }

  private async deliver(task: HookTask): Promise<void> {
    const attemptNumber = task.attempts + 1;
    const startedMs = this.clock.nowMs();
    const hook = await findWebhookById(this.db, task.hook_id);
    let record: AttemptRecord;
    let permanent = false;
    let retryAfterMs: number | null = null;
    const empty = { started: startedMs, durationMs: 0, requestUrl: hook?.url ?? '', requestHeaders: {}, requestBody: '', responseStatus: 0, responseHeaders: {}, responseBody: '' };
    if (!hook || !hook.isActive) {
      // Forgejo drops the task of a deactivated hook without sending; so do we, visibly.
      record = { ...empty, error: hook ? 'the webhook is not active: not delivered' : 'the webhook was deleted: not delivered' };
      permanent = true;
    } else {
      const prepared = await prepareRequest(hook, task, this.secrets, attemptNumber);
      if (prepared.kind === 'unsendable') {
        record = { ...empty, error: prepared.error };
        permanent = prepared.permanent;
      } else {
        const { request } = prepared;
        const result = await sendRequest(request, { dispatcher: this.dispatcher, timeoutMs: this.timeoutMs, maxResponseBytes: this.maxResponseBytes });
        const ok = result.status >= 200 && result.status < 300;
        record = {
          started: startedMs,
          durationMs: result.durationMs,
          requestUrl: request.url,
          requestHeaders: redactHeaders(request.headers),
          requestBody: request.body,
          responseStatus: result.status,
          responseHeaders: result.headers,
          responseBody: result.body,
          error: ok ? '' : result.error || `the receiver answered ${result.status}${result.status >= 300 && result.status < 400 ? ' (redirects are not followed)' : ''}`,
        };
        if (result.status === 429 || result.status === 503) retryAfterMs = parseRetryAfter(result.retryAfter, this.clock.nowMs());
      }
    }
    const nowMs = this.clock.nowMs();
    let outcome: AttemptOutcome;
    if (record.error === '') outcome = { kind: 'delivered' };
    else {
      const wait = permanent ? null : retryDelayMs(this.retry, attemptNumber, retryAfterMs);
      outcome = wait === null ? { kind: 'failed' } : { kind: 'retry', nextAttemptAt: nowMs + wait };
    }
    await this.db.transaction().execute((tx) => recordHookTaskAttempt(tx, task, this.owner, record, outcome, nowMs));
  }
}
