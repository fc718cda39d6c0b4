// The database checks: can it be opened, what state is it in. Diagnosing must
// not change what is diagnosed, so SQLite is opened here rather than through
// openDatabase, which creates the folder and the file and switches the
// journal mode: a missing file stays missing, and the journal mode is read,
// not set. PostgreSQL goes through openDatabase (it changes nothing there),
// so doctor connects exactly as the server does.
import fs from 'node:fs/promises';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect, sql } from 'kysely';
import type { Config } from '../../config.ts';
import { openDatabase } from '../../models/database.ts';
import type { Db, Dialect } from '../../models/database.ts';
import type { Database } from '../../models/tables.ts';
import type { DoctorContext } from './context.ts';
import { CheckSkipped, fail, messageOf, ok, warn, withDeadline } from './result.ts';
import type { Check, Finding } from './result.ts';

export interface InspectedDatabase {
  readonly dialect: Dialect;
  /** Where it is, without credentials: a file path, or postgres://user@host:port/db. */
  readonly location: string;
  /** null: the SQLite file does not exist (yet). */
  readonly db: Db | null;
  readonly sqlitePath: string | null;
  close(): Promise<void>;
}

/** The database URL as it may be shown: no password, no query (which may carry one). */
export function describeDatabaseUrl(databaseUrl: string): string {
  const url = new URL(databaseUrl);
  url.password = '';
  url.search = '';
  return url.href;
}

/** Opens the configured database for inspection and makes one round trip; throws with a message safe to show. */
export async function openForInspection(config: Config): Promise<InspectedDatabase> {
  if (config.databaseUrl !== null) {
    const handle = openDatabase({
      databaseUrl: config.databaseUrl,
      dataDir: config.dataDir,
      maxConnections: 2,
      onConnectionError: () => {},
    });
    try {
      await sql`select 1`.execute(handle.db);
    } catch (error) {
      await handle.destroy().catch(() => {});
      throw error;
    }
    return {
      dialect: 'postgres',
      location: describeDatabaseUrl(config.databaseUrl),
      db: handle.db,
      sqlitePath: null,
      close: () => handle.destroy(),
    };
  }
  const sqlitePath = path.join(config.dataDir, 'gantry.db');
  const exists = await fs.stat(sqlitePath).then(
    () => true,
    (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return false;
      throw error;
    },
  );
  if (!exists) return { dialect: 'sqlite', location: sqlitePath, db: null, sqlitePath, close: async () => {} };
  // Read-write like the server (a read-only connection cannot open a WAL database whose -shm file is missing).
  const sqlite = new BetterSqlite3(sqlitePath, { fileMustExist: true, timeout: 5000 });
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
  try {
    await sql`select count(*) from sqlite_master`.execute(db);
  } catch (error) {
    await db.destroy().catch(() => {});
    throw error;
  }
  return { dialect: 'sqlite', location: sqlitePath, db, sqlitePath, close: () => db.destroy() };
}

/**
 * The inspected database for a check that needs it. When it cannot be opened, or does not
 * answer a little before the checks' deadline, the check is skipped: the "database" line
 * reports the cause once, instead of every dependent check failing with it.
 */
export async function requireDatabase(ctx: DoctorContext): Promise<InspectedDatabase> {
  try {
    return await withDeadline(ctx.database(), ctx.timeoutMs - Math.min(1000, ctx.timeoutMs / 4));
  } catch {
    throw new CheckSkipped('not checked: the database cannot be opened (see "database")');
  }
}

function connectionFix(config: Config): string {
  if (config.databaseUrl === null) {
    return 'make the file readable and writable by the user running Gantry, or restore it from a backup (see Backup and restore in the README)';
  }
  return 'check GANTRY_DATABASE_URL (host, port, user, password, database name) and that PostgreSQL accepts connections from this host (pg_hba.conf)';
}

export const databaseCheck: Check<DoctorContext> = {
  name: 'database',
  onTimeout: {
    status: 'fail',
    fix: 'the database did not answer: check that PostgreSQL runs and is reachable (firewall, host name), or that no process holds a lock on the SQLite file',
  },
  async run(ctx): Promise<Finding> {
    let inspected: InspectedDatabase;
    try {
      inspected = await ctx.database();
    } catch (error) {
      const where =
        ctx.config.databaseUrl === null
          ? path.join(ctx.config.dataDir, 'gantry.db')
          : describeDatabaseUrl(ctx.config.databaseUrl);
      return fail(`cannot open ${where}: ${messageOf(error)}`, connectionFix(ctx.config));
    }
    if (inspected.db === null) {
      return warn(
        `no SQLite database yet at ${inspected.location}`,
        'run `gantry migrate` (or start the server) to create it; if you expected existing data, check GANTRY_DATA_DIR',
      );
    }
    return ok(
      inspected.dialect === 'sqlite'
        ? `SQLite database ${inspected.location} opens`
        : `connected to PostgreSQL at ${inspected.location}`,
    );
  },
};

export const sqliteJournalModeCheck: Check<DoctorContext> = {
  name: 'sqlite journal mode',
  onTimeout: {
    status: 'warn',
    fix: 'another process holds a lock on the database for long: see which one (fuser <data>/gantry.db)',
  },
  async run(ctx): Promise<Finding> {
    const { db } = await requireDatabase(ctx);
    if (db === null) return ok('set to WAL when the database is created');
    const { rows } = await sql<{ journal_mode: string }>`pragma journal_mode`.execute(db);
    const mode = rows[0]?.journal_mode ?? 'unknown';
    if (mode.toLowerCase() === 'wal') return ok('WAL (the CLI and readers work while the server writes)');
    return warn(
      `journal mode is ${mode}, not WAL: admin commands may wait for the server's writes`,
      'start the server once (it switches to WAL); if it stays so, the file system does not support WAL (e.g. NFS): keep the SQLite database on a local disk, or use PostgreSQL',
    );
  },
};

const MIN_POSTGRES_VERSION_NUM = 90500;

export const postgresVersionCheck: Check<DoctorContext> = {
  name: 'postgresql version',
  onTimeout: { status: 'fail', fix: 'PostgreSQL did not answer a simple query: check its load and logs' },
  async run(ctx): Promise<Finding> {
    const { db } = await requireDatabase(ctx);
    if (db === null) throw new Error('no PostgreSQL connection');
    const { rows } = await sql<{
      version: string;
      num: string;
    }>`select current_setting('server_version') as version, current_setting('server_version_num') as num`.execute(db);
    const row = rows[0];
    if (!row) throw new Error('PostgreSQL did not report its version');
    // ON CONFLICT and FOR UPDATE SKIP LOCKED (the task queue, the webhook outbox) arrived in 9.5.
    if (Number(row.num) < MIN_POSTGRES_VERSION_NUM) {
      return fail(
        `PostgreSQL ${row.version} is too old: Gantry needs 9.5 or newer (ON CONFLICT, SKIP LOCKED)`,
        'upgrade PostgreSQL',
      );
    }
    return ok(`PostgreSQL ${row.version}`);
  },
};
