// Authenticated runners, kept in memory so that an idle FetchTask (the bulk
// of a fleet's traffic: every runner asks every few seconds) costs no
// database round trip to say who is asking. Gitea found that lookup plus a
// liveness write on every poll kept a 32-core server busy with 100 runners
// (go-gitea/gitea PRs 38150, 38281).
//
// Guarantees, across every Gantry process sharing the database:
// - A deleted runner, or one whose token, labels, scope or ephemeral flag
//   changed, is refused (or seen with its new values) by every process within
//   RUNNER_IDENTITY_CHECK_MS (1 s) plus one query's time. Triggers on
//   action_runner bump one version row (migration 0017) whatever deletes or
//   edits the row — the runners API, an owner's deletion, an ephemeral runner
//   finishing — and each process reads that row at most once per
//   RUNNER_IDENTITY_CHECK_MS, on the first authentication after the interval,
//   before answering it. When it moved, every cached runner is dropped.
// - A cached runner is also reloaded after RUNNER_IDENTITY_TTL_MS whatever
//   happens, so nothing outlives that even if the version row were bypassed.
// - Unknown uuids and wrong tokens are never cached: the token is checked
//   against the stored digest on every call (hashing is cheap), and a miss
//   always asks the database.
// Within one process the cache is exact: the runners API drops a runner it
// deletes at once (forget), and ephemeral runners, deleted by their task's
// last report, are never cached.
import type { Db } from '../../models/database.ts';
import { findRunnerByUuid, readRunnerIdentityVersion } from '../../models/runners.ts';
import type { Runner } from '../../models/runners.ts';

/** How stale another process's deletion or edit of a runner may be seen: at most this long. */
export const RUNNER_IDENTITY_CHECK_MS = 1000;
/** A cached runner is reloaded after this long even when the version did not move. */
export const RUNNER_IDENTITY_TTL_MS = 60_000;
/** Past this many runners the oldest entries go first (a fleet larger than this only loses some hits). */
const MAX_ENTRIES = 50_000;

interface Entry {
  runner: Runner;
  loadedAt: number;
}

export class RunnerIdentityCache {
  private readonly entries = new Map<string, Entry>();
  /** The identity version the entries were loaded under; -1 before the first read. */
  private version = -1;
  private checkedAt = Number.NEGATIVE_INFINITY;
  private checking: Promise<void> | null = null;
  /** Bumped whenever entries are dropped: a load that began before must not store what it read. */
  private generation = 0;

  constructor(
    private readonly db: Db,
    private readonly checkMs: number = RUNNER_IDENTITY_CHECK_MS,
    private readonly ttlMs: number = RUNNER_IDENTITY_TTL_MS,
  ) {}

  /** The runner with this uuid as the database has it (within the guarantees above), or null. */
  async find(uuid: string): Promise<Runner | null> {
    await this.revalidate();
    const now = Date.now();
    const entry = this.entries.get(uuid);
    if (entry !== undefined && now - entry.loadedAt < this.ttlMs) return entry.runner;
    const generation = this.generation;
    const runner = await findRunnerByUuid(this.db, uuid);
    if (runner === null) {
      this.entries.delete(uuid);
      return null;
    }
    // An ephemeral runner lives for one task and is deleted by its last report: not worth caching, and never stale.
    if (generation === this.generation && !runner.ephemeral) {
      this.entries.delete(uuid);
      this.entries.set(uuid, { runner, loadedAt: now });
      if (this.entries.size > MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value as string);
    }
    return runner;
  }

  /**
   * find()'s answer when it needs no read: no version check is due and the
   * runner's entry is fresh (undefined otherwise; then call find). An idle
   * poll's lookup, without a promise.
   */
  peek(uuid: string): Runner | undefined {
    const now = Date.now();
    if (now - this.checkedAt >= this.checkMs) return undefined;
    const entry = this.entries.get(uuid);
    return entry !== undefined && now - entry.loadedAt < this.ttlMs ? entry.runner : undefined;
  }

  /** This process deleted or changed the runner: the next call reads it again. */
  forget(uuid: string): void {
    this.entries.delete(uuid);
    this.generation += 1;
  }

  /** Reads the identity version when the last read is older than checkMs; drops everything when it moved. */
  private async revalidate(): Promise<void> {
    if (Date.now() - this.checkedAt < this.checkMs) return;
    // Concurrent callers share one read.
    this.checking ??= (async () => {
      const started = Date.now();
      try {
        const version = await readRunnerIdentityVersion(this.db);
        if (version !== this.version) {
          this.entries.clear();
          this.generation += 1;
          this.version = version;
        }
        this.checkedAt = started;
      } finally {
        this.checking = null;
      }
    })();
    await this.checking;
  }
}
