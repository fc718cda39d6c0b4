// Work nobody will finish: Forgejo's stop_zombie_tasks and
// cancel_abandoned_jobs crons (services/actions/clear_tasks.go).
//
// - A running task without a report (UpdateTask heartbeat) for 10 minutes:
//   task, job and unfinished steps → failure, its log archived, run settled.
// - A waiting or blocked job untouched for 24 hours → cancelled, run settled.
// - A finished task whose log was never archived (the runner vanished before
//   "no more", or a crash between stop and archive) → archived.
//
// Several processes may run this at once: every transition is a conditional
// update on the state it found (`status = running AND updated < cutoff`), so
// exactly one of them applies it, and only that one settles the run.
import type { Clock } from '../../modules/clock.ts';
import { ActionStatus } from '../../modules/actions-status.ts';
import type { Db } from '../../models/database.ts';
import {
  cancelAbandonedJob,
  closeUnfinishedSteps,
  deleteEphemeralRunner,
  failZombieTask,
  findAbandonedJobs,
  findTaskJob,
  findUnarchivedLogs,
  findZombieTasks,
  finishJobOfTask,
  takeWriteLock,
} from '../../models/task-reports.ts';
import type { StaleJob, StaleTask } from '../../models/task-reports.ts';
import type { TaskReportService } from './task-reports.ts';

export interface HousekeepingOptions {
  /** Forgejo's ZOMBIE_TASK_TIMEOUT: seconds without a report before a running task fails. */
  zombieTimeoutSec?: number;
  /** Forgejo's ABANDONED_JOB_TIMEOUT: seconds a job may wait (or stay blocked) untouched. */
  abandonedTimeoutSec?: number;
  /** How far back (before the zombie timeout) finished tasks are checked for unarchived logs. */
  logSweepWindowSec?: number;
  /** Rows per query; a pass repeats until a batch comes back short. */
  batchSize?: number;
  /** Told about a failure of one item or one timed pass; the rest goes on. */
  onError?: (error: unknown) => void;
}

export interface HousekeepingReport {
  /** Running tasks this pass failed. */
  zombies: number;
  /** Waiting or blocked jobs this pass cancelled. */
  abandoned: number;
  /** Logs this pass archived (zombies' included). */
  logsArchived: number;
}

const MAX_BATCHES = 1000;

export class ActionsHousekeeping {
  private readonly zombieTimeoutSec: number;
  private readonly abandonedTimeoutSec: number;
  private readonly logSweepWindowSec: number;
  private readonly batchSize: number;
  private readonly onError: (error: unknown) => void;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> | null = null;
  private stopped = false;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly reports: TaskReportService,
    options: HousekeepingOptions = {},
  ) {
    this.zombieTimeoutSec = options.zombieTimeoutSec ?? 10 * 60;
    this.abandonedTimeoutSec = options.abandonedTimeoutSec ?? 24 * 60 * 60;
    this.logSweepWindowSec = options.logSweepWindowSec ?? 24 * 60 * 60;
    this.batchSize = options.batchSize ?? 100;
    this.onError = options.onError ?? (() => {});
  }

  async runOnce(): Promise<HousekeepingReport> {
    const report: HousekeepingReport = { zombies: 0, abandoned: 0, logsArchived: 0 };
    await this.stopZombieTasks(report);
    await this.cancelAbandonedJobs(report);
    await this.archiveForgottenLogs(report);
    return report;
  }

  /** Runs a pass every `intervalMs` (the next one starts after the previous ended). */
  start(intervalMs: number): void {
    if (this.timer !== null || this.running !== null) return;
    this.stopped = false;
    const tick = (): void => {
      this.timer = null;
      this.running = this.runOnce()
        .catch((error: unknown) => this.onError(error))
        .finally(() => {
          this.running = null;
          if (!this.stopped) this.schedule(tick, intervalMs);
        });
    };
    this.schedule(tick, intervalMs);
  }

  /** No new pass starts; resolves once a pass in progress has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  private schedule(tick: () => void, intervalMs: number): void {
    this.timer = setTimeout(tick, intervalMs);
    this.timer.unref();
  }

  /**
   * Handles batches until one comes back short, or one in which nothing
   * could be done (an item that keeps failing would otherwise return in
   * every batch).
   */
  private async drain<T>(find: () => Promise<T[]>, handle: (item: T) => Promise<boolean>): Promise<void> {
    for (let batch = 0; batch < MAX_BATCHES; batch += 1) {
      const items = await find();
      let done = 0;
      for (const item of items) {
        try {
          if (await handle(item)) done += 1;
        } catch (error) {
          this.onError(error);
        }
      }
      if (items.length < this.batchSize || done === 0) return;
    }
  }

  private async stopZombieTasks(report: HousekeepingReport): Promise<void> {
    const cutoff = this.clock.nowSec() - this.zombieTimeoutSec;
    await this.drain(
      () => findZombieTasks(this.db, cutoff, this.batchSize),
      async (task) => {
        if (!(await this.failZombie(task, cutoff))) return false;
        report.zombies += 1;
        // After the commit: the file work must not hold the transaction. If this
        // fails, archiveForgottenLogs picks the log up on a later pass.
        if (await this.reports.finaliseLog(task.id)) report.logsArchived += 1;
        return true;
      },
    );
  }

  private async failZombie(task: StaleTask, cutoff: number): Promise<boolean> {
    return this.reports.runProgress.transaction(this.db, async (tx) => {
      await takeWriteLock(tx);
      const now = this.clock.nowSec();
      const job = await findTaskJob(tx, task.jobId);
      if (job !== null) await this.reports.runProgress.lockRun(tx, job.runId);
      if (!(await failZombieTask(tx, task.id, cutoff, now))) return false;
      await closeUnfinishedSteps(tx, task.id, ActionStatus.failure, now);
      if (job !== null && (await finishJobOfTask(tx, job.id, task.id, ActionStatus.failure, now)) !== null) {
        await this.reports.runProgress.settle(tx, job.runId, [job.id]);
      }
      // An ephemeral runner takes one task; this one is over.
      await deleteEphemeralRunner(tx, task.runnerId);
      return true;
    });
  }

  private async cancelAbandonedJobs(report: HousekeepingReport): Promise<void> {
    const cutoff = this.clock.nowSec() - this.abandonedTimeoutSec;
    await this.drain(
      () => findAbandonedJobs(this.db, cutoff, this.batchSize),
      async (job) => {
        if (!(await this.cancelJob(job, cutoff))) return false;
        report.abandoned += 1;
        return true;
      },
    );
  }

  private async cancelJob(job: StaleJob, cutoff: number): Promise<boolean> {
    return this.reports.runProgress.transaction(this.db, async (tx) => {
      await takeWriteLock(tx);
      const now = this.clock.nowSec();
      await this.reports.runProgress.lockRun(tx, job.runId);
      if (!(await cancelAbandonedJob(tx, job.id, cutoff, now))) return false;
      await this.reports.runProgress.settle(tx, job.runId, [job.id]);
      return true;
    });
  }

  private async archiveForgottenLogs(report: HousekeepingReport): Promise<void> {
    const cutoff = this.clock.nowSec() - this.zombieTimeoutSec;
    const since = cutoff - this.logSweepWindowSec;
    await this.drain(
      () => findUnarchivedLogs(this.db, since, cutoff, this.batchSize),
      async (id) => {
        if (!(await this.reports.finaliseLog(id))) return false;
        report.logsArchived += 1;
        return true;
      },
    );
  }
}
