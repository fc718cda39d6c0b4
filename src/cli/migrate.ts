// `gantry migrate`: apply pending migrations and report what ran.
import type { Config } from '../config.ts';
import { migrateToLatest, openDatabase } from '../models/database.ts';

export async function migrateCommand(config: Config): Promise<void> {
  const database = openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  try {
    const { applied } = await migrateToLatest(database.db);
    console.log(
      applied.length === 0 ? 'database is up to date' : `applied ${applied.length} migration(s): ${applied.join(', ')}`,
    );
  } finally {
    await database.destroy();
  }
}
