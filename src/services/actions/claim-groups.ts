// FetchTasks that arrive together claim together (PostgreSQL). The claims of
// runners with the same claim key (one scope, one label set; not ephemeral,
// one task wanted, no handle) made in one turn of the event
// loop wait for the end of its current phase (setImmediate), or while a
// group of their key is claiming, until it is done (under load a
// group grows instead of queueing for a connection as claims of one; one
// that reaches MAX_GROUP runners waits its turn whole); then
// they run as one transaction: one statement claims a job for each runner
// (group-claims.ts), and a second one inserts every task's steps, takes the
// lock claims share on each run (in run id order) and reads the secrets and
// variables of the claimed jobs' repositories; each run is then settled once
// for all its claimed jobs (when a run must move, every run of the group
// takes its lock in a statement of its own instead, in run id order, the
// one that moves settle's). After the commit the needs of the jobs that have
// some are read once for the group (each run's jobs, then the outputs of
// every needed task in one statement). A group takes 4 round trips (begin,
// claim, steps with locks and values, commit) whatever its size, where a
// claim alone takes 6 (begin, claim, steps, run lock, commit, then the
// values); round trips, each a wake-up of a backend and of Gantry, are what
// a claim costs on PostgreSQL. Runners that send a request key
// (forgejo-runner sends a fresh one with every FetchTask) claim in groups
// too, in the same round trips: the claim statement leaves out each runner
// whose key it sees with a running task, and the second statement looks
// again once the runners' row locks are held (group-claims.ts): a key
// claimed meanwhile (a retry served by another process) sends the group
// back to run again with the keys looked up under the locks first, in a
// statement of its own. Such a runner is answered with its task, as a claim
// of one is (runner-protocol.ts), and every other claim records its key.
// Each such runner claiming alone took 9 round trips (its key read before
// the claim, then begin, its row lock, its key again under the lock, claim,
// steps, run lock, commit, values).
//
// Guarantees (the claims of one runner, as claimBatch gives them):
// - Each runner of a group gets one task or none, and a job goes to one
//   runner at most (the claim statement's conditional update).
// - A request key gets one task at most, across processes: the key is
//   looked up under its runner's row lock, which every claim for that runner
//   holds until its commit, in the transaction that records the claim (by
//   the second statement, or, after a key claimed meanwhile, first).
// - A runner whose request hung up before its group's transaction ran is
//   left out of it (nothing claimed for it); one that hangs up later gets its
//   claim released by FetchTask (runner-protocol.ts), as a claim of its own.
// - A group's transaction that fails with a retryable error (a deadlock, a
//   run moving under the claim: RunAgainError) runs again whole, with the
//   runners still waiting; any other error fails every runner of the group,
//   none of whose claims was committed. Its first run waits 100 ms at most
//   for its runs' locks (a report holding a run can be waiting for the jobs
//   the group holds: group-claims.ts's GROUP_LOCK_TIMEOUT), and runs again
//   at once without that limit if it gives up.
//
// Cost of a crash: that of the transaction: nothing claimed before its commit.
import { generateTokenString, hashToken } from '../../modules/crypto/tokens.ts';
import { isLockNotAvailable, isRetryableError, RunAgainError } from '../../models/database.ts';
import type { Tx } from '../../models/database.ts';
import {
  afterGroupClaim,
  boundGroupLockWaits,
  claimJobsForRunners,
  lockRunnersForClaim,
} from '../../models/group-claims.ts';
import type { GroupClaimed, RepositoryValues } from '../../models/group-claims.ts';
import type { GroupedWrites } from '../../models/grouped-writes.ts';
import type { Db } from '../../models/database.ts';
import { anyClaimable, outputsOfTasks } from '../../models/task-claims.ts';
import type { ClaimedJob } from '../../models/task-claims.ts';
import { listJobsOfRun } from '../../models/action-runs.ts';
import type { ActionRun, ActionRunJob } from '../../models/action-runs.ts';
import type { Runner } from '../../models/runners.ts';
import type { ScopeColumns } from '../../modules/scope.ts';
import type { RunProgress } from './run-progress.ts';
import { neededTaskIds, needsFrom } from './task-payload.ts';
import type { TaskNeedPayload } from './task-payload.ts';

