// Wakes long-polling FetchTask calls when their scope's tasks version moves,
// whichever Gantry process created the job: one timer polls the versions
// that someone waits for; `poke` checks at once when this process created a run.
import type { Db } from '../../models/database.ts';
import { readTasksVersion } from '../../models/runners.ts';
import type { ScopeColumns } from '../../modules/scope.ts';

function scopeKey(scope: ScopeColumns): string {
  return `${scope.ownerId}:${scope.repoId}`;
}

interface Waiter {
  scope: ScopeColumns;
  seen: number;
  settle(version: number | null): void;
}

/**
 * Wakes waiting FetchTask calls when their scope's tasks version moves: one
 * timer, one query per distinct scope per tick, running only while someone
 * waits. `poke` checks at once (a run was created in this process).
 */
export class TasksVersionWatch {
  private readonly waiters = new Set<Waiter>();
  private timer: NodeJS.Timeout | null = null;
  private checking = false;
  private checkAgain = false;

  constructor(
    private readonly db: Db,
    private readonly intervalMs: number,
  ) {}

  /** The new version, or null when `ms` passed, the signal aborted or waits were interrupted. */
  waitForChange(scope: ScopeColumns, seen: number, ms: number, signal?: AbortSignal): Promise<number | null> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve(null);
      const onAbort = (): void => waiter.settle(null);
      const timeout = setTimeout(() => waiter.settle(null), ms);
      const waiter: Waiter = {
        scope,
        seen,
        settle: (version) => {
          if (!this.waiters.delete(waiter)) return;
          clearTimeout(timeout);
          signal?.removeEventListener('abort', onAbort);
          if (this.waiters.size === 0) this.stopTimer();
          resolve(version);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.add(waiter);
      if (this.timer === null) {
        this.timer = setInterval(() => void this.check(), this.intervalMs);
        this.timer.unref();
      }
    });
  }

  poke(): void {
    if (this.waiters.size > 0) void this.check();
  }

  interruptAll(): void {
    for (const waiter of [...this.waiters]) waiter.settle(null);
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
        const byScope = new Map<string, Waiter[]>();
        for (const waiter of this.waiters) {
          const key = scopeKey(waiter.scope);
          byScope.set(key, [...(byScope.get(key) ?? []), waiter]);
        }
        for (const waiters of byScope.values()) {
          const first = waiters[0];
          if (first === undefined) continue;
          let version: number;
          try {
            version = await readTasksVersion(this.db, first.scope);
          } catch {
            continue; // The database hiccupped: the next tick tries again, the waiter's bound still holds.
          }
          for (const waiter of waiters) if (waiter.seen !== version) waiter.settle(version);
        }
      } while (this.checkAgain);
    } finally {
      this.checking = false;
    }
  }
}
