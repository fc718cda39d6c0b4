// The runner protocol's domain side: authenticating runners, Declare, and
// FetchTask — claiming a waiting job atomically and building the task a runner
// executes (Forgejo: routers/api/actions/runner/runner.go, services/actions/
// task.go, services/actions/context.go, models/actions/task.go). Register is
// RunnerService's; UpdateTask and UpdateLog are TaskReportService's.
//
// FetchTask is a bounded long poll: when nothing can be claimed it waits up to
// FETCH_LONG_POLL_MS for the scope's tasks version to move (polled every
// VERSION_POLL_MS, so a job created by another Gantry process wakes it too)
// and then answers with the version it saw. act_runner's fetch timeout is 5 s,
// so the bound stays well below it.
import { parse as parseYaml } from 'yaml';
import { ActionStatus } from '../../modules/actions-status.ts';
import type { Clock } from '../../modules/clock.ts';
import { digestsEqual, generateTokenString, hashToken } from '../../modules/crypto/tokens.ts';
import { lockRun } from '../../models/action-runs.ts';
import type { Db } from '../../models/database.ts';
import { bumpTasksVersionsForRepo, findRunnerByUuid, tasksVersion, touchRunner, updateRunnerDeclaration } from '../../models/runners.ts';
import type { Runner, RunnerScope } from '../../models/runners.ts';
import {
  claimJob,
  findJobById,
  findTaskForRunner,
  insertTaskSteps,
  lockFirstClaimable,
  lockRunnerForClaim,
  releaseClaim,
  replaceTaskToken,
  runnerHasAnyTask,
  waitingJobsPage,
} from '../../models/task-claims.ts';
import type { ClaimedJob } from '../../models/task-claims.ts';
import type { DomainEvents } from '../events.ts';
import type { RunProgress } from './run-progress.ts';
import type { SecretService } from './secrets.ts';
import { TaskPayloadBuilder } from './task-payload.ts';
import type { TaskPayload } from './task-payload.ts';
import { TasksVersionWatch } from './tasks-version-watch.ts';
import type { VariableService } from './variables.ts';

export type { TaskNeedPayload, TaskPayload } from './task-payload.ts';

/** How long FetchTask waits for a claimable job before answering "nothing". */
export const FETCH_LONG_POLL_MS = 3000;
/** How often a waiting FetchTask re-reads the tasks version (wake-ups across processes). */
export const VERSION_POLL_MS = 250;
/** Upper bound on Forgejo's task_capacity: more tasks than this are never handed out in one answer. */
export const MAX_TASKS_PER_FETCH = 32;
/** How long the tasks handed out under a request key can be fetched again (forgejo-runner retries). */
const REQUEST_KEY_TTL_MS = 10 * 60_000;
/** Waiting jobs read per page while looking for one the runner's labels match. */
const CANDIDATE_PAGE = 200;
/** PostgreSQL deadlock/serialization failures and SQLite lock contention are retried this often. */
const MAX_CLAIM_ATTEMPTS = 5;

export interface FetchTasksRequest {
  /** The version the runner saw last. */
  tasksVersion: number;
  /** Forgejo's task_capacity; absent means one. */
  capacity?: number;
  /** Forgejo's FetchSingleTask: only the job with this handle. */
  handle?: string;
  /** Forgejo's x-runner-request-key: a retry with the same key gets the same tasks again. */
  requestKey?: string;
  /** Aborted when the runner hung up: stop waiting, and give back what it will never receive. */
  signal?: AbortSignal;
  /** The caller's own deadline, if shorter than the long poll (Connect-Timeout-Ms less a margin). */
  maxWaitMs?: number;
}

export interface FetchTasksResult {
  tasks: TaskPayload[];
  tasksVersion: number;
}

/** Forgejo answers a request key that another call is still serving with this (the runner retries). */
export class RequestKeyBusyError extends Error {
  constructor() {
    super('request key is currently locked; retry soon');
  }
}

