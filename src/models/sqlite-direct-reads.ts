// Reads of compiled statements (compiled-statements.ts) on SQLite, run on the
// connection at once instead of through Kysely's driver.
//
// better-sqlite3 is synchronous and Kysely's SQLite driver has one
// connection, behind a mutex that a transaction holds from its BEGIN to its
// COMMIT across awaits. A read outside any transaction still went through
// that path: a promise for the mutex, one for the connection, one for the
// result and the executor's plumbing, about as much CPU as SQLite's own work
// for a point read (the API's GET of a variable makes two such reads).
//
// Here a SELECT given the database itself (not a transaction) runs at once
// when no transaction is open on the connection (`inTransaction`): then
// nothing holds the connection between statements, the read is its own
// autocommit read of committed data, exactly what it would have been through
// the driver a few microtasks later. While a transaction is open (some other
// caller is between its BEGIN and its COMMIT), the read takes the driver's
// path and waits for the mutex as before, so it never sees uncommitted rows.
// Statements that write, and everything run inside a transaction, take the
// driver's path, except in a transaction of grouped writes (grouped-writes.ts):
// that one holds the connection (the driver's mutex) from its BEGIN to its
// COMMIT and runs its units one at a time, so its compiled statements, reads
// and writes, run on the connection at once too (runInGroup), as the driver
// would run them a few promises later, in the same order. Nothing is cached
// or kept: no cost of a crash.
import type BetterSqlite3 from 'better-sqlite3';
import type { QueryResult } from 'kysely';
import type { Queryable } from './database.ts';

export interface DirectConnection {
  readonly sqlite: BetterSqlite3.Database;
  /** The statement cache's prepare (database.ts), so a statement is prepared once for both paths. */
  prepare(text: string): BetterSqlite3.Statement;
}

const connections = new WeakMap<object, DirectConnection>();

/** Registers the SQLite database's Kysely instance and its connection (database.ts). */
export function allowDirectReads(db: Queryable, connection: DirectConnection): void {
  connections.set(db, connection);
}

/**
 * The rows of `sql` read at once, or null when it must go through the driver:
 * not SQLite, a transaction (or a transaction open on the connection), or a
 * statement that writes. Errors are thrown as the driver would reject.
 */
export function readDirectly<Row>(db: Queryable, sql: string, parameters: readonly unknown[]): QueryResult<Row> | null {
  if (db.isTransaction) return null;
  const connection = connections.get(db);
  if (connection === undefined || connection.sqlite.inTransaction) return null;
  const statement = connection.prepare(sql);
  if (!statement.reader || !statement.readonly) return null;
  return { rows: statement.all(parameters as unknown[]) as Row[] };
}

/** The SQLite connection behind `db` (the database itself, not a transaction), if it is one. */
export function directConnectionOf(db: Queryable): DirectConnection | undefined {
  return connections.get(db);
}

/** The transactions of grouped writes now running, and their connection. */
const groups = new WeakMap<object, DirectConnection>();

/** From now until endGroup, `tx`'s compiled statements run on `connection` at once (grouped-writes.ts). */
export function beginGroup(tx: Queryable, connection: DirectConnection): void {
  groups.set(tx, connection);
}

export function endGroup(tx: Queryable): void {
  groups.delete(tx);
}

/**
 * The result of `sql` run at once in a group's transaction, as Kysely's
 * SQLite driver returns it, or null when `db` is not one. Errors are thrown
 * as the driver would reject.
 */
export function runInGroup<Row>(db: Queryable, sql: string, parameters: readonly unknown[]): QueryResult<Row> | null {
  const connection = groups.get(db);
  if (connection === undefined) return null;
  const statement = connection.prepare(sql);
  if (statement.reader) return { rows: statement.all(parameters as unknown[]) as Row[] };
  const { changes, lastInsertRowid } = statement.run(parameters as unknown[]);
  return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] };
}
