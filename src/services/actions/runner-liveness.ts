// Records that runners are online without a database write per poll.
//
// A runner's status reads "offline" after RUNNER_OFFLINE_AFTER_MS (60 s)
// without contact, so last_online only needs refreshing every few seconds.
// The first contact of a runner not seen online lately, and every report that
// makes it `active`, is written at once (the status a user reads changes
// then); a refresh of a runner that is already online is queued and written
// with the others in one statement per FLUSH_MS (5,000 idle runners asking
// every 4.5 s: one UPDATE a second instead of 500). So is a report of a runner
// already active (its stored last_active under QUEUE_ACTIVE_WITHIN_SEC old,
// so it reads active until the flush): 100 busy runners reporting every
// second cost one UPDATE a second instead of 100, none awaited by a report.
// That UPDATE skips the rows a claim holds (touchRunnersActive): a runner
// skipped until its stored value is QUEUE_ACTIVE_WITHIN_SEC old is written
// at once by its next report, as before.
//
// A write at once is awaited by the call that made it (the call fails if it
// does). On SQLite it is a unit of the grouped writes (grouped-writes.ts),
// committed with the claims and reports of its turn of the event loop, not
// a transaction and a commit of its own: a fleet's first reports after a
// pause of 5 s or more (every runner's, when a swarm of queued jobs starts)
// each wrote and committed alone, then waited behind the group in flight
// for the connection, at the moment the claims of the first FetchTasks
// were being made.
//
// Guarantees and cost of a crash: a queued refresh is lost with the process,
// so last_online may lag by LIVENESS_WRITE_SEC + FLUSH_MS at most, far below
// the minute after which a runner reads offline, and last_active by
// QUEUE_ACTIVE_WITHIN_SEC + FLUSH_MS (a runner still reporting reads active
// throughout: it goes idle after 10 s). A failed flush is dropped:
// the runner's next refresh, LIVENESS_WRITE_SEC later, is queued again.
import type { Db } from '../../models/database.ts';
import type { GroupedWrites } from '../../models/grouped-writes.ts';
import { touchRunner, touchRunnersActive, touchRunnersOnline } from '../../models/runners.ts';
import type { Clock } from '../../modules/clock.ts';

/** A runner's last_online is written when what is stored is this much older (its status goes offline after 60 s). */
export const LIVENESS_WRITE_SEC = 10;
/** How often queued refreshes are written. */
export const FLUSH_MS = 1000;
/** A refresh is only queued while the stored value is this recent: an older runner is written at once. */
const QUEUE_WHILE_FRESHER_THAN_SEC = 30;
/** A report's refresh of `active` is queued while the stored value is this recent (it reads idle after 10 s). */
const QUEUE_ACTIVE_WITHIN_SEC = 5;
/** Ids per statement (SQLite's variable limit is far above; the statement stays small). */
const FLUSH_CHUNK = 500;
/** Past this many tracked runners the memory is dropped (a larger fleet only writes a little more). */
const MAX_TRACKED = 50_000;

export interface Liveness {
  online: number;
  active: number;
}

export class RunnerLiveness {
  /** What this process last wrote (or, for `online`, queued) for each runner, in seconds. */
  private readonly known = new Map<number, Liveness>();
  private readonly queued = new Set<number>();
  /** Runners whose queued refresh is `active` too (and not in `queued`). */
  private readonly queuedActive = new Set<number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    /** The process's grouped writes: on SQLite a write at once is one of their units (see the header). */
    private readonly writes: GroupedWrites | null = null,
  ) {}

  /**
   * Marks the runner online (and active), starting from what is stored when
   * this process has not seen it yet; returns the values now in effect.
   */
  async touch(runnerId: number, stored: Liveness, active: boolean): Promise<Liveness> {
    const queued = this.touchUnlessWrite(runnerId, stored, active);
    if (queued !== null) return queued;
    const now = this.clock.nowSec();
    if (this.writes?.deferred === true) await this.writes.run((tx) => touchRunner(tx, runnerId, now, active));
    else await touchRunner(this.db, runnerId, now, active);
    this.queued.delete(runnerId);
    if (active) this.queuedActive.delete(runnerId);
    const last = this.known.get(runnerId);
    if (last !== undefined) {
      last.online = now;
      if (active) last.active = now;
    }
    return { online: now, active: active ? now : (last?.active ?? stored.active) };
  }

  /**
   * touch() when it writes nothing now (the refresh is queued, or not due):
   * the values in effect; null when the caller must call touch(), which
   * writes. An idle poll's path, without a promise.
   */
  touchUnlessWrite(runnerId: number, stored: Liveness, active: boolean): Liveness | null {
    const now = this.clock.nowSec();
    let last = this.known.get(runnerId);
    if (last === undefined) {
      last = { online: stored.online, active: stored.active };
      if (this.known.size >= MAX_TRACKED) this.known.clear();
      this.known.set(runnerId, last);
    }
    const staleOnline = now - last.online >= LIVENESS_WRITE_SEC || now < last.online;
    const staleActive = active && (now - last.active >= 1 || now < last.active);
    const becomesActive = staleActive && (now - last.active >= QUEUE_ACTIVE_WITHIN_SEC || now < last.active);
    if (becomesActive || (staleOnline && (now - last.online >= QUEUE_WHILE_FRESHER_THAN_SEC || now < last.online)))
      return null;
    if (staleActive) {
      // `known` moves once the flush wrote it: a runner whose row it skips is written at once in time.
      this.queuedActive.add(runnerId);
      this.schedule();
      return { online: Math.max(last.online, now), active: now };
    }
    if (staleOnline) {
      last.online = now;
      this.queue(runnerId);
    }
    return { online: last.online, active: last.active };
  }

  /** Writes what is queued now (the server is closing). */
  async flush(): Promise<void> {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const ids = [...this.queued];
    const activeIds = [...this.queuedActive];
    this.queued.clear();
    this.queuedActive.clear();
    const now = this.clock.nowSec();
    for (let i = 0; i < activeIds.length; i += FLUSH_CHUNK) {
      try {
        for (const id of await touchRunnersActive(this.db, activeIds.slice(i, i + FLUSH_CHUNK), now)) {
          const last = this.known.get(id);
          if (last === undefined) continue;
          last.online = Math.max(last.online, now);
          last.active = Math.max(last.active, now);
        }
      } catch {
        // Dropped: see the header.
      }
    }
    for (let i = 0; i < ids.length; i += FLUSH_CHUNK) {
      try {
        await touchRunnersOnline(this.db, ids.slice(i, i + FLUSH_CHUNK), now);
      } catch {
        // Dropped: see the header. The database being closed under a last tick lands here too.
      }
    }
  }

  private queue(runnerId: number): void {
    this.queued.add(runnerId);
    this.schedule();
  }

  private schedule(): void {
    if (this.timer !== null) return;
    this.timer = setTimeout(() => void this.flush(), FLUSH_MS);
    this.timer.unref();
  }
}