export interface RunnerProtocolOptions {
  /** FETCH_LONG_POLL_MS unless set (tests shorten it). */
  longPollMs?: number;
}

function scopeOf(runner: Runner): RunnerScope {
  return { ownerId: runner.ownerId, repoId: runner.repoId };
}

/** runs-on ⊆ the runner's labels, exact strings (Forgejo's CanMatchLabels). */
function canRun(runsOn: readonly string[], labels: ReadonlySet<string>): boolean {
  return runsOn.every((label) => labels.has(label));
}

function isRetryableClaimError(error: unknown): boolean {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return code === '40P01' || code === '40001' || code === 'SQLITE_BUSY' || code === 'SQLITE_BUSY_SNAPSHOT';
}

/**
 * Step names as Forgejo's jobparser gives them (Step.String): the name, else
 * the action used, else the script, else the step id. One per step of the
 * payload's single job; a payload that does not parse has no steps.
 */
export function stepNamesOf(workflowPayload: string): string[] {
  let doc: unknown;
  try {
    doc = parseYaml(workflowPayload);
  } catch {
    return [];
  }
  const jobs = (doc as { jobs?: unknown } | null)?.jobs;
  if (typeof jobs !== 'object' || jobs === null) return [];
  const job = Object.values(jobs)[0] as { steps?: unknown } | undefined;
  if (!Array.isArray(job?.steps)) return [];
  return job.steps.map((step: unknown) => {
    const s = (typeof step === 'object' && step !== null ? step : {}) as Record<string, unknown>;
    for (const key of ['name', 'uses', 'run', 'id']) {
      const value = s[key];
      if (value !== undefined && value !== null && String(value) !== '') return String(value);
    }
    return '';
  });
}

interface Claim {
  claimed: ClaimedJob;
  token: string;
}