/** A claim made for a runner: the job, the task's token, and the run as the claim's transaction left it. */
export interface Claim {
  claimed: ClaimedJob;
  token: string;
  /** The run as the claim's transaction left it (the payload's run), null if it is gone. */
  run: ActionRun | null;
  /** The job's needs, read for its group after the commit (absent: the payload reads them). */
  needs?: Record<string, TaskNeedPayload>;
}

/**
 * What a runner's claim in a group came to: its claim; 'none' when nothing
 * in scope fits its labels; 'busy' when what fits is held by other claims
 * (it may come back); 'gone' when it hung up before the group ran; 'claimed
 * under the key' when its request key has a running task already (the
 * caller answers with it).
 */
export type GroupOutcome = Claim | 'none' | 'busy' | 'gone' | 'claimed under the key';

/**
 * At most this many runners claim in one statement. A full group starts at
 * once when no group of its key is claiming, else it waits for its turn as
 * the next one gathering does (MAX_CLAIMING), ahead of it.
 */
export const MAX_GROUP = 64;
/**
 * While this many groups of one claim key are claiming, the next group
 * gathers until one is done: under load a group grows with the wait instead
 * of claiming alone, at no cost when a claim finds the key idle. One: a
 * second group in flight picks among the jobs the first has just locked
 * (skipping them, and keeping locks on those it found changed, which the
 * first's final reports then wait for) and shares the two cores with it. In
 * the throughput bench on PostgreSQL one gave a lower FetchTask p99 than two
 * in 7 of 9 alternating pairs, quiet and under load (median 105 against 125
 * ms quiet, 148 against 230 with a busy core), at the same jobs per second.
 */
const MAX_CLAIMING = 1;
/** Deadlocks and runs moving under a claim are retried this often (as claimBatch). */
const MAX_GROUP_ATTEMPTS = 5;

interface Member {
  runner: Runner;
  /** Its x-runner-request-key, null when it sent none. */
  requestKey: string | null;
  gone: () => boolean;
  resolve: (outcome: GroupOutcome) => void;
  reject: (error: unknown) => void;
}

interface Pending {
  /** Look request keys up under the runners' row locks before the claim (group-claims.ts says when). */
  lockFirst: boolean;
  /** Wait for the runs' locks without a limit: a wait with one gave up (group-claims.ts's GROUP_LOCK_TIMEOUT). */
  unguarded: boolean;
  scope: ScopeColumns;
  labels: readonly string[];
  members: Member[];
  runnerIds: Set<number>;
}

export class ClaimGroups {
  /** The runners waiting for the end of this phase of the event loop, by claim key. */
  private readonly pending = new Map<string, Pending>();
  /** How many groups of each claim key are claiming now. */
  private readonly claiming = new Map<string, number>();
  /** Full groups (MAX_GROUP runners) waiting for their key's turn, oldest first, by claim key. */
  private readonly full = new Map<string, Pending[]>();
  private scheduled = false;

  constructor(
    private readonly db: Db,
    private readonly writes: GroupedWrites,
    private readonly runProgress: RunProgress,
    private readonly now: () => number,
    /** The job's step names (runner-protocol.ts caches them by job). */
    private readonly stepNames: (job: ActionRunJob) => readonly string[],
    /** How long a request key's tasks can be fetched again (runner-protocol.ts). */
    private readonly requestKeyTtlSec: number,
  ) {}

