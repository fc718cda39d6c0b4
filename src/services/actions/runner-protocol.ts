// The runner protocol's domain side: authenticating runners, Declare, and
// FetchTask — claiming a waiting job atomically and building the task a runner
// executes (Forgejo: routers/api/actions/runner/runner.go, services/actions/
// task.go, services/actions/context.go, models/actions/task.go). Register is
// RunnerService's; UpdateTask and UpdateLog are TaskReportService's.
//
// FetchTask is a bounded long poll: when nothing can be claimed it waits for
// the scope's tasks version to move (polled every VERSION_POLL_MS, so a job
// created by another Gantry process wakes it too) and then answers with the
// version it saw. It waits until shortly before the runner's own deadline
// (Connect-Timeout-Ms; forgejo-runner's fetch_timeout is 5 s), or
// FETCH_LONG_POLL_MS when the runner sent none.
//
// An idle FetchTask touches the database as little as possible: the runner
// comes from RunnerIdentityCache, its liveness refresh is batched
// (RunnerLiveness), the tasks version comes from the watch's last read (at
// most VERSION_POLL_MS old), and a runner whose last claim at this version
// found nothing does not claim again (nothingFor).
import type { Clock } from '../../modules/clock.ts';
import { AppError } from '../../modules/errors.ts';
import { digestsEqual, generateTokenString, hashToken } from '../../modules/crypto/tokens.ts';
import { isPostgres, isRetryableError } from '../../models/database.ts';
import { GroupedWrites } from '../../models/grouped-writes.ts';
import type { Db, Tx } from '../../models/database.ts';
import { bumpTasksVersionsForRepo, updateRunnerDeclaration } from '../../models/runners.ts';
import type { Runner } from '../../models/runners.ts';
import type { ScopeColumns } from '../../modules/scope.ts';
import { payloadFacts } from '../../modules/workflows/payload-facts.ts';
import {
  anyClaimable,
  claimNextJob,
  findJobById,
  findTasksByRequestKey,
  insertTaskSteps,
  lockRunnerForClaim,
  releaseClaim,
  replaceTaskToken,
  runnerHasAnyTask,
} from '../../models/task-claims.ts';
import type { ClaimRequestKey } from '../../models/task-claims.ts';
import type { ActionRunJob } from '../../models/action-runs.ts';
import { ClaimGroups } from './claim-groups.ts';
import type { Claim } from './claim-groups.ts';
import type { DomainEvents } from '../events.ts';
import type { RunProgress } from './run-progress.ts';
import type { SecretService } from './secrets.ts';
import { TaskPayloadBuilder } from './task-payload.ts';
import type { RuntimeTokens } from './runtime-tokens.ts';
import type { TaskPayload } from './task-payload.ts';
import { RunnerIdentityCache } from './runner-identity-cache.ts';
import { RunnerLiveness } from './runner-liveness.ts';
import { TasksVersionWatch } from './tasks-version-watch.ts';
import type { EndSignal } from './tasks-version-watch.ts';
import type { VariableService } from './variables.ts';

export type { TaskNeedPayload, TaskPayload } from './task-payload.ts';

/** How long FetchTask waits for a claimable job before answering "nothing". */
export const FETCH_LONG_POLL_MS = 3000;
/** How often a waiting FetchTask re-reads the tasks version (wake-ups across processes). */
export const VERSION_POLL_MS = 250;
/**
 * The longest a FetchTask is held when the runner's deadline allows it.
 * forgejo-runner and act_runner send their fetch_timeout (5 s by default),
 * so a stock runner is held 4.5 s; a longer hold saves little more and ties
 * up a connection of every idle runner (and of any client that sends a huge
 * Connect-Timeout-Ms) for as long.
 */
export const MAX_LONG_POLL_MS = 5_000;
/** A held FetchTask woken with less than this left before the runner's deadline answers instead of claiming. */
const LATE_CLAIM_MS = 1000;
/** A runner's "nothing to claim at this version" is trusted this long at most (a safety net, see nothingFor). */
const NOTHING_MEMO_MS = 60_000;
/**
 * The runners of a scope with the same labels share the read that re-checks
 * their memo for this long: a fleet registered together re-checks together,
 * and 5,000 runners would otherwise read 5,000 times within seconds for one
 * answer. The check is a safety net (every job that becomes waiting moves the
 * version, which drops the memo at once), so a read a second old serves it.
 */
