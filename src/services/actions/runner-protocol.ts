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
import type { Clock } from '../../modules/clock.ts';
import { digestsEqual, generateTokenString, hashToken } from '../../modules/crypto/tokens.ts';
import { lockRun } from '../../models/action-runs.ts';
import { isRetryableError } from '../../models/database.ts';
import type { Db, Tx } from '../../models/database.ts';
import {
  bumpTasksVersionsForRepo,
  findRunnerByUuid,
  tasksVersion,
  touchRunner,
  updateRunnerDeclaration,
} from '../../models/runners.ts';
import type { Runner } from '../../models/runners.ts';
import type { ScopeColumns } from '../../modules/scope.ts';
import {
  claimJob,
  findJobById,
  findTasksByRequestKey,
  insertTaskSteps,
  lockFirstClaimable,
  lockRunnerForClaim,
  releaseClaim,
  replaceTaskToken,
  runnerHasAnyTask,
  waitingJobsPage,
} from '../../models/task-claims.ts';
import type { ClaimedJob, ClaimRequestKey } from '../../models/task-claims.ts';
import type { DomainEvents } from '../events.ts';
import type { RunProgress } from './run-progress.ts';
import type { SecretService } from './secrets.ts';
import { TaskPayloadBuilder } from './task-payload.ts';
import type { RuntimeTokens } from './runtime-tokens.ts';
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
/**
 * How long the tasks claimed under a request key can be fetched again. Forgejo
 * keeps the key forever, but only a task still running can be recovered, and
 * a task whose answer never reached its runner gets no report, so the zombie
 * sweep (housekeeping.ts, Forgejo's ZOMBIE_TASK_TIMEOUT of 10 minutes) fails it
 * 10 minutes after the claim: past that a retry has nothing left to find.
 * forgejo-runner retries every fetch interval (2 s), so even a retry held up
 * by a restart of Gantry or of a proxy arrives well within it.
 */
export const REQUEST_KEY_TTL_SEC = 10 * 60;
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
  /** Signs the runtime token put in each task's context (artifacts). */
  runtimeTokens?: RuntimeTokens;
}

function scopeOf(runner: Runner): ScopeColumns {
  return { ownerId: runner.ownerId, repoId: runner.repoId };
}

