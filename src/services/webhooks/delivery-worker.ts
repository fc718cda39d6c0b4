// Delivers the webhook outbox: every process runs one worker; each claims due
// hook_task rows with a lease (models/hook-tasks.ts: SKIP LOCKED on
// PostgreSQL, a conditional UPDATE on SQLite), delivers up to `concurrency`
// at once, records every attempt, and schedules a retry (retry.ts) or settles
// the row. A worker that dies mid-delivery leaves its rows leased; once the
// lease expires another worker (or the restarted one) claims them again — so
// a delivery is made at least once, with the same delivery id every time.
// Unlike Forgejo (deliver.go marks a task delivered BEFORE sending: at most
// once), the row is settled only after the attempt.
//
// Throughput: the database, not HTTP, bounds a busy worker, so its work is
// batched. A claim leases up to `batchSize` rows into a local queue (claimed
// again before the queue runs dry) and reads their hooks in one query;
// finished attempts are recorded together (group commit), each slot taking
// the next row meanwhile. A queued row is sent only while its lease still
// covers a whole attempt, so two processes never send one row at the same
// time; rows claimed but not started when the worker stops are given back.
// The price of group commit: after a crash, up to about 2 × concurrency
// deliveries (in flight, or sent and not yet recorded) are sent again.
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { Dispatcher } from 'undici';
import type { Clock } from '../../modules/clock.ts';
import type { Db } from '../../models/database.ts';
import {
  claimDueHookTasks,
  claimExpiredHookTasks,
  recordHookTaskAttempts,
  releaseHookTasks,
} from '../../models/hook-tasks.ts';
import type { AttemptOutcome, AttemptRecord, HookTask, SettledAttempt } from '../../models/hook-tasks.ts';
import { findWebhooksByIds } from '../../models/webhooks.ts';
import type { WebhookRecord } from '../../models/webhooks.ts';
import { DEFAULT_RETRY_POLICY, parseRetryAfter, retryDelayMs } from './retry.ts';
import type { RetryPolicy } from './retry.ts';
import { prepareRequest } from './prepare-request.ts';
import type { HookSecrets } from './prepare-request.ts';
import { DEFAULT_DELIVER_TIMEOUT_MS, DEFAULT_MAX_RESPONSE_BYTES, redactHeaders, sendRequest } from './sender.ts';
import { createGuardedAgent } from './ssrf.ts';

export type { HookSecrets } from './prepare-request.ts';

/** How long a finished attempt may wait for others to be recorded with it. */
const RECORD_DELAY_MS = 5;
/** Clear secrets and Authorization headers kept in memory (two per hook). */
const CLEAR_VALUES_CACHED = 2000;

/**
 * Decrypting a hook's secret and Authorization header for every attempt cost
 * more than signing the body: keep the clear values of the ciphertexts seen
 * last (a changed or re-encrypted value is a new ciphertext, so never stale).
 */
function withClearValuesCached(secrets: HookSecrets): HookSecrets {
  const clear = new Map<string, string>();
  const cached = (key: string, decrypt: () => string): string => {
    let value = clear.get(key);
    if (value === undefined) {
      value = decrypt();
      if (clear.size >= CLEAR_VALUES_CACHED) clear.delete(clear.keys().next().value as string);
      clear.set(key, value);
    }
    return value;
  };
  return {
    secretOf: (hook) => cached(`${hook.id}:secret:${hook.secretEncrypted}`, () => secrets.secretOf(hook)),
    authorizationHeaderOf: (hook) =>
      cached(`${hook.id}:authorization:${hook.authorizationHeaderEncrypted}`, () =>
        secrets.authorizationHeaderOf(hook),
      ),
    ...(secrets.readRepositoryFile ? { readRepositoryFile: secrets.readRepositoryFile.bind(secrets) } : {}),
  };
}