  /**
   * Claims a job for `runner` together with the others of its claim key
   * that ask in this phase of the event loop; null when the runner is
   * already waiting in the group (a second FetchTask of one runner claims on
   * its own, after the runner's row lock). `requestKey` is the runner's
   * x-runner-request-key (null: none).
   */
  claim(runner: Runner, key: string, requestKey: string | null, gone: () => boolean): Promise<GroupOutcome> | null {
    let group = this.pending.get(key);
    if (group === undefined) {
      group = {
        lockFirst: false,
        unguarded: false,
        scope: { ownerId: runner.ownerId, repoId: runner.repoId },
        labels: runner.labels ?? [],
        members: [],
        runnerIds: new Set(),
      };
      this.pending.set(key, group);
    } else if (group.runnerIds.has(runner.id)) {
      return null;
    }
    const joined = group;
    joined.runnerIds.add(runner.id);
    const outcome = new Promise<GroupOutcome>((resolve, reject) => {
      joined.members.push({ runner, requestKey, gone, resolve, reject });
    });
    if (joined.members.length >= MAX_GROUP) {
      this.pending.delete(key);
      if ((this.claiming.get(key) ?? 0) < MAX_CLAIMING) this.start(key, joined);
      else {
        const queue = this.full.get(key);
        if (queue === undefined) this.full.set(key, [joined]);
        else queue.push(joined);
      }
    } else {
      this.schedule();
    }
    return outcome;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  /** Starts the groups gathered in this phase, but a key's group waits while MAX_CLAIMING of that key claim. */
  private flush(): void {
    this.scheduled = false;
    for (const [key, group] of [...this.pending]) {
      if ((this.claiming.get(key) ?? 0) >= MAX_CLAIMING) continue;
      this.pending.delete(key);
      this.start(key, group);
    }
  }

  private start(key: string, group: Pending): void {
    this.claiming.set(key, (this.claiming.get(key) ?? 0) + 1);
    void this.runGroup(group).finally(() => {
      const left = (this.claiming.get(key) ?? 1) - 1;
      if (left === 0) this.claiming.delete(key);
      else this.claiming.set(key, left);
      // A full group that waited goes first; then the runners that gathered meanwhile, with those of this phase.
      const waitingFull = this.full.get(key);
      const next = waitingFull?.shift();
      if (waitingFull?.length === 0) this.full.delete(key);
      if (next !== undefined) this.start(key, next);
      else if (this.pending.has(key)) this.schedule();
    });
  }

  private async runGroup(group: Pending): Promise<void> {
    let waiting = group.members;
    try {
      for (let attempt = 1; ; attempt += 1) {
        // A runner that hung up before the transaction is left out: nothing is claimed for it.
        const left = waiting.filter((member) => member.gone());
        for (const member of left) member.resolve('gone');
        waiting = waiting.filter((member) => !left.includes(member));
        if (waiting.length === 0) return;
        let outcomes: GroupOutcome[];
        try {
          outcomes = await this.writes.run((tx) => this.claimTogether(tx, group, waiting));
        } catch (error) {
          // A run's lock not had in time (group-claims.ts): at once again, waiting as long as it takes.
          if (!group.unguarded && isLockNotAvailable(error)) {
            group.unguarded = true;
            continue;
          }
          if (attempt < MAX_GROUP_ATTEMPTS && isRetryableError(error)) continue;
          throw error;
        }
        // Committed: from here on every runner gets its outcome. When the values cannot be
        // read, each payload reads its own (task-payload.ts), and FetchTask releases a claim
        // whose payload fails.
        const claims = outcomes.filter((outcome): outcome is Claim => typeof outcome === 'object');
        await this.readNeeds(claims).catch(() => undefined);
        waiting.forEach((member, i) => member.resolve(outcomes[i] as GroupOutcome));
        return;
      }
    } catch (error) {
      for (const member of waiting) member.reject(error);
    }
  }

  /** The group's transaction: the outcome of each of `members`, in order. */
  private async claimTogether(tx: Tx, group: Pending, members: readonly Member[]): Promise<GroupOutcome[]> {
    const now = this.now();
    const tokens = members.map(() => generateTokenString());
    // Request keys looked up under their runners' row locks, taken first in a statement of their
    // own, once a key turned out claimed meanwhile (group-claims.ts).
    if (group.lockFirst && members.some((member) => member.requestKey !== null))
      await lockRunnersForClaim(
        tx,
        members.map((member) => member.runner.id),
      );
    const { claimed, claimedUnderKey } = await claimJobsForRunners(
      tx,
      group.scope,
      group.labels,
      members.map((member, i) => {
        const token = tokens[i] as string;
        return {
          runnerId: member.runner.id,
          token: { hash: hashToken(token), lastEight: token.slice(-8) },
          requestKey: member.requestKey ?? '',
        };
      }),
      now,
      now + this.requestKeyTtlSec,
    );
    // Each run settled once for all its claimed jobs, every run's lock taken first, in run id
    // order (the order two groups lock shared runs in): RunProgress.lockForClaim says why.
    const byRun = new Map<number, GroupClaimed[]>();
    for (const claim of claimed) byRun.set(claim.job.runId, [...(byRun.get(claim.job.runId) ?? []), claim]);
    const runIds = [...byRun.keys()].sort((a, b) => a - b);
    const firstOf = (runId: number) => (byRun.get(runId) as GroupClaimed[])[0] as GroupClaimed;
    // When every run takes the lock claims share, the statement that inserts the steps takes
    // them too (and reads the values); a run settled whole takes its own (the group lock first).
    const shared = runIds.every((runId) => this.runProgress.claimSharesLock(firstOf(runId).run));
    // The keys the claim statement did not see claimed are looked up again under the runners' locks.
    const keyed = group.lockFirst
      ? []
      : members.flatMap((member) =>
          member.requestKey === null || claimedUnderKey.has(member.runner.id)
            ? []
            : [{ runnerId: member.runner.id, key: member.requestKey }],
        );
    const after =
      claimed.length === 0 && keyed.length === 0
        ? { locked: new Map<number, ActionRun | null>(), values: new Map<number, RepositoryValues>(), keyTaken: false }
        : await afterGroupClaim(
            tx,
            claimed.map((claim) => ({
              taskId: claim.taskId,
              repoId: claim.job.repoId,
              names: this.stepNames(claim.job),
            })),
            // A run whose repository is gone gets no values (its claims' refs are null), but is still locked.
            runIds.map((runId) => ({
              runId,
              repoId: firstOf(runId).job.repoId,
              ownerId: firstOf(runId).refs?.repoOwnerId ?? 0,
            })),
            shared ? runIds : [],
            now,
            keyed,
            !group.unguarded,
          );
    if (after.keyTaken) {
      group.lockFirst = true;
      throw new RunAgainError('a request key of the group was claimed meanwhile');
    }
    const locked = shared ? after.locked : new Map<number, ActionRun | null>();
    if (!shared && runIds.length > 0) {
      // Waits bounded as afterGroupClaim's lock statement bounds them for a guarded group.
      if (!group.unguarded) await boundGroupLockWaits(tx);
      for (const runId of runIds) locked.set(runId, await this.runProgress.lockForClaim(tx, firstOf(runId).run, runId));
    }
    const runs = new Map<number, ActionRun | null>();
    for (const runId of runIds) {
      const first = firstOf(runId);
      const jobs = (byRun.get(runId) as GroupClaimed[]).map((claim) => claim.job);
      const run = locked.get(runId) ?? null;
      runs.set(
        runId,
        await this.runProgress.settleClaimedLocked(
          tx,
          first.run,
          runId,
          jobs,
          !first.anyActiveHook,
          run,
          // This transaction's lock waits are bounded (afterGroupClaim or boundGroupLockWaits).
          !group.unguarded,
        ),
      );
    }
    // The payloads read no values of their own (task-payload.ts).
    for (const claim of claimed) {
      const values = after.values.get(claim.job.runId);
      if (claim.refs === null || values === undefined) continue;
      claim.refs.secrets = values.secrets;
      claim.refs.variables = values.variables;
    }
    const byRunner = new Map(claimed.map((claim) => [claim.runnerId, claim]));
    // Runners left without a job: rows other claims hold may still come back (a claim that rolls back).
    const busy =
      byRunner.size + claimedUnderKey.size < members.length && (await anyClaimable(tx, group.scope, group.labels))
        ? ('busy' as const)
        : ('none' as const);
    return members.map((member, i) => {
      if (claimedUnderKey.has(member.runner.id)) return 'claimed under the key';
      const claim = byRunner.get(member.runner.id);
      if (claim === undefined) return busy;
      return { claimed: claim, token: tokens[i] as string, run: runs.get(claim.job.runId) ?? null };
    });
  }

  /**
   * The needs of the claimed jobs that have some, for the whole group: each
   * run's jobs once, and the outputs of every needed task in one statement,
   * after the commit, as a payload of its own would read them (task-payload.ts).
   */
  private async readNeeds(claims: readonly Claim[]): Promise<void> {
    const needing = claims.filter(({ claimed }) => claimed.job.needs.length > 0);
    if (needing.length === 0) return;
    const runJobs = new Map<number, ActionRunJob[]>();
    for (const runId of new Set(needing.map(({ claimed }) => claimed.job.runId)))
      runJobs.set(runId, await listJobsOfRun(this.db, runId));
    const jobsOf = (claim: Claim) => runJobs.get(claim.claimed.job.runId) ?? [];
    const taskIds = new Set(needing.flatMap((claim) => neededTaskIds(claim.claimed.job, jobsOf(claim))));
    const outputs = await outputsOfTasks(this.db, [...taskIds]);
    for (const claim of needing) claim.needs = needsFrom(claim.claimed.job, jobsOf(claim), outputs);
  }
}
