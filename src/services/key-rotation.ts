// Re-encrypts every value stored under an older key with the key ring's
// current key, while servers keep running. Generic over "encrypted columns" so
// that webhook secrets can join later.
//
// Safety: values are read in batches ordered by id and each is replaced with a
// compare-and-swap (`where id = ? and data = <what was read>`), so a value
// written concurrently is never overwritten. Old keys stay in the ring, so an
// interrupted run loses nothing: running again finishes the job. A server that
// had not yet noticed the new key may still write under the old one for up to
// its check interval; further passes pick such rows up.
import { SecretCipher } from '../modules/crypto/secret-cipher.ts';
import type { KeyRing } from '../modules/crypto/key-ring.ts';
import type { Db, Queryable } from '../models/database.ts';

export interface EncryptedValue {
  id: number;
  stored: string;
  associatedData: string;
}

export interface EncryptedColumn {
  /** Names the column in progress lines and failures (e.g. `secret`). */
  readonly label: string;
  /** How many stored values do not start with `prefix` (the target key's). */
  count(db: Queryable, prefix: string): Promise<number>;
  /** The next batch, by id after `afterId`, of values not under `prefix`. */
  batch(db: Queryable, prefix: string, afterId: number, limit: number): Promise<EncryptedValue[]>;
  /** Replaces `expected` by `next` in row `id`; false when the row changed meanwhile. */
  swap(db: Queryable, id: number, expected: string, next: string): Promise<boolean>;
  /** Distinct stored prefixes ("v1:<key id>:"), to know which keys are still needed. */
  prefixesInUse(db: Queryable): Promise<string[]>;
}

export interface RotationProgress {
  column: string;
  done: number;
  total: number;
}

export interface RotationOptions {
  /** Rows per transaction (default 500). */
  batchSize?: number;
  /** Stop after this many batches (a rotation in steps; finish with another run). */
  maxBatches?: number;
  /** Checked between batches (e.g. set by SIGINT). */
  shouldStop?: () => boolean;
  onProgress?: (progress: RotationProgress) => void;
}

export interface RotationFailure {
  column: string;
  id: number;
  reason: string;
}

export interface RotationReport {
  /** The key everything is now (or will be) encrypted with. */
  keyId: string;
  reencrypted: number;
  /** Rows left alone because they changed between read and swap (written anew meanwhile). */
  changedConcurrently: number;
  /** Rows that could not be decrypted (their key is missing): never touched. */
  failed: RotationFailure[];
  /** Values still not under the current key when the run ended. */
  remaining: number;
  /** True when maxBatches or shouldStop ended the run early. */
  stopped: boolean;
}

const MAX_PASSES = 10;

export class KeyRotationService {
  constructor(
    private readonly db: Db,
    private readonly keys: KeyRing,
    private readonly columns: readonly EncryptedColumn[],
  ) {}

  private prefix(): string {
    return SecretCipher.storedPrefix(this.keys.currentKeyId());
  }

  /** How many stored values are not under the current key. */
  async countRemaining(): Promise<number> {
    let n = 0;
    for (const column of this.columns) n += await column.count(this.db, this.prefix());
    return n;
  }

  /** Ids of the keys some stored value still needs. */
  async keyIdsInUse(): Promise<Set<string>> {
    const ids = new Set<string>();
    for (const column of this.columns) {
      for (const prefix of await column.prefixesInUse(this.db)) {
        const id = SecretCipher.keyIdOf(prefix);
        if (id) ids.add(id);
      }
    }
    return ids;
  }

  async reencryptAll(options: RotationOptions = {}): Promise<RotationReport> {
    const batchSize = options.batchSize ?? 500;
    const report: RotationReport = {
      keyId: this.keys.currentKeyId(),
      reencrypted: 0,
      changedConcurrently: 0,
      failed: [],
      remaining: 0,
      stopped: false,
    };
    let batches = 0;
    const mustStop = (): boolean =>
      Boolean(options.shouldStop?.()) || (options.maxBatches !== undefined && batches >= options.maxBatches);

    for (const column of this.columns) {
      const failed = new Set<number>();
      let done = 0;
      let total = await column.count(this.db, this.prefix());
      for (let pass = 0; pass < MAX_PASSES && total > done + failed.size; pass += 1) {
        const prefix = this.prefix();
        let cursor = 0;
        for (;;) {
          if (mustStop()) {
            report.stopped = true;
            break;
          }
          const rows = await column.batch(this.db, prefix, cursor, batchSize);
          if (rows.length === 0) break;
          batches += 1;
          cursor = (rows[rows.length - 1] as EncryptedValue).id;
          const swaps: { id: number; expected: string; next: string }[] = [];
          for (const row of rows) {
            if (failed.has(row.id)) continue;
            try {
              const plaintext = this.keys.decrypt(row.stored, row.associatedData);
              swaps.push({ id: row.id, expected: row.stored, next: this.keys.encrypt(plaintext, row.associatedData) });
            } catch (error) {
              failed.add(row.id);
              report.failed.push({
                column: column.label,
                id: row.id,
                reason: error instanceof Error ? error.message : String(error),
              });
            }
          }
          if (swaps.length > 0) {
            const swapped = await this.db.transaction().execute(async (tx) => {
              let n = 0;
              for (const s of swaps) if (await column.swap(tx, s.id, s.expected, s.next)) n += 1;
              return n;
            });
            done += swapped;
            report.changedConcurrently += swaps.length - swapped;
          }
          total = Math.max(total, done + failed.size);
          options.onProgress?.({ column: column.label, done, total });
        }
        if (report.stopped) break;
        // Values written under an older key while this pass ran are found by the next one.
        total = done + (await column.count(this.db, this.prefix()));
      }
      report.reencrypted += done;
      if (report.stopped) break;
    }
    report.keyId = this.keys.currentKeyId();
    report.remaining = await this.countRemaining();
    return report;
  }
}
