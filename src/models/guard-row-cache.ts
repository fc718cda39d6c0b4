// The repository guard's rows kept between requests, on SQLite, never stale.
//
// Every /repos/{owner}/{repo} route reads its owner and repository (and the
// GET of a repository variable the variable too) in one statement; on
// SQLite that point read was about a fifth of such a request's CPU (the
// read transaction's file locks, the B-tree walks, the row's values). The
// rows it reads change rarely, so a cache keeps them per statement and
// arguments, with an exact test of freshness instead of a lifetime:
//
// - Migration 0020's triggers bump one counter (repository_guard_version)
//   on every insert, update and delete of an account, a repository or an
//   Actions variable, made by any connection of any process.
// - Each use reads that counter first (one row by primary key, in its own
//   read transaction) and serves an entry only when it was read under the
//   same value; a different value drops every entry.
// - A missing entry is read after the counter, so what is stored is at
//   least as new as the counter it is stored under: a write committed
//   between the two reads makes the next use miss, never serve old rows.
//
// So a request sees what the statement would have read at the moment it
// read the counter, as an autocommit read a few microseconds earlier would.
// Nothing is cached inside a transaction or while one is open on the
// connection (the statement takes the driver's path then, as before), nor on
// PostgreSQL, where reading the counter would be a round trip as costly as
// the read it saves. Bounded: MAX_ENTRIES per statement, the least recently
// used dropped first. Rows are frozen (callers build their objects from
// them, as from a fresh row). In memory only: no cost of a crash.
import type BetterSqlite3 from 'better-sqlite3';
import type { CompiledStatement } from './compiled-statements.ts';
import type { Queryable } from './database.ts';
import { directConnectionOf } from './sqlite-direct-reads.ts';

const MAX_ENTRIES = 1024;

const VERSION_SQL = 'select version from repository_guard_version where id = 1';

/** The counter's statement per connection, prepared once, answering the value alone. */
const versionStatements = new WeakMap<BetterSqlite3.Database, BetterSqlite3.Statement>();

function versionStatement(sqlite: BetterSqlite3.Database): BetterSqlite3.Statement {
  let statement = versionStatements.get(sqlite);
  if (statement === undefined) {
    statement = sqlite.prepare(VERSION_SQL).pluck(true);
    versionStatements.set(sqlite, statement);
  }
  return statement;
}

export class GuardRowCache {
  private version: unknown = undefined;
  private readonly rows = new Map<string, unknown>();

  constructor(
    private readonly statement: CompiledStatement<unknown>,
    private readonly maxEntries = MAX_ENTRIES,
  ) {}

  /** The statement's first row for `args` (undefined when none), from the cache when still exact. */
  async takeFirst(db: Queryable, args: readonly string[]): Promise<unknown> {
    const connection = db.isTransaction ? undefined : directConnectionOf(db);
    if (connection === undefined || connection.sqlite.inTransaction) return this.statement.takeFirst(db, args);
    const version: unknown = versionStatement(connection.sqlite).get();
    if (version !== this.version) {
      this.rows.clear();
      this.version = version;
    }
    // Lengths first, so no two argument lists make one key whatever their characters.
    const key = args.map((arg) => `${arg.length}:${arg}`).join('');
    if (this.rows.has(key)) {
      const row = this.rows.get(key);
      // Re-inserted to keep the map in least-recently-used order.
      this.rows.delete(key);
      this.rows.set(key, row);
      return row;
    }
    const row = await this.statement.takeFirst(db, args);
    // Stored only while the counter it was read under is still the current one.
    if (this.version === version) {
      if (this.rows.size >= this.maxEntries) this.rows.delete(this.rows.keys().next().value as string);
      this.rows.set(key, typeof row === 'object' && row !== null ? Object.freeze(row) : row);
    }
    return row;
  }
}
