// Prunes the webhook delivery history older than GANTRY_WEBHOOK_RETENTION_DAYS
// (Forgejo's cron.cleanup_hook_task_table keeps 7 days by default too). Every
// process runs it; deleting by id is idempotent, so two processes pruning at
// once only repeat work. Small batches, each its own transaction, so SQLite's
// write lock is never held long and deliveries keep flowing.
import type { Clock } from '../../modules/clock.ts';
import { PeriodicPass } from '../../modules/periodic-pass.ts';
import type { Db } from '../../models/database.ts';
import { deleteFinishedHookTasks, findExpiredHookTasks } from '../../models/hook-task-retention.ts';

const BATCH = 500;
const DAY_MS = 86_400_000;

export interface WebhookRetentionOptions {
  retentionDays: number;
  onPruned?: (deleted: number) => void;
  onError?: (error: unknown) => void;
}

export class WebhookRetention {
  private readonly periodic = new PeriodicPass(
    () => this.pruneOnce(),
    (error) => this.options.onError?.(error),
  );

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly options: WebhookRetentionOptions,
  ) {}

  /** Deletes every expired finished delivery; the number deleted. 0 days keeps everything. */
  async pruneOnce(): Promise<number> {
    if (this.options.retentionDays === 0) return 0;
    const cutoff = this.clock.nowMs() - this.options.retentionDays * DAY_MS;
    let total = 0;
    for (;;) {
      const ids = await findExpiredHookTasks(this.db, cutoff, BATCH);
      if (ids.length === 0) break;
      total += await this.db.transaction().execute((tx) => deleteFinishedHookTasks(tx, ids));
      if (ids.length < BATCH) break;
    }
    if (total > 0) this.options.onPruned?.(total);
    return total;
  }

  start(intervalMs: number): void {
    if (this.options.retentionDays === 0) return;
    this.periodic.start(intervalMs);
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }
}
