// Which migrations the database still needs, read without applying any (that
// is `gantry migrate`'s job, or the server's at start), and which ones it has
// that this Gantry does not know (a newer version migrated it).
import { Migrator, sql } from 'kysely';
import { MIGRATIONS } from '../../migrations/index.ts';
import type { Db } from '../../models/database.ts';
import type { DoctorContext } from './context.ts';
import { requireDatabase } from './database.ts';
import { CheckSkipped, fail, ok, warn } from './result.ts';
import type { Check, Finding } from './result.ts';

/** Kysely's default bookkeeping table (the migrator in models/database.ts keeps the default). */
const MIGRATION_TABLE = 'kysely_migration';

export interface MigrationStatus {
  known: number;
  pending: string[];
  /** Applied to the database but unknown to this version of Gantry. */
  unknown: string[];
}

export async function readMigrationStatus(db: Db | null): Promise<MigrationStatus> {
  const names = Object.keys(MIGRATIONS);
  if (db === null) return { known: names.length, pending: names, unknown: [] };
  // getMigrations only reads: it neither creates the bookkeeping tables nor takes the migration lock.
  const migrator = new Migrator({ db, provider: { getMigrations: async () => ({ ...MIGRATIONS }) } });
  const migrations = await migrator.getMigrations();
  const pending = migrations.filter((m) => m.executedAt === undefined).map((m) => m.name);
  const tables = await db.introspection.getTables({ withInternalKyselyTables: true });
  let unknown: string[] = [];
  if (tables.some((t) => t.name === MIGRATION_TABLE)) {
    const { rows } = await sql<{ name: string }>`select name from ${sql.table(MIGRATION_TABLE)}`.execute(db);
    unknown = rows.map((r) => r.name).filter((name) => !(name in MIGRATIONS));
  }
  return { known: names.length, pending, unknown };
}

/** For checks that read tables: skips them while the schema is not current. */
export async function requireMigratedDatabase(ctx: DoctorContext): Promise<Db> {
  const { db } = await requireDatabase(ctx);
  if (db === null) throw new CheckSkipped('not checked: there is no database yet');
  const status = await ctx.migrations();
  if (status.pending.length > 0)
    throw new CheckSkipped('not checked: the database has pending migrations (see "migrations")');
  return db;
}

export const migrationsCheck: Check<DoctorContext> = {
  name: 'migrations',
  onTimeout: { status: 'fail', fix: 'the database did not answer: check its load and logs' },
  async run(ctx): Promise<Finding> {
    await requireDatabase(ctx);
    const status = await ctx.migrations();
    if (status.unknown.length > 0) {
      return fail(
        `the database has migration(s) this Gantry does not know: ${status.unknown.join(', ')} (a newer Gantry migrated it)`,
        'run the Gantry version that migrated this database (migrations are forward-only), or restore the backup taken before the upgrade',
      );
    }
    if (status.pending.length > 0) {
      return warn(
        `${status.pending.length} of ${status.known} migration(s) not applied: ${status.pending.join(', ')} (doctor applied none)`,
        'back up the database, then run `gantry migrate` (the server also applies them when it starts)',
      );
    }
    return ok(`all ${status.known} migrations applied`);
  },
};
