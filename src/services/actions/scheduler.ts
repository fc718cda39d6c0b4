// The scheduler: fires the due ticks of registered schedules (Forgejo's cron
// task `start_schedule_tasks`, services/actions/schedule_tasks.go, which runs
// once a minute; here a pass runs when the earliest tick is due).
//
// Guarantees:
// - Runs in every process. Each tick of a schedule creates exactly one run
//   across all processes: the tick is claimed by a conditional update of
//   `next` in the run's transaction (schedules.ts fire), which one process
//   wins; the others see 'taken'. Each process walks a due batch in its own
//   random order, so several processes share a busy second instead of
//   queueing behind the same rows.
// - A pass costs the due rows: it reads them through the index on `next`
//   (models/schedules.ts), however many repositories or schedules are not due.
// - Lateness is bounded: between passes the process sleeps until the earliest
//   `next`, at most MAX_SLEEP_MS (a schedule registered by another process,
//   or a clock step, is seen within that), and a local registration wakes it.
// - Missed ticks are not replayed: after downtime each overdue schedule fires
//   once and jumps to its first tick after now.
// - A failing pass is reported (onError) and retried after MAX_SLEEP_MS; a
//   schedule that cannot fire consumes its tick (schedules.ts) so it cannot
//   hold up the rest.
import { randomInt } from 'node:crypto';
import type { Clock } from '../../modules/clock.ts';
import type { Db } from '../../models/database.ts';
import { earliestScheduleTick, listDueSchedules } from '../../models/schedules.ts';
import type { Schedule } from '../../models/schedules.ts';
import type { FireOutcome } from './schedules.ts';

/** Longest sleep between two looks at the table. */
const MAX_SLEEP_MS = 1000;
const BATCH = 100;
/**
 * Ticks one process fires at once: a busy second (cron ticks cluster on
 * minute boundaries) overlaps the git reads and, on PostgreSQL, the
 * transactions of several runs.
 */
const FIRE_CONCURRENCY = 4;

export interface SchedulerOptions {
  onError?: (error: unknown) => void;
  /** Bench seam: called for each run this process created, with its lateness after the tick in ms. */
  onFired?: (lagMs: number) => void;
}

export class Scheduler {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = true;
  /** Set by stop(): a pass in progress ends after the schedule in hand. */
  private halted = false;
  /** A wake-up arrived during a pass: run another one at once. */
  private rerun = false;
  private readonly onError: (error: unknown) => void;
  private readonly onFired: (lagMs: number) => void;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly fire: (schedule: Schedule) => Promise<FireOutcome>,
    options: SchedulerOptions = {},
  ) {
    this.onError = options.onError ?? (() => {});
    this.onFired = options.onFired ?? (() => {});
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.halted = false;
    this.arm(0);
  }

  /** No new pass starts; resolves once a pass in progress has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.halted = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  /** Schedules were registered in this process: look again now, their first tick may be the earliest. */
  wake(): void {
    if (this.stopped) return;
    if (this.running !== null) this.rerun = true;
    else this.arm(0);
  }

  /** Fires every tick due now; returns how many runs this process created. */
  async runDue(): Promise<number> {
    let fired = 0;
    for (;;) {
      const due = await listDueSchedules(this.db, Math.floor(this.clock.nowMs() / 1000), BATCH);
      shuffle(due);
      let progressed = 0;
      const worker = async (): Promise<void> => {
        for (let schedule = due.pop(); schedule !== undefined && !this.halted; schedule = due.pop()) {
          const outcome = await this.fire(schedule);
          if (outcome === 'fired') {
            fired += 1;
            this.onFired(this.clock.nowMs() - schedule.next * 1000);
          }
          progressed += 1;
        }
      };
      const batchSize = due.length;
      await Promise.all(Array.from({ length: Math.min(FIRE_CONCURRENCY, batchSize) }, worker));
      if (this.halted || batchSize < BATCH || progressed === 0) return fired;
    }
  }

  private arm(delayMs: number): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.pass(), delayMs);
    this.timer.unref();
  }

  private pass(): void {
    this.timer = null;
    this.rerun = false;
    let sleepMs = MAX_SLEEP_MS;
    this.running = (async () => {
      try {
        await this.runDue();
        const earliest = await earliestScheduleTick(this.db);
        if (earliest !== null) sleepMs = Math.min(MAX_SLEEP_MS, Math.max(0, earliest * 1000 - this.clock.nowMs()));
      } catch (error) {
        this.onError(error);
      }
    })().finally(() => {
      this.running = null;
      if (!this.stopped) this.arm(this.rerun ? 0 : sleepMs);
    });
  }
}

/** Fisher-Yates, in place. */
function shuffle<T>(items: T[]): void {
  for (let i = items.length - 1; i > 0; i -= 1) {
    const j = randomInt(i + 1);
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
}