const SHARED_CLAIMABLE_READ_MS = 1000;
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
/** How many jobs' step names a process keeps (stepNames): a few hundred matrix jobs being claimed at once. */
const STEP_NAMES_CACHED = 1000;
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
  signal?: EndSignal;
  /** The caller's own deadline, if shorter than the long poll (Connect-Timeout-Ms less a margin). */
  maxWaitMs?: number;
}

export interface FetchTasksResult {
  tasks: TaskPayload[];
  tasksVersion: number;
}

/** Where holdIdle sends a held call's answer (or its error), once. */
export interface HeldFetch {
  answer(result: FetchTasksResult): void;
  fail(error: unknown): void;
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
  /** The process's runner cache, shared with the runners API (which drops what it deletes); one of its own otherwise. */
  identities?: RunnerIdentityCache;
  /** The process's grouped write transactions, shared with task reports (one of its own otherwise). */
  writes?: GroupedWrites;
}

/** A read of whether anything is claimable, shared by the runners of a scope with the same labels (stillNothing). */
interface SharedClaimableRead {
  version: number;
  at: number;
  any: Promise<boolean>;
  /** The read's answer once it came (undefined before, and when it failed). */
  answer?: boolean;
}

/** A runner's "nothing to claim at this version" (nothingClaimable). */
interface NothingMemo {
  version: number;
  labels: string;
  /** The labels array the memo was taken with: the same array needs no comparison. */
  labelsOf: readonly string[] | null;
  at: number;
}

function labelsKey(runner: Runner): string {
  return JSON.stringify(runner.labels ?? []);
}

/**
 * Whether the memo was taken with the runner's labels. The same labels array
 * (a copy of the same identity cache entry) needs no comparison of its
 * contents; an equal one, from the entry that replaced it (its TTL passed),
 * becomes the memo's array, so that the runner's next polls compare arrays
 * again, not JSON.
 */
function sameLabels(memo: NothingMemo, runner: Runner): boolean {
  if (memo.labelsOf === runner.labels) return true;
  if (memo.labels !== labelsKey(runner)) return false;
  memo.labelsOf = runner.labels;
  return true;
}

/** The key of the claimable reads a runner's memo shares with the runners of its scope and labels. */
function claimableReadKey(runner: Runner, memo: NothingMemo): string {
  return `${runner.ownerId}:${runner.repoId}:${memo.labels}`;
}

function scopeOf(runner: Runner): ScopeColumns {
  return { ownerId: runner.ownerId, repoId: runner.repoId };
}

