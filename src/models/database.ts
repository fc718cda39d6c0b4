// Opens the database (SQLite embedded, or PostgreSQL for scale-out), runs
// migrations, and hides the few dialect differences from everything above.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import type pg from 'pg';
import { Kysely, Migrator, PostgresAdapter, PostgresDialect, SqliteDialect } from 'kysely';
import type { Migration, MigrationProvider, MigrationResult, Transaction } from 'kysely';
import { MIGRATIONS } from '../migrations/index.ts';
import { wantsArrayRows } from './array-rows.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../modules/private-files.ts';
import { DEFAULT_PREPARED_PER_CONNECTION, isChangedResultType, preparingPool } from './pg-prepared.ts';
import { checkpointOffThread } from './sqlite-checkpoints.ts';
import { allowDirectReads } from './sqlite-direct-reads.ts';
import type { Database } from './tables.ts';

export type Dialect = 'sqlite' | 'postgres';
export type Db = Kysely<Database>;
export type Tx = Transaction<Database>;
/** Either the database or a transaction on it: models accept both. */
export type Queryable = Kysely<Database>;

export interface DatabaseHandle {
  readonly db: Db;
  readonly dialect: Dialect;
  /** Where the SQLite file lives (null on PostgreSQL). */
  readonly sqlitePath: string | null;
  destroy(): Promise<void>;
}

export interface OpenDatabaseOptions {
  databaseUrl: string | null;
  dataDir: string;
  /** Pool size for PostgreSQL. */
  maxConnections?: number;
  /** Statements each PostgreSQL connection prepares at most (0: none; pg-prepared.ts). */
  preparedStatements?: number;
  /** SQLite: checkpoint the write-ahead log on a thread of its own (the server; sqlite-checkpoints.ts). */
  checkpointThread?: boolean;
  /** Told when PostgreSQL drops an idle connection (the pool replaces it). */
  onConnectionError?: (error: Error) => void;
}

// pg is loaded only when a PostgreSQL URL is given: an embedded SQLite server
// never uses it, and loading it costs about 4.4 MB (2.7 MB of it heap) for every
// process's lifetime. It is CommonJS, so require loads it synchronously and
// openDatabase stays synchronous.
function loadPg(): typeof pg {
  return createRequire(import.meta.url)('pg') as typeof pg;
}

// pg returns int8 (ids, counts, bigint times) as strings by default; every such
// value here fits in 2^53, so parse them as numbers once, at the driver.
function pgTypes(driver: typeof pg): pg.CustomTypesConfig {
  return {
    getTypeParser(oid: number, format?: 'text' | 'binary') {
      if (oid === driver.types.builtins.INT8) return (value: string) => Number(value);
      return driver.types.getTypeParser(oid, format as 'text');
    },
  } as unknown as pg.CustomTypesConfig;
}

export function openDatabase(options: OpenDatabaseOptions): DatabaseHandle {
  if (options.databaseUrl) {
    const driver = loadPg();
    const pool = new driver.Pool({
      connectionString: options.databaseUrl,
      max: options.maxConnections ?? 10,
      types: pgTypes(driver),
    });
    // The server may close an idle connection (restart, failover, idle timeout,
    // DROP DATABASE … WITH (FORCE)). pg reports it as an 'error' event on the
    // pool, which crashes the process when nobody listens; the pool has already
    // dropped that client and opens a new one for the next query.
    pool.on('error', (error) => options.onConnectionError?.(error));
    // pool.end() resolves before its connections are closed: destroy() waits for them.
    const open = new Set<pg.PoolClient>();
    let allClosed: (() => void) | null = null;
    pool.on('connect', (client) => open.add(client));
    pool.on('remove', (client) => {
      open.delete(client);
      if (open.size === 0) allClosed?.();
    });
    const prepared = options.preparedStatements ?? DEFAULT_PREPARED_PER_CONNECTION;
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: preparingPool(pool, prepared) }) });
    const destroy = async (): Promise<void> => {
      const closed = open.size === 0 ? Promise.resolve() : new Promise<void>((resolve) => (allClosed = resolve));
      await db.destroy();
      // Bounded: a connection whose socket already died may never report its end.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([closed, new Promise<void>((resolve) => (timer = setTimeout(resolve, 5000).unref()))]);
      clearTimeout(timer);
    };
    return { db, dialect: 'postgres', sqlitePath: null, destroy };
  }
  fs.mkdirSync(options.dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const sqlitePath = path.join(options.dataDir, 'gantry.db');
  // Created here with 0600 (not by SQLite, with 0644 & ~umask): SQLite gives
  // the -wal and -shm files it creates later the database file's mode.
  fs.closeSync(fs.openSync(sqlitePath, 'a', PRIVATE_FILE_MODE));
  const sqlite = new BetterSqlite3(sqlitePath);
  // WAL lets the CLI and readers work while the server writes; busy_timeout makes
  // a second process wait for the lock instead of failing at once.
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = NORMAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  const checkpointer = options.checkpointThread === true ? checkpointOffThread(sqlite, sqlitePath) : null;
  const cached = withStatementCache(sqlite);
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: cached }) });
  allowDirectReads(db, { sqlite, prepare: (text) => cached.prepare(text) });
  const destroy = async (): Promise<void> => {
    await checkpointer?.stop();
    await db.destroy();
  };
  return { db, dialect: 'sqlite', sqlitePath, destroy };
}

