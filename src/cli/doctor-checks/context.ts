// What the doctor's checks share: the configuration, the per-check deadline,
// and the things several checks need (the database, its migration state, the
// stored encrypted values, what answers on the HTTP port), each found once.
import type { Config } from '../../config.ts';
import type { InspectedDatabase } from './database.ts';
import type { PortState } from './http-port.ts';
import type { MigrationStatus } from './migrations.ts';
import type { KeyInspection, StoredValues } from './secret-key.ts';

export interface BaseContext {
  /** Deadline of one check, in milliseconds. */
  readonly timeoutMs: number;
}

export interface DoctorContext extends BaseContext {
  readonly config: Config;
  /** The database opened for inspection (nothing created or migrated); rejects when it cannot be opened. */
  database(): Promise<InspectedDatabase>;
  migrations(): Promise<MigrationStatus>;
  /** The keys the server would decrypt with, read without creating a key file. */
  keys(): KeyInspection;
  /** Every encrypted column's count, key ids and a bounded sample; rejects when the database is not ready. */
  storedValues(): Promise<StoredValues>;
  /** What answers on GANTRY_HTTP_PORT. */
  localServer(): Promise<PortState>;
}