export interface DeliveryWorkerOptions {
  /** Deliveries in flight at once in this process. */
  concurrency?: number;
  /** Rows this process holds to send at most (queued and in flight); default 4 × concurrency. */
  batchSize?: number;
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
  private readonly batchSize: number;
  /** Claim more once fewer rows than this wait in the queue, so it never runs dry while a claim is under way. */
  private readonly lowWater: number;
  private readonly secrets: HookSecrets;
  private readonly pollIntervalMs: number;
  private readonly leaseMs: number;
  private readonly timeoutMs: number;
  private readonly maxResponseBytes: number;
  private readonly retry: RetryPolicy;
  /** The agent, made (and undici loaded, ssrf.ts) on the first delivery. */
  private dispatcher: Promise<Dispatcher> | null;
  private readonly ownsDispatcher: boolean;
  /** Claimed, not started yet, oldest first. */
  private readonly queue: Array<{ task: HookTask; hook: WebhookRecord | null }> = [];
  private readonly inFlight = new Set<Promise<void>>();
  /** Finished attempts waiting for the recorder. */
  private readonly unrecorded: SettledAttempt[] = [];
  /** Attempts in the transaction being written. */
  private recordingCount = 0;
  private recording: Promise<void> | null = null;
  private recordTimer: NodeJS.Timeout | null = null;
  /** The last claim found rows: claim again as soon as there is room, not after pollIntervalMs. */
  private rowsFlowing = false;
  private expiredCheckedAt = Number.NEGATIVE_INFINITY;
  private running = false;
  private timer: NodeJS.Timeout | null = null;
  private polling: Promise<void> | null = null;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    secrets: HookSecrets,
    private readonly options: DeliveryWorkerOptions = {},
  ) {
    this.secrets = withClearValuesCached(secrets);
    this.concurrency = options.concurrency ?? 8;
    this.batchSize = Math.max(this.concurrency, options.batchSize ?? this.concurrency * 4);
    this.lowWater = Math.max(this.concurrency, Math.floor(this.batchSize / 2));
    this.pollIntervalMs = options.pollIntervalMs ?? 1000;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_DELIVER_TIMEOUT_MS;
    this.leaseMs = options.leaseMs ?? Math.max(60_000, this.timeoutMs * 4);
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
    this.retry = { ...DEFAULT_RETRY_POLICY, ...options.retry };
    this.ownsDispatcher = !options.dispatcher;
    this.dispatcher = options.dispatcher ? Promise.resolve(options.dispatcher) : null;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(0);
  }

  /** Stops claiming, gives back the rows not started, waits for the deliveries in flight and records them. */
  async stop(): Promise<void> {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.polling;
    const unstarted = this.queue.splice(0);
    try {
      await releaseHookTasks(
        this.db,
        this.owner,
        unstarted.map((q) => q.task.id),
        this.clock.nowMs(),
      );
    } catch (error) {
      // Their leases expire instead.
      this.options.onError?.(error);
    }
    await Promise.allSettled([...this.inFlight]);
    if (this.unrecorded.length > 0) this.recordNow();
    await this.recording;
    if (this.ownsDispatcher && this.dispatcher !== null) await (await this.dispatcher).close();
  }

  private agent(): Promise<Dispatcher> {
    this.dispatcher ??= createGuardedAgent(this.options.allowedHosts ?? 'external', {
      connectTimeoutMs: this.timeoutMs,
    });
    return this.dispatcher;
  }

  /** Claims what the batch has room for, with their hooks, and starts what fits in the free slots; the number claimed. */
  async pollOnce(): Promise<number> {
    const room = this.batchSize - this.queue.length - this.inFlight.size;
    if (room <= 0 || !this.recorderKeepsUp()) return 0;
    const nowMs = this.clock.nowMs();
    let tasks: HookTask[] = [];
    // Expired leases (a worker died) are rare: look for them once per poll interval, not on every claim.
    if (nowMs - this.expiredCheckedAt >= this.pollIntervalMs) {
      this.expiredCheckedAt = nowMs;
      tasks = await claimExpiredHookTasks(this.db, this.owner, nowMs, this.leaseMs, room);
    }
    if (tasks.length < room)
      tasks = tasks.concat(await claimDueHookTasks(this.db, this.owner, nowMs, this.leaseMs, room - tasks.length));
    this.rowsFlowing = tasks.length > 0;
    if (tasks.length === 0) return 0;
    let hooks: Map<number, WebhookRecord>;
    try {
      hooks = new Map(
        (await findWebhooksByIds(this.db, [...new Set(tasks.map((t) => t.hook_id))])).map((h) => [h.id, h]),
      );
    } catch (error) {
      // Give the rows back rather than leave them leased (if this fails too, the leases expire).
      await releaseHookTasks(
        this.db,
        this.owner,
        tasks.map((t) => t.id),
        this.clock.nowMs(),
      ).catch(() => {});
      throw error;
    }
    for (const task of tasks) this.queue.push({ task, hook: hooks.get(task.hook_id) ?? null });
    this.startQueued();
    return tasks.length;
  }

  /** Fills the free slots from the queue. */
  private startQueued(): void {
    while (this.running && this.inFlight.size < this.concurrency && this.queue.length > 0) {
      const { task, hook } = this.queue.shift() as { task: HookTask; hook: WebhookRecord | null };
      // Not enough lease left for a whole attempt: another process may claim
      // the row any moment. Leave it to whoever claims it next.
      if (this.clock.nowMs() + this.timeoutMs >= task.lease_until) continue;
      const job: Promise<void> = this.attempt(task, hook)
        .then((settled) => this.record(settled))
        .catch((error: unknown) => this.options.onError?.(error))
        .finally(() => {
          this.inFlight.delete(job);
          this.startQueued();
          this.claimSoonIfLow();
        });
      this.inFlight.add(job);
    }
  }

  /** Finished attempts are recorded about as fast as they come: otherwise claim nothing more until they are. */
  private recorderKeepsUp(): boolean {
    return this.unrecorded.length + this.recordingCount < this.batchSize;
  }

  private wantsRows(): boolean {
    return this.rowsFlowing && this.queue.length < this.lowWater && this.recorderKeepsUp();
  }

  /** The queue runs low while rows are flowing: claim more now rather than after pollIntervalMs. */
  private claimSoonIfLow(): void {
    if (!this.polling && this.wantsRows()) this.schedule(0);
  }

  private schedule(delayMs: number): void {
    if (!this.running) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.polling) this.polling = this.poll();
    }, delayMs);
    this.timer.unref?.();
  }

  private async poll(): Promise<void> {
    try {
      await this.pollOnce();
    } catch (error) {
      this.rowsFlowing = false;
      this.options.onError?.(error);
    }
    this.polling = null;
    // Rows found and room left: more may be due right away. Otherwise wait
    // (a delivery that finishes while rows are flowing wakes us earlier).
    this.schedule(this.wantsRows() ? 0 : this.pollIntervalMs);
  }

  /**
   * Hands a finished attempt to the recorder. Attempts are recorded together
   * (group commit): once `concurrency` of them wait, or RECORD_DELAY_MS after
   * the first, whichever comes first; the row stays leased meanwhile, and its
   * slot is already free for the next delivery.
   */
  private record(settled: SettledAttempt): void {
    this.unrecorded.push(settled);
    if (this.recording) return;
    if (this.unrecorded.length >= this.concurrency) this.recordNow();
    else this.recordTimer ??= setTimeout(() => this.recordNow(), RECORD_DELAY_MS).unref();
  }

  private recordNow(): void {
    if (this.recordTimer) clearTimeout(this.recordTimer);
    this.recordTimer = null;
    this.recording ??= this.recordAll();
  }

  private async recordAll(): Promise<void> {
    while (this.unrecorded.length > 0) {
      const batch = this.unrecorded.splice(0);
      this.recordingCount = batch.length;
      try {
        await recordHookTaskAttempts(this.db, this.owner, batch);
      } catch (error) {
        // One bad row must not cost the others their record: each alone.
        if (batch.length === 1) this.options.onError?.(error);
        else {
          for (const one of batch) {
            try {
              await recordHookTaskAttempts(this.db, this.owner, [one]);
            } catch (oneError) {
              // Still leased: delivered again when the lease expires.
              this.options.onError?.(oneError);
            }
          }
        }
      }
      this.recordingCount = 0;
    }
    this.recording = null;
    this.claimSoonIfLow();
  }

  private async attempt(task: HookTask, hook: WebhookRecord | null): Promise<SettledAttempt> {
    const attemptNumber = task.attempts + 1;
    const startedMs = this.clock.nowMs();
    let record: AttemptRecord;
    let permanent = false;
    let retryAfterMs: number | null = null;
    const empty = {
      started: startedMs,
      durationMs: 0,
      requestUrl: hook?.url ?? '',
      requestHeaders: {},
      requestBody: '',
      responseStatus: 0,
      responseHeaders: {},
      responseBody: '',
    };
    if (!hook || !hook.isActive) {
      // Forgejo drops the task of a deactivated hook without sending; so do we, visibly.
      record = {
        ...empty,
        error: hook ? 'the webhook is not active: not delivered' : 'the webhook was deleted: not delivered',
      };
      permanent = true;
    } else {
      const prepared = await prepareRequest(hook, task, this.secrets, attemptNumber);
      if (prepared.kind === 'unsendable') {
        record = { ...empty, error: prepared.error };
        permanent = prepared.permanent;
      } else {
        const { request } = prepared;
        const result = await sendRequest(request, {
          dispatcher: await this.agent(),
          timeoutMs: this.timeoutMs,
          maxResponseBytes: this.maxResponseBytes,
        });
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
          error: ok
            ? ''
            : result.error ||
              `the receiver answered ${result.status}${result.status >= 300 && result.status < 400 ? ' (redirects are not followed)' : ''}`,
        };
        if (result.status === 429 || result.status === 503)
          retryAfterMs = parseRetryAfter(result.retryAfter, this.clock.nowMs());
        // A target the allow list refuses stays refused until someone edits the hook or the setting: no retries.
        if (result.refused) permanent = true;
      }
    }
    const nowMs = this.clock.nowMs();
    let outcome: AttemptOutcome;
    if (record.error === '') outcome = { kind: 'delivered' };
    else {
      const wait = permanent ? null : retryDelayMs(this.retry, attemptNumber, retryAfterMs);
      outcome = wait === null ? { kind: 'failed' } : { kind: 'retry', nextAttemptAt: nowMs + wait };
    }
    return { task, attempt: record, outcome, nowMs };
  }
}
