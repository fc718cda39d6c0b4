// Wakes long-polling FetchTask calls when their scope's tasks version moves,
// whichever Gantry process created the job: one timer polls the versions
// that someone waits for; `poke` checks at once when this process created a run.
// It also answers `current` from its last read of a scope when that read is
// younger than the poll interval, so a fleet of runners starting their polls
// costs one version read per scope and interval, not one per poll. A version
// read that old is safe to act on: the claim that follows reads the jobs
// themselves, and a waiter seeing an older version than the database's is
// woken by the next check.
import type { Db } from '../../models/database.ts';
import { readTasksVersion, tasksVersion } from '../../models/runners.ts';
import type { ScopeColumns } from '../../modules/scope.ts';

function scopeKey(scope: ScopeColumns): string {
  return `${scope.ownerId}:${scope.repoId}`;
}

interface Waiter {
  seen: number;
  settle(version: number | null): void;
}

/**
 * The waiters of one scope. A tick reads the scope's version once; only when
 * it differs from the version the last tick read must every waiter be
 * compared, since each waiter left by that tick had seen it. Otherwise only
 * the waiters that arrived since (`fresh`) are: on a fleet of thousands of
 * idle runners a tick touches the few polls that came in, not all of them.
 */
interface ScopeWaiters {
  scope: ScopeColumns;
  all: Set<Waiter>;
  fresh: Waiter[];
  /** The version the last tick read (null: none yet). */
  checked: number | null;
}

/**
 * Wakes waiting FetchTask calls when their scope's tasks version moves: one
 * timer, one query per distinct scope per tick, running only while someone
 * waits. `poke` checks at once (a run was created in this process).
 */
export class TasksVersionWatch {
  /** The scopes someone waits on (a scope leaves with its last waiter). */
  private readonly scopes = new Map<string, ScopeWaiters>();
  private waiting = 0;
  private timer: NodeJS.Timeout | null = null;
  private checking = false;
  private checkAgain = false;
  /** The last version read per scope, and when (Date.now()). */
  private readonly known = new Map<string, { version: number; at: number }>();
  /** Reads under way, shared by the calls that arrive meanwhile. */
  private readonly reading = new Map<string, Promise<number>>();

  constructor(
    private readonly db: Db,
    private readonly intervalMs: number,
  ) {}

  /** The new version, or null when `ms` passed, the signal aborted or waits were interrupted. */
  waitForChange(scope: ScopeColumns, seen: number, ms: number, signal?: AbortSignal): Promise<number | null> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve(null);
      const key = scopeKey(scope);
      let group = this.scopes.get(key);
      if (group === undefined) {
        group = { scope, all: new Set(), fresh: [], checked: null };
        this.scopes.set(key, group);
      }
      const own = group;
      const onAbort = (): void => waiter.settle(null);
      const timeout = setTimeout(() => waiter.settle(null), ms);
      const waiter: Waiter = {
        seen,
        settle: (version) => {
          if (!own.all.delete(waiter)) return;
          clearTimeout(timeout);
          signal?.removeEventListener('abort', onAbort);
          if (own.all.size === 0 && this.scopes.get(key) === own) this.scopes.delete(key);
          this.waiting -= 1;
          if (this.waiting === 0) this.stopTimer();
          resolve(version);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      own.all.add(waiter);
      own.fresh.push(waiter);
      this.waiting += 1;
      if (this.timer === null) {
        this.timer = setInterval(() => void this.check(), this.intervalMs);
        this.timer.unref();
      }
    });
  }

  /** The scope's tasks version (created at 1 when missing), from the last read when it is younger than the interval. */
  async current(scope: ScopeColumns, nowSec: number): Promise<number> {
    const key = scopeKey(scope);
    const known = this.known.get(key);
    if (known !== undefined && Date.now() - known.at < this.intervalMs) return known.version;
    let pending = this.reading.get(key);
    if (pending === undefined) {
      const at = Date.now();
      pending = tasksVersion(this.db, scope, nowSec).then(
        (version) => {
          this.reading.delete(key);
          this.remember(key, version, at);
          return version;
        },
        (error: unknown) => {
          this.reading.delete(key);
          throw error;
        },
      );
      this.reading.set(key, pending);
    }
    return pending;
  }

  poke(): void {
    if (this.waiting > 0) void this.check();
  }

  interruptAll(): void {
    for (const group of [...this.scopes.values()]) for (const waiter of [...group.all]) waiter.settle(null);
  }

  private remember(key: string, version: number, at: number): void {
    const known = this.known.get(key);
    // A read that started earlier must not replace a newer one.
    if (known !== undefined && known.at > at) return;
    this.known.set(key, { version, at });
    if (this.known.size > 10_000) this.known.clear();
  }

  private stopTimer(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  private async check(): Promise<void> {
    if (this.checking) {
      this.checkAgain = true;
      return;
    }
    this.checking = true;
    try {
      do {
        this.checkAgain = false;
        for (const [key, group] of [...this.scopes]) {
          let version: number;
          try {
            version = await readTasksVersion(this.db, group.scope);
          } catch {
            continue; // The database hiccupped: the next tick tries again, the waiter's bound still holds.
          }
          this.remember(key, version, Date.now());
          // Taken before settling: a waiter that arrives while this tick settles is fresh for the next one.
          const compared = version === group.checked ? group.fresh : [...group.all];
          group.fresh = [];
          group.checked = version;
          for (const waiter of compared) if (waiter.seen !== version) waiter.settle(version);
        }
      } while (this.checkAgain);
    } finally {
      this.checking = false;
    }
  }
}