/** runs-on ⊆ the runner's labels, exact strings (Forgejo's CanMatchLabels). */
function canRun(runsOn: readonly string[], labels: ReadonlySet<string>): boolean {
  return runsOn.every((label) => labels.has(label));
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
  /**
   * (runner, request key) pairs a call of this process is serving: a second
   * call with the same key is refused while the first runs, as Forgejo's
   * MutexMap does. Across processes the claim itself is serialised by the
   * runner's row lock, under which the key is looked up (claimBatch).
   */
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
    this.payloads = new TaskPayloadBuilder(db, secrets, variables, rootUrl, options.runtimeTokens ?? null);
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
      if (this.touched.size > 10_000)
        for (const [id, seen] of this.touched) if (seen.online < now - 120) this.touched.delete(id);
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
    const key = request.requestKey ? request.requestKey : null;
    const inFlight = key === null ? null : `${runner.id}:${key}`;
    if (inFlight !== null) {
      if (this.keysInFlight.has(inFlight)) throw new RequestKeyBusyError();
      this.keysInFlight.add(inFlight);
    }
    try {
      if (key !== null) {
        // A retry of a call whose answer got lost, in this process or another:
        // the same tasks again (Forgejo answers them with tasks_version 0).
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
      if (inFlight !== null) this.keysInFlight.delete(inFlight);
    }
  }

  /** Ends every waiting FetchTask now (the server is closing). */
  interruptWaits(): void {
    this.watch.interruptAll();
  }

  private async claimTasks(
    runner: Runner,
    capacity: number,
    request: FetchTasksRequest,
    key: string | null,
  ): Promise<TaskPayload[]> {
    // A runner that already gave up (its fetch timed out while the server was
    // busy) must not be handed work: let pending socket events land first.
    if (await this.clientGone(request, key)) return [];
    const claims = await this.claimBatch(runner, capacity, request.handle, key);
    // Another process served this key meanwhile (the runner retried there while we waited for its lock).
    if (claims === 'claimed under the key' && key !== null) return this.recover(runner, key);
    if (claims === 'claimed under the key' || claims.length === 0) return [];
    let tasks: TaskPayload[];
    try {
      tasks = [];
      for (const claim of claims)
        tasks.push(await this.payloads.build(claim.claimed.taskId, claim.token, claim.claimed.job));
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

  /**
   * Up to `capacity` claims in one transaction under the runner's row lock,
   * so a retry of the same FetchTask served by another process (which waits
   * for that lock) sees all of them or none; 'claimed under the key' when
   * tasks claimed under `key` are there already. Empty when nothing in scope
   * matches the runner's labels.
   */
  private async claimBatch(
    runner: Runner,
    capacity: number,
    handle: string | undefined,
    key: string | null,
  ): Promise<Claim[] | 'claimed under the key'> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.db.transaction().execute(async (tx) => {
          if (!(await lockRunnerForClaim(tx, runner.id))) return [];
          const now = this.clock.nowSec();
          if (key !== null && (await findTasksByRequestKey(tx, runner.id, key, now)).length > 0)
            return 'claimed under the key' as const;
          if (runner.ephemeral && (await runnerHasAnyTask(tx, runner.id))) return [];
          const requestKey = key === null ? null : { key, expires: now + REQUEST_KEY_TTL_SEC };
          const claims: Claim[] = [];
          // An ephemeral runner gets one task, ever.
          const wanted = runner.ephemeral ? 1 : capacity;
          while (claims.length < wanted) {
            const claim = await this.claimOne(tx, runner, handle, requestKey, now);
            if (claim === null) break;
            claims.push(claim);
          }
          return claims;
        });
      } catch (error) {
        if (attempt < MAX_CLAIM_ATTEMPTS && isRetryableError(error)) continue;
        throw error;
      }
    }
  }

  /** One claim inside claimBatch's transaction; null when nothing in scope matches the runner's labels. */
  private async claimOne(
    tx: Tx,
    runner: Runner,
    handle: string | undefined,
    requestKey: ClaimRequestKey | null,
    now: number,
  ): Promise<Claim | null> {
    const labels = new Set(runner.labels ?? []);
    const scope = scopeOf(runner);
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
        const claimed = await claimJob(
          tx,
          job,
          runner.id,
          { hash: hashToken(token), lastEight: token.slice(-8) },
          now,
          requestKey,
        );
        if (claimed === null) continue;
        await insertTaskSteps(tx, claimed.taskId, job.repoId, stepNamesOf(job.workflowPayload), now);
        await lockRun(tx, job.runId);
        await this.runProgress.settle(tx, job.runId, [job.id]);
        return { claimed, token };
      }
      if (page.length < CANDIDATE_PAGE) return null;
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

  /**
   * The still-running tasks claimed earlier under this request key, by any
   * process, with new tokens (only digests of the old ones were kept, and
   * the old ones never reached the runner). Forgejo: RecoverTasks.
   */
  private async recover(runner: Runner, key: string): Promise<TaskPayload[]> {
    const tasks: TaskPayload[] = [];
    for (const row of await findTasksByRequestKey(this.db, runner.id, key, this.clock.nowSec())) {
      const job = await findJobById(this.db, row.jobId);
      if (job === null) continue;
      const token = generateTokenString();
      if (
        !(await replaceTaskToken(
          this.db,
          row.id,
          { hash: hashToken(token), lastEight: token.slice(-8) },
          this.clock.nowSec(),
        ))
      )
        continue;
      tasks.push(await this.payloads.build(row.id, token, job));
    }
    return tasks;
  }
}
