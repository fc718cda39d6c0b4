// The repository guard's rows kept between requests, on SQLite.
//
// Every /repos/{owner}/{repo} route reads its owner and repository (and the
// GET of a repository variable the variable too) in one statement. On the
// bench's VM any SQLite statement that reads a table costs a request far more
// in place than in a loop (its read transaction's file locks are system
// calls): the guard's read was about a fifth of that GET's CPU, and a read
// of one counter row in its place still cost 15-25 µs a request. The rows
// change rarely, so a cache keeps them per statement and arguments, tested
// for freshness by a counter instead of a lifetime:
//
// - Migration 0020's triggers bump one counter (repository_guard_version)
//   on every insert, update and delete of an account, a repository or an
//   Actions variable, made by any connection of any process.
// - An entry is served only under the value of the counter it was read
//   under; a different value drops every entry. A missing entry is read
//   after the counter, so what is stored is at least as new as the counter
//   it is stored under: a write committed between the two reads makes the
//   next use miss, never serve old rows.
// - The counter is read at the first use in each turn of the event loop,
//   and again within the turn whenever this connection has written anything
//   since (SQLite's count of the connection's changes, `total_changes()`,
//   which runs no read transaction and costs a fraction of a microsecond).
//
// So this process's own writes are seen by the very next read, as without
// the cache. A write by another process (on SQLite only `gantry admin`
// commands run beside the server) is seen from the next turn of the event
// loop: a request handled in the turn that was under way when it committed
// may still get the rows as of the turn's first read, a few milliseconds
// old at most. Nothing is cached inside a transaction or while one is open
// on the connection (the statement takes the driver's path then, as
// before), nor on PostgreSQL, where reading the counter would be a round
// trip as costly as the read it saves. Bounded: MAX_ENTRIES per statement,
// the least recently used dropped first. Rows are frozen (callers build
// their objects from them, as from a fresh row). In memory only: no cost of
// a crash.
import type BetterSqlite3 from 'better-sqlite3';
import type { CompiledStatement } from './compiled-statements.ts';
import type { Queryable } from './database.ts';
import { directConnectionOf } from './sqlite-direct-reads.ts';

const MAX_ENTRIES = 1024;

/**
 * The counter's value for one connection, read as the header says: at the
 * first use in a turn of the event loop, and again when the connection's
 * count of changes moved.
 */
class GuardVersion {
  private readonly version: BetterSqlite3.Statement;
  private readonly changes: BetterSqlite3.Statement;
  private value: unknown = undefined;
  private changesAtRead: unknown = undefined;
  private readThisTurn = false;
  private readonly endTurn = (): void => {
    this.readThisTurn = false;
  };

  constructor(sqlite: BetterSqlite3.Database) {
    this.version = sqlite.prepare('select version from repository_guard_version where id = 1').pluck(true);
    this.changes = sqlite.prepare('select total_changes()').pluck(true);
  }

  current(): unknown {
    const changes: unknown = this.changes.get();
    if (this.readThisTurn && changes === this.changesAtRead) return this.value;
    // The count first: a write after it makes the next use read the counter again.
    this.changesAtRead = changes;
    this.value = this.version.get();
    if (!this.readThisTurn) {
      this.readThisTurn = true;
      // Immediates run after the turn's I/O callbacks and their promises: the next turn reads again.
      setImmediate(this.endTurn);
    }
    return this.value;
  }
}

const versions = new WeakMap<BetterSqlite3.Database, GuardVersion>();

function guardVersionOf(sqlite: BetterSqlite3.Database): GuardVersion {
  let version = versions.get(sqlite);
  if (version === undefined) {
    version = new GuardVersion(sqlite);
    versions.set(sqlite, version);
  }
  return version;
}

export class GuardRowCache {
  private version: unknown = undefined;
  private readonly rows = new Map<string, unknown>();

  constructor(
    private readonly statement: CompiledStatement<unknown>,
    private readonly maxEntries = MAX_ENTRIES,
  ) {}

  /** The statement's first row for `args` (undefined when none), from the cache when still fresh (see the header). */
  async takeFirst(db: Queryable, args: readonly string[]): Promise<unknown> {
    const connection = db.isTransaction ? undefined : directConnectionOf(db);
    if (connection === undefined || connection.sqlite.inTransaction) return this.statement.takeFirst(db, args);
    const version = guardVersionOf(connection.sqlite).current();
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
