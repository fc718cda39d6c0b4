// Removes the files of artifacts that are done with (Forgejo's cleanup_actions
// cron, services/actions/cleanup.go CleanupArtifacts): confirmed artifacts
// (or abandoned uploads) past their expiry become `expired`, artifacts marked for deletion (by
// DeleteArtifact, the REST DELETE, a rerun or a deleted run) become
// `deleted`; in both cases their files go. Rows stay, as Forgejo keeps them:
// an expired artifact is still listed, with `expired: true`.
//
// Every process runs this. A row's files are claimed by the conditional
// update that moves its status (models/artifacts.ts claimForCleanup): of two
// processes passing at once, exactly one gets each row back, and only that
// one removes its files — after the claim has committed, so a crash in
// between leaves files behind (harmless, never a row pointing at nothing).
import type { Clock } from '../../modules/clock.ts';
import { PeriodicPass } from '../../modules/periodic-pass.ts';
import type { ObjectStorage } from '../../modules/storage/object-storage.ts';
import type { Db } from '../../models/database.ts';
import { claimForCleanup, findDueForCleanup } from '../../models/artifacts.ts';

const BATCH = 200;

export interface ArtifactRetentionOptions {
  onCleaned?: (count: number) => void;
  onError?: (error: unknown) => void;
}

export class ArtifactRetention {
  private readonly periodic = new PeriodicPass(
    () => this.cleanOnce(),
    (error) => this.options.onError?.(error),
  );

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly storage: ObjectStorage,
    private readonly options: ArtifactRetentionOptions = {},
  ) {}

  /** One pass: every due artifact's files removed; the number of artifacts cleaned up. */
  async cleanOnce(): Promise<number> {
    let total = 0;
    for (;;) {
      const now = this.clock.nowSec();
      const ids = await findDueForCleanup(this.db, now, BATCH);
      if (ids.length === 0) break;
      const claimed = await this.db.transaction().execute((tx) => claimForCleanup(tx, ids, now));
      for (const artifact of claimed) await this.storage.removePrefix(artifact.storagePath);
      total += claimed.length;
      // Another process took this batch: the next one is for whoever finds it.
      if (claimed.length === 0 || ids.length < BATCH) break;
    }
    if (total > 0) this.options.onCleaned?.(total);
    return total;
  }

  start(intervalMs: number): void {
    this.periodic.start(intervalMs);
  }

  stop(): Promise<void> {
    return this.periodic.stop();
  }
}
