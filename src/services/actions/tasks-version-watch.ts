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

/**
 * How a held call hears that its caller went away: an AbortSignal, or
 * anything as small that calls the listener object's handleEvent (the HTTP
 * front's one-listener stand-in, which costs no EventTarget per call).
 */
export interface EndSignal {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: { handleEvent(): void }): void;
  removeEventListener(type: 'abort', listener: { handleEvent(): void }): void;
}

/**
 * Waits that end within this much of each other are ended by one timer
 * firing, up to this much before their bound: with thousands of polls held,
 * one timer a few times per RELEASE_MS instead of one per poll. A bound is a
 * runner's deadline less at least 500 ms (fetch-task.ts), so ending a wait
 * 10 ms early costs the runner nothing but a slightly shorter hold.
 */
const RELEASE_MS = 10;

/** How a wait ends: the new version, or null (the bound passed, the caller hung up, waits were interrupted). */
export type WaitEnd = (version: number | null) => void;

/** One waiting call. Itself the abort listener, so a wait allocates no closure for it. */
class Waiter {
  /** Set once settled; the deadline heap drops settled waiters when their bound comes. */
  done = false;
  constructor(
    readonly watch: TasksVersionWatch,
    readonly group: ScopeWaiters,
    readonly seen: number,
    /** performance.now() by which the wait ends with null. */
    readonly deadline: number,
    public resolve: WaitEnd | null,
    public signal: EndSignal | undefined,
  ) {}

  handleEvent(): void {
    this.watch.settle(this, null);
  }
}

/**
 * The waiters of one scope. A tick reads the scope's version once; only when
 * it differs from the version the last tick read must every waiter be
 * compared, since each waiter left by that tick had seen it. Otherwise only
 * the waiters that arrived since (`fresh`) are: on a fleet of thousands of
 * idle runners a tick touches the few polls that came in, not all of them.
 */
interface ScopeWaiters {
  key: string;
  scope: ScopeColumns;
  all: Set<Waiter>;
  fresh: Waiter[];
  /** The version the last tick read (null: none yet). */
  checked: number | null;
}