export class RunnerProtocolService {
  private readonly watch: TasksVersionWatch;
  private readonly payloads: TaskPayloadBuilder;
  private readonly longPollMs: number;
  private readonly liveness: RunnerLiveness;
  private readonly identities: RunnerIdentityCache;
  private readonly writes: GroupedWrites;
  /** PostgreSQL: the claims of runners with the same claim key that ask together (claim-groups.ts). */
  private readonly groups: ClaimGroups | null;
  /**
   * Runners whose last claim found nothing, with the scope's tasks version it
   * was made at and their labels then. A job only becomes claimable by a
   * bump of its scopes' versions (run-creator.ts, run-progress.ts,
   * run-control.ts, release below), so while the version is unchanged a
   * FetchTask of such a runner skips the claim transaction and just waits.
   * NOTHING_MEMO_MS bounds how long one is trusted anyway.
   */
  private readonly nothingFor = new Map<number, NothingMemo>();
  /** stillNothing's reads by scope and labels, shared for SHARED_CLAIMABLE_READ_MS. */
  private readonly claimableReads = new Map<string, SharedClaimableRead>();
  /**
   * (runner, request key) pairs a call of this process is serving: a second
   * call with the same key is refused while the first runs, as Forgejo's
   * MutexMap does. Across processes the claim itself is serialised by the
   * runner's row lock, under which the key is looked up (claimBatch, or a
   * claim group's statement, claim-groups.ts).
   */
  private readonly keysInFlight = new Set<string>();
  /** The runner (cache entry) and token a connection last authenticated with (tokenMatches). */
  private readonly tokensShown = new WeakMap<object, { runner: Runner; token: string }>();
  /** Step names by run and job key (stepNames), the oldest dropped first past STEP_NAMES_CACHED. */
  private readonly stepNamesByJob = new Map<string, readonly string[]>();

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
    this.identities = options.identities ?? new RunnerIdentityCache(db);
    this.writes = options.writes ?? new GroupedWrites(db);
    this.liveness = new RunnerLiveness(db, clock, this.writes);
    this.watch = new TasksVersionWatch(db, VERSION_POLL_MS);
    this.groups = isPostgres(db)
      ? new ClaimGroups(
          db,
          this.writes,
          runProgress,
          () => this.clock.nowSec(),
          (job) => this.stepNames(job),
          REQUEST_KEY_TTL_SEC,
        )
      : null;
    // The run is recorded inside its (not yet committed) transaction: look as
    // soon as this tick is over (on SQLite the read queues behind the commit
    // on the one connection), and again a little later for PostgreSQL, whose
    // commit may land after that first look; the periodic tick catches a
    // slower commit.
    events.subscribe(async (_tx, event) => {
      if (event.type !== 'actions.run.created') return;
      setImmediate(() => this.watch.poke());
      setTimeout(() => this.watch.poke(), 25).unref();
    });
  }

  /**
   * The runner named by the x-runner-uuid/x-runner-token headers, or null.
   * Records that it is online (and active, for task reports) through
   * RunnerLiveness, which writes a refresh of an online runner with the
   * others in one statement a second: a write per poll is what kept Gitea's
   * database busy (go-gitea/gitea PR 38150). The runner comes from the identity cache
   * (runner-identity-cache.ts states how stale it may be).
   */
  async authenticate(uuid: string, token: string, active: boolean, connection?: object): Promise<Runner | null> {
    if (uuid === '' || token === '') return null;
    // The cache's answer without a read when it has one (an idle poll's path: no promise on the way).
    const cached = this.identities.peek(uuid) ?? (await this.identities.find(uuid));
    if (cached === null || !this.tokenMatches(cached, token, connection)) return null;
    // A copy: the cached object is shared by concurrent calls.
    const runner = { ...cached };
    const stored = { online: runner.lastOnline, active: runner.lastActive };
    const last =
      this.liveness.touchUnlessWrite(runner.id, stored, active) ??
      (await this.liveness.touch(runner.id, stored, active));
    runner.lastOnline = last.online;
    runner.lastActive = last.active;
    return runner;
  }

  /**
   * Whether `token` is the runner's, hashing it only when this connection
   * has not shown it already for this very cache entry: a kept-alive
   * connection polling every few seconds sends the same token each time.
   * The memo holds the entry object, which the identity cache replaces
   * whenever the runner may have changed (its version row moved, its TTL
   * passed, this process changed it), so it never outlives what the cache
   * itself would answer; it compares the token with the one this same
   * connection sent, nothing another client could time.
   */
  private tokenMatches(cached: Runner, token: string, connection: object | undefined): boolean {
    const shown = connection === undefined ? undefined : this.tokensShown.get(connection);
    if (shown !== undefined && shown.runner === cached && shown.token === token) return true;
    if (!digestsEqual(cached.tokenHash, hashToken(token))) return false;
    if (connection !== undefined) this.tokensShown.set(connection, { runner: cached, token });
    return true;
  }

  /** Declare: the runner's labels and version as it starts polling. */
  async declare(runner: Runner, version: string, labels: readonly string[]): Promise<Runner> {
    const declared = await updateRunnerDeclaration(this.db, runner.id, version, labels, this.clock.nowSec());
    // Its next call must see the new labels here at once (other processes: within the cache's check interval).
    this.identities.forget(runner.uuid);
    // Deleted by another process since this one cached it: the answer it will give within the check interval anyway.
    if (declared === null) throw AppError.unauthorized('unregistered runner');
    return declared;
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
      const scope = scopeOf(runner);
      // A retry of a call whose answer got lost, in this process or another,
      // gets the same tasks again (Forgejo answers them with tasks_version 0).
      // A claim looks the key up under the runner's row lock (claimBatch, or
      // its group's statement): only a call that waits without claiming reads
      // it first, unless nothing can have been claimed for the runner since its
      // last search (nothingSinceAtMost). forgejo-runner sends a new key with
      // every FetchTask, so a read of its own per call was a statement per job.
      const keyChecked = key === null || this.nothingSinceAtMost(runner, this.watch.recent(scope));
      const latest = this.watch.recent(scope) ?? (await this.watch.current(scope, this.clock.nowSec()));
      // Real time, not the injectable clock: this bounds how long a request is held.
      const deadline = Date.now() + this.holdMs(request);
      if (request.tasksVersion === latest && key === null) {
        // Nothing changed since the runner last looked, so there is nothing to
        // search for yet: hold the request until a job appears or the bound
        // passes (Forgejo answers at once and the runner polls again later).
        const next = await this.watch.waitForChange(scope, latest, deadline - Date.now(), request.signal);
        if (next === null) return { tasks: [], tasksVersion: latest };
        return await this.searchFrom(runner, request, key, deadline, next, request.tasksVersion, true, keyChecked);
      }
      return await this.searchFrom(runner, request, key, deadline, latest, request.tasksVersion, false, keyChecked);
    } finally {
      if (inFlight !== null) this.keysInFlight.delete(inFlight);
    }
  }

  /**
   * fetchTasks for a call it would only hold, without a promise or a
   * suspended async call while it waits: the runner's tasks version is the
   * scope's newest this process read (and no request key), or the runner's
   * last claim at that version found nothing and may not yet be checked again
   * (and its request key, if any, is not in use and cannot be a retry). Then
   * `held` hears the answer, or the error, once: what fetchTasks would answer
   * the same call. An idle fleet's calls are nearly all such calls, held
   * seconds each. False, with nothing done, for any other call: the caller
   * then calls fetchTasks.
   */
  holdIdle(runner: Runner, request: FetchTasksRequest, held: HeldFetch): boolean {
    const scope = scopeOf(runner);
    const latest = this.watch.recent(scope);
    if (latest === undefined || request.signal?.aborted) return false;
    const key = request.requestKey ? request.requestKey : null;
    const inFlight = key === null ? null : `${runner.id}:${key}`;
    if (inFlight !== null && (this.keysInFlight.has(inFlight) || !this.nothingSinceAtMost(runner, latest)))
      return false;
    // fetchTasks's first wait (the runner has seen this version), or its first search finding nothing without a read.
    const unchanged = request.tasksVersion === latest && key === null;
    if (!unchanged && this.nothingClaimable(runner, latest) !== true) return false;
    const remaining = this.holdMs(request);
    if (!unchanged && remaining <= 0) return false;
    const deadline = Date.now() + remaining;
    if (inFlight !== null) this.keysInFlight.add(inFlight);
    const searched = unchanged ? request.tasksVersion : latest;
    this.watch.hold(scope, latest, remaining, request.signal, (next) => {
      if (next === null) {
        if (inFlight !== null) this.keysInFlight.delete(inFlight);
        held.answer({ tasks: [], tasksVersion: latest });
        return;
      }
      // On after the watch has settled every waiter of this tick, as an awaited wait goes on.
      queueMicrotask(() => {
        this.searchFrom(runner, request, key, deadline, next, searched, true, true)
          .finally(() => {
            if (inFlight !== null) this.keysInFlight.delete(inFlight);
          })
          .then(
            (result) => held.answer(result),
            (error: unknown) => held.fail(error),
          );
      });
    });
    return true;
  }

  /**
   * fetchTasks from the scope's version `latest` on: claims what is
   * claimable, and while nothing is, waits for the next version until the
   * deadline. `searched`: the newest version already searched (at first the
   * runner's own); `woken`: the call waited already.
   */
  private async searchFrom(
    runner: Runner,
    request: FetchTasksRequest,
    key: string | null,
    deadline: number,
    latest: number,
    searched: number,
    woken: boolean,
    /** The request key was looked up already, or nothing can have been claimed under it (fetchTasks). */
    keyChecked: boolean,
  ): Promise<FetchTasksResult> {
    const scope = scopeOf(runner);
    const capacity = Math.min(Math.max(Math.trunc(request.capacity ?? 1), 1), MAX_TASKS_PER_FETCH);
    for (;;) {
      // Woken too close to the runner's deadline for a claim to be sure to
      // reach it: answer at once with the version searched last, so the
      // runner's next call (with a whole deadline) searches the new one.
      if (woken && request.maxWaitMs !== undefined && deadline - Date.now() < LATE_CLAIM_MS)
        return { tasks: [], tasksVersion: searched };
      const nothing = this.nothingClaimable(runner, latest);
      if (nothing === true || (nothing !== false && (await nothing))) {
        if (!keyChecked && key !== null) {
          keyChecked = true;
          const recovered = await this.recover(runner, key);
          if (recovered.length > 0) return { tasks: recovered, tasksVersion: 0 };
        }
      } else {
        keyChecked = true;
        const claimed = await this.claimTasks(runner, capacity, request, key, latest);
        if (claimed.tasks.length > 0) return { tasks: claimed.tasks, tasksVersion: claimed.recovered ? 0 : latest };
      }
      searched = latest;
      woken = true;
      const remaining = deadline - Date.now();
      if (remaining <= 0 || request.signal?.aborted) return { tasks: [], tasksVersion: latest };
      const next = await this.watch.waitForChange(scope, latest, remaining, request.signal);
      if (next === null) return { tasks: [], tasksVersion: latest };
      latest = next;
    }
  }

  /**
   * How long a FetchTask may be held: close to the runner's own deadline
   * when it sent one (forgejo-runner and act_runner send their fetch_timeout,
   * 5 s by default, as Connect-Timeout-Ms), so an idle fleet asks as seldom
   * as its runners allow; the fixed long poll otherwise.
   */
  private holdMs(request: FetchTasksRequest): number {
    return request.maxWaitMs === undefined ? this.longPollMs : Math.min(request.maxWaitMs, MAX_LONG_POLL_MS);
  }

  /**
   * True when the runner's last claim, at this tasks version and with these
   * labels, found nothing. Past NOTHING_MEMO_MS the memo is checked again
   * with a read (no transaction, no lock): an idle fleet re-checks each
   * runner once a minute, and a write transaction per runner and minute is
   * 80 a second for 5,000 runners.
   */
  private nothingClaimable(runner: Runner, version: number): boolean | Promise<boolean> {
    const memo = this.nothingFor.get(runner.id);
    if (memo === undefined) return false;
    if (memo.version === version && sameLabels(memo, runner)) {
      const now = Date.now();
      if (now - memo.at < NOTHING_MEMO_MS) return true;
      // The minute's re-check already answered by a fresh shared read: no
      // promise, so an idle poll stays on holdIdle's path (a fleet registered
      // together re-checks together, each runner once a minute).
      const shared = this.claimableReads.get(claimableReadKey(runner, memo));
      if (shared?.answer === false && shared.version === memo.version && now - shared.at < SHARED_CLAIMABLE_READ_MS) {
        memo.at = now;
        return true;
      }
      return this.stillNothing(runner, memo);
    }
    this.nothingFor.delete(runner.id);
    return false;
  }

  /**
   * Whether the runner's last search here, at the scope's newest version this
   * process knows, found nothing and is still fresh: then no task can have
   * been claimed for it under any request key since, because a claim needs a
   * job that was claimable at that version, and every change that makes a
   * job claimable moves the version. forgejo-runner sends a new request key
   * with every FetchTask, so without this each idle poll would read the
   * tasks table for a retry that cannot be one. A retry that does arrive
   * before this process has read the moved version is still answered: once
   * the version moves, the claim looks the key up under the runner's lock
   * (claimBatch, or its claim group) and recovers the tasks claimed under it.
   */
  private nothingSinceAtMost(runner: Runner, version: number | undefined): boolean {
    const memo = this.nothingFor.get(runner.id);
    return (
      memo !== undefined &&
      memo.version === version &&
      Date.now() - memo.at < NOTHING_MEMO_MS &&
      sameLabels(memo, runner)
    );
  }

  /** nothingClaimable past NOTHING_MEMO_MS: one read, shared by the runners of a scope with the same labels. */
  private async stillNothing(runner: Runner, memo: NothingMemo): Promise<boolean> {
    const key = claimableReadKey(runner, memo);
    let read = this.claimableReads.get(key);
    if (read === undefined || Date.now() - read.at >= SHARED_CLAIMABLE_READ_MS || read.version !== memo.version) {
      const fresh: SharedClaimableRead = {
        version: memo.version,
        at: Date.now(),
        any: anyClaimable(this.db, scopeOf(runner), runner.labels ?? []),
      };
      read = fresh;
      this.claimableReads.set(key, fresh);
      if (this.claimableReads.size > 10_000) this.claimableReads.clear();
      fresh.any.then(
        (any) => {
          fresh.answer = any;
        },
        // A failed read is not shared: the next runner reads again.
        () => {
          if (this.claimableReads.get(key) === fresh) this.claimableReads.delete(key);
        },
      );
    }
    if (!(await read.any)) {
      memo.at = Date.now();
      return true;
    }
    this.nothingFor.delete(runner.id);
    return false;
  }

  /** Ends every waiting FetchTask now and writes the queued liveness refreshes (the server is closing). */
  interruptWaits(): void {
    this.watch.interruptAll();
    void this.liveness.flush();
  }

  private async claimTasks(
    runner: Runner,
    capacity: number,
    request: FetchTasksRequest,
    key: string | null,
    /** The scope's tasks version read before this claim. */
    version: number,
  ): Promise<{ tasks: TaskPayload[]; recovered: boolean }> {
    const claims = await this.claim(runner, capacity, request, key);
    // Claimed under this key already: a retry of a call whose answer got lost (or another
    // process served this key meanwhile, the runner having retried there while we waited for its lock).
    if (claims === 'claimed under the key' && key !== null)
      return { tasks: await this.recover(runner, key), recovered: true };
    // Rows in reach are held by other claims: not a "nothing" to remember.
    if (claims === 'claimed under the key' || claims === 'busy' || claims === 'gone')
      return { tasks: [], recovered: false };
    if (claims.length === 0) {
      // Nothing in scope fits at `version` (read before the claim, so any job
      // that became waiting since has moved the version on). A handle
      // narrowed the search, so its "nothing" says nothing about the rest.
      if (request.handle === undefined) {
        this.nothingFor.set(runner.id, { version, labels: labelsKey(runner), labelsOf: runner.labels, at: Date.now() });
        if (this.nothingFor.size > 50_000) this.nothingFor.clear();
      }
      return { tasks: [], recovered: false };
    }
    let tasks: TaskPayload[];
    try {
      tasks = [];
      for (const claim of claims)
        tasks.push(
          await this.payloads.build(claim.claimed.taskId, claim.token, claim.claimed.job, {
            run: claim.run,
            refs: claim.claimed.refs,
            needs: claim.needs ?? null,
          }),
        );
    } catch (error) {
      await this.release(claims);
      throw error;
    }
    // The runner hung up while we claimed: without a request key it will
    // never ask for these again, so the jobs go back to the queue (Forgejo
    // main does the same). The claim looked once already, when its group
    // started; a hang-up that came while the group ran (milliseconds, more
    // on a busy server, which is when runners' fetches time out) is heard
    // only once the event loop reads sockets again, so such a runner's
    // answer waits that one turn (clientGone). A runner with a request key
    // asks again with it and gets the same tasks: its answer goes out at
    // once.
    if (await this.clientGone(request, key)) {
      await this.release(claims);
      return { tasks: [], recovered: false };
    }
    return { tasks, recovered: false };
  }

  /**
   * The claims of one FetchTask. A runner that already gave up (its fetch
   * timed out while the server was busy) must not be handed work: let
   * pending socket events land first. Grouped writes (SQLite) and claim
   * groups (PostgreSQL) start the claim after them anyway, so they look
   * then, without a turn of the event loop of its own (every answer waited
   * for one more turn of a busy loop).
   */
  private async claim(
    runner: Runner,
    capacity: number,
    request: FetchTasksRequest,
    key: string | null,
  ): Promise<Claim[] | 'claimed under the key' | 'busy' | 'gone'> {
    // Only a runner that is not ephemeral (one task, ever: looked up under its
    // lock, alone), wants one task and names no job claims in a group; one
    // with a request key too (the group looks the key up, claim-groups.ts).
    const grouped =
      this.groups !== null && !runner.ephemeral && request.handle === undefined && capacity === 1
        ? this.groups.claim(runner, `${runner.ownerId}:${runner.repoId}:${labelsKey(runner)}`, key, () =>
            this.hungUp(request, key),
          )
        : null;
    if (grouped !== null) {
      const outcome = await grouped;
      return outcome === 'none' ? [] : typeof outcome === 'string' ? outcome : [outcome];
    }
    const gone = this.writes.deferred ? () => this.hungUp(request, key) : undefined;
    if (gone === undefined && (await this.clientGone(request, key))) return 'gone';
    return this.claimBatch(runner, capacity, request.handle, key, gone);
  }

  /**
   * True when the runner hung up and, having no request key, will never ask
   * for what we claim. Yields to the event loop first: on a busy server the
   * close of the connection may still be waiting behind our own work.
   */
  private async clientGone(request: FetchTasksRequest, key: string | null): Promise<boolean> {
    if (key !== null || request.signal === undefined) return false;
    await new Promise<void>((resolve) => setImmediate(resolve));
    return this.hungUp(request, key);
  }

  /** clientGone without the wait, for a caller that runs after pending socket events already. */
  private hungUp(request: FetchTasksRequest, key: string | null): boolean {
    return key === null && request.signal?.aborted === true;
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
    /** Whether the runner hung up: asked first thing in the transaction ('gone' then, nothing claimed). */
    gone?: () => boolean,
  ): Promise<Claim[] | 'claimed under the key' | 'busy' | 'gone'> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        // Committed together with the claims and reports that arrive meanwhile (grouped-writes.ts).
        return await this.writes.run(async (tx) => {
          if (gone?.() === true) return 'gone' as const;
          // The runner's row lock serialises its claims. Only a request key
          // (looked up under it) and an ephemeral runner (one task, ever) need it
          // before the claim; otherwise the first claim takes it (on PostgreSQL
          // inside its own statement, a round trip less).
          const lockFirst = key !== null || runner.ephemeral;
          if (lockFirst && !(await lockRunnerForClaim(tx, runner.id))) return [];
          const now = this.clock.nowSec();
          if (key !== null && (await findTasksByRequestKey(tx, runner.id, key, now)).length > 0)
            return 'claimed under the key' as const;
          if (runner.ephemeral && (await runnerHasAnyTask(tx, runner.id))) return [];
          const requestKey = key === null ? null : { key, expires: now + REQUEST_KEY_TTL_SEC };
          const claims: Claim[] = [];
          // An ephemeral runner gets one task, ever.
          const wanted = runner.ephemeral ? 1 : capacity;
          while (claims.length < wanted) {
            const claim = await this.claimOne(tx, runner, handle, requestKey, now, !lockFirst && claims.length === 0);
            if (claim === null) break;
            claims.push(claim);
          }
          // Nothing free, but rows other claims hold may still come back (a claim that rolls back).
          if (claims.length === 0 && (await anyClaimable(tx, scopeOf(runner), runner.labels ?? [], handle)))
            return 'busy' as const;
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
    /** Lock the runner's row with the claim (claimNextJob's lockRunner). */
    lockRunner: boolean,
  ): Promise<Claim | null> {
    const token = generateTokenString();
    const claimed = await claimNextJob(
      tx,
      scopeOf(runner),
      runner.labels ?? [],
      handle,
      runner.id,
      { hash: hashToken(token), lastEight: token.slice(-8) },
      now,
      requestKey,
      lockRunner,
    );
    if (claimed === null) return null;
    await insertTaskSteps(tx, claimed.taskId, claimed.job.repoId, this.stepNames(claimed.job), now);
    const run = await this.runProgress.settleClaimed(
      tx,
      claimed.run,
      claimed.job.runId,
      [claimed.job],
      !claimed.anyActiveHook,
      claimed.lockedRun,
    );
    return { claimed, token, run };
  }

  /**
   * The job's step names. Every matrix leg of a job carries the same steps
   * (expand-jobs.ts renders the job's body once for all its legs; only the
   * name, needs, runs-on and strategy differ), so they are parsed from the
   * first leg claimed and reused for the others: parsing each leg's payload
   * was a tenth of a claim's cost in a large matrix. The first leg's parse is
   * itself shared by the runs of one workflow (payload-facts.ts).
   */
  private stepNames(job: ActionRunJob): readonly string[] {
    const key = `${job.runId}:${job.jobId}`;
    let names = this.stepNamesByJob.get(key);
    if (names === undefined) {
      names = payloadFacts(job.workflowPayload).stepNames;
      this.stepNamesByJob.set(key, names);
      if (this.stepNamesByJob.size > STEP_NAMES_CACHED)
        this.stepNamesByJob.delete(this.stepNamesByJob.keys().next().value as string);
    }
    return names;
  }

  /** Puts claimed jobs back in the queue and wakes the runners of their scopes. */
  private async release(claims: readonly Claim[]): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      const now = this.clock.nowSec();
      for (const { claimed } of claims) {
        if (!(await releaseClaim(tx, claimed.taskId, claimed.job.id, now))) continue;
        await this.runProgress.lockRun(tx, claimed.job.runId);
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
