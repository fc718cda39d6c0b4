// A bare migrated database of one dialect, for model and worker tests that
// must not share rows with a server's own background work (SQLite in a temp
// folder, or a scratch PostgreSQL database of the test cluster).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { migrateToLatest, openDatabase } from '../../src/models/database.ts';
import type { DatabaseHandle } from '../../src/models/database.ts';
import { createScratchPgDatabase } from './pg-database.ts';
import type { TestDialect } from './server.ts';

export interface ScratchDatabase {
  handle: DatabaseHandle;
  /** The PostgreSQL URL (a second pool can be opened on it), or null on SQLite. */
  url: string | null;
  /** The SQLite data folder, or null on PostgreSQL. */
  dataDir: string | null;
  drop(): Promise<void>;
}

/** A fresh database of `dialect` with every migration applied; `drop` removes it. */
export async function openScratchDatabase(dialect: TestDialect): Promise<ScratchDatabase> {
  if (dialect === 'postgres') {
    const adminUrl = process.env.GANTRY_TEST_PG_URL;
    if (!adminUrl) throw new Error('GANTRY_TEST_PG_URL is not set');
    const scratch = await createScratchPgDatabase(adminUrl);
    const handle = openDatabase({ databaseUrl: scratch.url, dataDir: '' });
    await migrateToLatest(handle.db);
    return {
      handle,
      url: scratch.url,
      dataDir: null,
      drop: async () => (await handle.destroy(), await scratch.drop()),
    };
  }
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-hooks-'));
  const handle = openDatabase({ databaseUrl: null, dataDir });
  await migrateToLatest(handle.db);
  return {
    handle,
    url: null,
    dataDir,
    drop: async () => (await handle.destroy(), await fs.rm(dataDir, { recursive: true, force: true })),
  };
}