/**
 * Wakes waiting FetchTask calls when their scope's tasks version moves: one
 * timer, one query per distinct scope per tick, running only while someone
 * waits. `poke` checks at once (a run was created in this process). The
 * waits' bounds share one more timer: the waiters sit in a heap by deadline,
 * and the timer, armed for the earliest, ends every wait due within
 * RELEASE_MS of it.
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
  /** Waiters by deadline (a binary min-heap), settled ones included until their deadline. */
  private readonly byDeadline: Waiter[] = [];
  private deadlineTimer: NodeJS.Timeout | null = null;
  /** When the deadline timer fires (performance.now()); Infinity when none is armed. */
  private deadlineTimerAt = Number.POSITIVE_INFINITY;

  constructor(
    private readonly db: Db,
    private readonly intervalMs: number,
  ) {}

  /** The new version, or null when `ms` passed (up to RELEASE_MS less), the signal aborted or waits were interrupted. */
  waitForChange(scope: ScopeColumns, seen: number, ms: number, signal?: EndSignal): Promise<number | null> {
    return new Promise((resolve) => this.hold(scope, seen, ms, signal, resolve));
  }

  /**
   * waitForChange with a callback: `end` hears the new version or null once
   * (at once when the signal has aborted already). A held poll is then one
   * Waiter and the caller's callback, with no promise and no suspended
   * async call kept for the seconds it waits (what V8 copies out of its
   * young generation, then marks and compacts, for each of thousands).
   */
  hold(scope: ScopeColumns, seen: number, ms: number, signal: EndSignal | undefined, end: WaitEnd): void {
    if (signal?.aborted) return end(null);
    const key = scopeKey(scope);
    let group = this.scopes.get(key);
    if (group === undefined) {
      group = { key, scope, all: new Set(), fresh: [], checked: null };
      this.scopes.set(key, group);
    }
    const waiter = new Waiter(this, group, seen, performance.now() + ms, end, signal);
    signal?.addEventListener('abort', waiter);
    group.all.add(waiter);
    group.fresh.push(waiter);
    this.waiting += 1;
    this.pushDeadline(waiter);
    if (this.timer === null) {
      this.timer = setInterval(() => void this.check(), this.intervalMs);
      this.timer.unref();
    }
  }

  /** Ends a wait with `version` (null: no change); a settled waiter is left as it is. */
  settle(waiter: Waiter, version: number | null): void {
    if (waiter.done) return;
    waiter.done = true;
    const { group, resolve, signal } = waiter;
    waiter.resolve = null;
    waiter.signal = undefined;
    group.all.delete(waiter);
    signal?.removeEventListener('abort', waiter);
    if (group.all.size === 0 && this.scopes.get(group.key) === group) this.scopes.delete(group.key);
    this.waiting -= 1;
    if (this.waiting === 0) this.stopTimers();
    resolve?.(version);
  }

  /** current()'s answer when the last read is younger than the interval (no read, no promise); undefined otherwise. */
  recent(scope: ScopeColumns): number | undefined {
    const known = this.known.get(scopeKey(scope));
    return known !== undefined && Date.now() - known.at < this.intervalMs ? known.version : undefined;
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
    for (const group of [...this.scopes.values()]) for (const waiter of [...group.all]) this.settle(waiter, null);
  }

  private remember(key: string, version: number, at: number): void {
    const known = this.known.get(key);
    // A read that started earlier must not replace a newer one.
    if (known !== undefined && known.at > at) return;
    this.known.set(key, { version, at });
    if (this.known.size > 10_000) this.known.clear();
  }

  /** Nobody waits: no tick, no deadline timer, and the heap holds only settled waiters. */
  private stopTimers(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    if (this.deadlineTimer !== null) clearTimeout(this.deadlineTimer);
    this.deadlineTimer = null;
    this.deadlineTimerAt = Number.POSITIVE_INFINITY;
    this.byDeadline.length = 0;
  }

  private pushDeadline(waiter: Waiter): void {
    const heap = this.byDeadline;
    let at = heap.push(waiter) - 1;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      const above = heap[parent] as Waiter;
      if (above.deadline <= waiter.deadline) break;
      heap[at] = above;
      at = parent;
    }
    heap[at] = waiter;
    this.armDeadlines();
  }

  private popDeadline(): void {
    const heap = this.byDeadline;
    const last = heap.pop() as Waiter;
    if (heap.length === 0) return;
    let at = 0;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= heap.length) break;
      const right = child + 1;
      if (right < heap.length && (heap[right] as Waiter).deadline < (heap[child] as Waiter).deadline) child = right;
      const below = heap[child] as Waiter;
      if (last.deadline <= below.deadline) break;
      heap[at] = below;
      at = child;
    }
    heap[at] = last;
  }

  /** Arms the deadline timer for the earliest deadline, unless it fires before that already. */
  private armDeadlines(): void {
    const head = this.byDeadline[0];
    if (head === undefined) return;
    const at = head.deadline - RELEASE_MS;
    if (this.deadlineTimer !== null) {
      if (this.deadlineTimerAt <= at) return;
      clearTimeout(this.deadlineTimer);
    }
    this.deadlineTimerAt = at;
    // Not unref'd, as a wait's own timer would not be: a pending wait keeps the process alive until its bound.
    this.deadlineTimer = setTimeout(() => this.endDue(), Math.max(0, Math.ceil(at - performance.now())));
  }

  /** Ends the waits due within RELEASE_MS, then arms the timer for the next one. */
  private endDue(): void {
    this.deadlineTimer = null;
    this.deadlineTimerAt = Number.POSITIVE_INFINITY;
    const until = performance.now() + RELEASE_MS;
    const heap = this.byDeadline;
    for (let head = heap[0]; head !== undefined && head.deadline <= until; head = heap[0]) {
      this.popDeadline();
      this.settle(head, null);
    }
    this.armDeadlines();
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
          for (const waiter of compared) if (waiter.seen !== version) this.settle(waiter, version);
        }
      } while (this.checkAgain);
    } finally {
      this.checking = false;
    }
  }
}