export class RunnerProtocolService {
  private readonly watch: TasksVersionWatch;
  private readonly payloads: TaskPayloadBuilder;
  private readonly longPollMs: number;
  /** Last second each runner's liveness was written (online, active): at most one write per second. */
  private readonly touched = new Map<number, { online: number; active: number }>();
  /** Tasks handed out per (runner, request key), for a retry of a FetchTask whose answer got lost. */
  private readonly byRequestKey = new Map<string, { taskIds: number[]; expiresAt: number }>();
  private readonly keysInFlight = new Set<string>();

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly runProgress: RunProgress,
    secrets: SecretService,
    variables: VariableService,
    events: DomainEvents,
    /** ROOT_URL with its trailing slash (Forgejo's AppURL). */
    rootUrl: string,
    options: RunnerProtocolOptions = {},
  ) {
    this.payloads = new TaskPayloadBuilder(db, secrets, variables, rootUrl);
    this.longPollMs = options.longPollMs ?? FETCH_LONG_POLL_MS;
    this.watch = new TasksVersionWatch(db, VERSION_POLL_MS);
    // The run is recorded inside its (not yet committed) transaction: look a
    // little later; the periodic tick catches a slower commit.
    events.subscribe(async (_tx, event) => {
      if (event.type === 'actions.run.created') setTimeout(() => this.watch.poke(), 25).unref();
    });
  }

  /**
   * The runner named by the x-runner-uuid/x-runner-token headers, or null.
   * Records that it is online (and active, for task reports).
   */
  async authenticate(uuid: string, token: string, active: boolean): Promise<Runner | null> {
    if (uuid === '' || token === '') return null;
    const runner = await findRunnerByUuid(this.db, uuid);
    if (runner === null || !digestsEqual(runner.tokenHash, hashToken(token))) return null;
    const now = this.clock.nowSec();
    const last = this.touched.get(runner.id);
    if (last === undefined || (active ? last.active !== now : last.online !== now)) {
      await touchRunner(this.db, runner.id, now, active);
      this.touched.set(runner.id, { online: now, active: active ? now : (last?.active ?? 0) });
      if (this.touched.size > 10_000) for (const [id, seen] of this.touched) if (seen.online < now - 120) this.touched.delete(id);
      runner.lastOnline = now;
      if (active) runner.lastActive = now;
    }
    return runner;
  }

  /** Declare: the runner's labels and version as it starts polling. */
  async declare(runner: Runner, version: string, labels: readonly string[]): Promise<Runner> {
    return updateRunnerDeclaration(this.db, runner.id, version, labels, this.clock.nowSec());
  }

  /** FetchTask and FetchSingleTask. */
  async fetchTasks(runner: Runner, request: FetchTasksRequest): Promise<FetchTasksResult> {
    const key = request.requestKey ? `${runner.id}:${request.requestKey}` : null;
    if (key !== null) {
      if (this.keysInFlight.has(key)) throw new RequestKeyBusyError();
      this.keysInFlight.add(key);
    }
    try {
      if (key !== null) {
        const recovered = await this.recover(runner, key);
        if (recovered.length > 0) return { tasks: recovered, tasksVersion: 0 };
      }
      const scope = scopeOf(runner);
      let latest = await tasksVersion(this.db, scope, this.clock.nowSec());
      const capacity = Math.min(Math.max(Math.trunc(request.capacity ?? 1), 1), MAX_TASKS_PER_FETCH);
      // Real time, not the injectable clock: this bounds how long a request is held.
      const deadline = Date.now() + Math.min(this.longPollMs, request.maxWaitMs ?? Infinity);
      if (request.tasksVersion === latest && key === null) {
        // Nothing changed since the runner last looked, so there is nothing to
        // search for yet: hold the request until a job appears or the bound
        // passes (Forgejo answers at once and the runner polls again later).
        const next = await this.watch.waitForChange(scope, latest, deadline - Date.now(), request.signal);
        if (next === null) return { tasks: [], tasksVersion: latest };
        latest = next;
      }
      for (;;) {
        const tasks = await this.claimTasks(runner, capacity, request, key);
        if (tasks.length > 0) return { tasks, tasksVersion: latest };
        const remaining = deadline - Date.now();
        if (remaining <= 0 || request.signal?.aborted) return { tasks: [], tasksVersion: latest };
        const next = await this.watch.waitForChange(scope, latest, remaining, request.signal);
        if (next === null) return { tasks: [], tasksVersion: latest };
        latest = next;
      }
    } finally {
      if (key !== null) this.keysInFlight.delete(key);
    }
  }

  /** Ends every waiting FetchTask now (the server is closing). */
  interruptWaits(): void {
    this.watch.interruptAll();
  }

  private async claimTasks(runner: Runner, capacity: number, request: FetchTasksRequest, key: string | null): Promise<TaskPayload[]> {
    // A runner that already gave up (its fetch timed out while the server was
    // busy) must not be handed work: let pending socket events land first.
    if (await this.clientGone(request, key)) return [];
    const claims: Claim[] = [];
    while (claims.length < capacity) {
      const claim = await this.claimOne(runner, request.handle);
      if (claim === null) break;
      claims.push(claim);
    }
    if (claims.length === 0) return [];
    if (key !== null) this.remember(key, claims.map((c) => c.claimed.taskId));
    let tasks: TaskPayload[];
    try {
      tasks = [];
      for (const claim of claims) tasks.push(await this.payloads.build(claim.claimed.taskId, claim.token, claim.claimed.job));
    } catch (error) {
      await this.release(claims);
      throw error;
    }
    // The runner hung up while we claimed: without a request key it will
    // never ask for these again, so the jobs go back to the queue (Forgejo
    // main does the same).
    if (await this.clientGone(request, key)) {
      await this.release(claims);
      return [];
    }
    return tasks;
  }

  /**
   * True when the runner hung up and, having no request key, will never ask
   * for what we claim. Yields to the event loop first: on a busy server the
   * close of the connection may still be waiting behind our own work.
   */
  private async clientGone(request: FetchTasksRequest, key: string | null): Promise<boolean> {
    if (key !== null || request.signal === undefined) return false;
    await new Promise<void>((resolve) => setImmediate(resolve));
    return request.signal.aborted;
  }

  /** One claim in its own transaction; null when nothing in scope matches the runner's labels. */
  private async claimOne(runner: Runner, handle: string | undefined): Promise<Claim | null> {
    const labels = new Set(runner.labels ?? []);
    const scope = scopeOf(runner);
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.db.transaction().execute(async (tx) => {
          if (!(await lockRunnerForClaim(tx, runner.id))) return null;
          if (runner.ephemeral && (await runnerHasAnyTask(tx, runner.id))) return null;
          const now = this.clock.nowSec();
          let afterId = 0;
          for (;;) {
            const page = await waitingJobsPage(tx, scope, afterId, CANDIDATE_PAGE, handle);
            const last = page[page.length - 1];
            if (last === undefined) return null;
            afterId = last.id;
            let ids = page.filter((candidate) => canRun(candidate.runsOn, labels)).map((candidate) => candidate.id);
            while (ids.length > 0) {
              const job = await lockFirstClaimable(tx, ids);
              if (job === null) break;
              // Lower ids were taken or are being taken by someone else.
              ids = ids.filter((id) => id > job.id);
              const token = generateTokenString();
              const claimed = await claimJob(tx, job, runner.id, { hash: hashToken(token), lastEight: token.slice(-8) }, now);
              if (claimed === null) continue;
              await insertTaskSteps(tx, claimed.taskId, job.repoId, stepNamesOf(job.workflowPayload), now);
              await lockRun(tx, job.runId);
              await this.runProgress.settle(tx, job.runId, [job.id]);
              return { claimed, token };
            }
            if (page.length < CANDIDATE_PAGE) return null;
          }
        });
      } catch (error) {
        if (attempt < MAX_CLAIM_ATTEMPTS && isRetryableClaimError(error)) continue;
        throw error;
      }
    }
  }

  /** Puts claimed jobs back in the queue and wakes the runners of their scopes. */
  private async release(claims: readonly Claim[]): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      const now = this.clock.nowSec();
      for (const { claimed } of claims) {
        if (!(await releaseClaim(tx, claimed.taskId, claimed.job.id, now))) continue;
        await lockRun(tx, claimed.job.runId);
        await this.runProgress.settle(tx, claimed.job.runId, [claimed.job.id]);
        await bumpTasksVersionsForRepo(tx, claimed.job.ownerId, claimed.job.repoId, now);
      }
    });
    this.watch.poke();
  }

  private remember(key: string, taskIds: number[]): void {
    const now = Date.now();
    for (const [k, entry] of this.byRequestKey) if (entry.expiresAt < now) this.byRequestKey.delete(k);
    const entry = this.byRequestKey.get(key);
    this.byRequestKey.set(key, { taskIds: [...(entry?.taskIds ?? []), ...taskIds], expiresAt: now + REQUEST_KEY_TTL_MS });
  }

  /**
   * The still-running tasks handed out earlier under this request key, with
   * new tokens (only digests of the old ones were kept). Kept in this
   * process's memory: a retry that reaches another Gantry process claims anew,
   * and the earlier task is left to the zombie-task cleanup.
   */
  private async recover(runner: Runner, key: string): Promise<TaskPayload[]> {
    const entry = this.byRequestKey.get(key);
    if (entry === undefined || entry.expiresAt < Date.now()) return [];
    const tasks: TaskPayload[] = [];
    for (const taskId of entry.taskIds) {
      const task = await findTaskForRunner(this.db, taskId, runner.id);
      if (task === null || task.status !== ActionStatus.running) continue;
      const job = await findJobById(this.db, task.jobId);
      if (job === null) continue;
      const token = generateTokenString();
      if (!(await replaceTaskToken(this.db, taskId, { hash: hashToken(token), lastEight: token.slice(-8) }, this.clock.nowSec()))) continue;
      tasks.push(await this.payloads.build(taskId, token, job));
    }
    return tasks;
  }
}