// Kysely prepares every query anew; better-sqlite3 statements are reusable, and
// preparing was the largest cost of a cheap request. Keep the most recent ones.
const STATEMENT_CACHE_SIZE = 1000;

function withStatementCache(sqlite: BetterSqlite3.Database) {
  const cache = new Map<string, BetterSqlite3.Statement>();
  return {
    close: () => sqlite.close(),
    prepare(text: string): BetterSqlite3.Statement {
      let statement = cache.get(text);
      if (statement) {
        // Re-insert to keep the map in least-recently-used order.
        cache.delete(text);
      } else {
        statement = sqlite.prepare(text);
        if (wantsArrayRows(text)) statement.raw(true);
        if (cache.size >= STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value as string);
      }
      cache.set(text, statement);
      return statement;
    },
  };
}

class StaticMigrationProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    return { ...MIGRATIONS };
  }
}

export interface MigrationReport {
  applied: string[];
}

/** Applies pending migrations in order; throws with the failing migration's name. */
export async function migrateToLatest(db: Db): Promise<MigrationReport> {
  const migrator = new Migrator({ db, provider: new StaticMigrationProvider() });
  const { error, results } = await migrator.migrateToLatest();
  const applied = (results ?? []).filter((r: MigrationResult) => r.status === 'Success').map((r) => r.migrationName);
  if (error) {
    const failed = (results ?? []).find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    const cause = error instanceof Error ? error.message : String(error);
    throw new Error(`migration ${failed} failed: ${cause}`, { cause: error });
  }
  return { applied };
}

/** True when a database error is a unique-constraint violation (both dialects). */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/**
 * Thrown by a transaction that found a row moved under it in a way it cannot
 * go on from without risking a deadlock: roll back and run it again from the
 * start, as after a deadlock (isRetryableError), without waiting for one.
 */
export class RunAgainError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RunAgainError';
  }
}

/** True when PostgreSQL gave up waiting for a lock after the transaction's lock_timeout (lock_not_available). */
export function isLockNotAvailable(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '55P03';
}

/**
 * True when a transaction failed only because of concurrent work and may be
 * run again as it is: RunAgainError, a PostgreSQL deadlock (40P01) or serialization failure
 * (40001), a prepared statement whose result columns a concurrent migration
 * changed (pg-prepared.ts: the retry runs it unprepared), or SQLite lock
 * contention (SQLITE_BUSY, and SQLITE_BUSY_SNAPSHOT when a WAL reader's
 * snapshot went stale before it wrote).
 */
export function isRetryableError(error: unknown): boolean {
  if (error instanceof RunAgainError) return true;
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return (
    code === '40P01' ||
    code === '40001' ||
    code === 'SQLITE_BUSY' ||
    code === 'SQLITE_BUSY_SNAPSHOT' ||
    isChangedResultType(error)
  );
}

/** Row locks (FOR UPDATE, SKIP LOCKED) exist on PostgreSQL only; SQLite serialises writers anyway. */
export function isPostgres(db: Queryable): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}
