// Rows read as arrays of values, for the statements of the hottest API reads
// (the repository guard's owner-and-repository row, a variable by name). A
// row read as an object costs better-sqlite3 a property set per column, each
// with its column name turned into a V8 string again: for the guard's
// 48-column row that was half of the query's CPU (about 8 of 16 µs). Read as
// an array, the same row costs the values only, and the model builds its
// row object as one literal from a fixed list of columns (its `…_COLUMNS`
// and `…RowFromValues`: a loop setting keys one by one made V8 turn the
// object into a dictionary, which cost as much as it saved).
//
// A statement asks for arrays by ending its SQL with ARRAY_ROWS_MARK (a
// comment, so the text still runs as is); the SQLite statement cache
// (database.ts) reads such a statement in raw mode and the PostgreSQL
// connection (pg-prepared.ts) with `rowMode: 'array'`. Anything else that
// runs it (a connection without either, such as the doctor's) answers
// objects: valuesOf turns those into the same arrays, in the order of the
// SELECT's columns, so the result never depends on the connection.
import type { Selectable } from 'kysely';

export const ARRAY_ROWS_MARK = ' /* rows as arrays */';

/** True for a statement whose rows should come back as arrays. */
export function wantsArrayRows(sql: string): boolean {
  return sql.endsWith(ARRAY_ROWS_MARK);
}

/**
 * A row of a statement marked ARRAY_ROWS_MARK as an array of values. Its
 * selected names must be distinct (aliases where two tables share one): an
 * object row would keep only the last of two equal names.
 */
export function valuesOf(row: unknown): readonly unknown[] {
  return Array.isArray(row) ? row : Object.values(row as Record<string, unknown>);
}

/** L when it names every column of table T, else never. */
type AllColumns<T, L extends readonly (keyof Selectable<T>)[]> =
  Exclude<keyof Selectable<T>, L[number]> extends never ? L : never;

/**
 * Every column of table T, in the order a statement selects them:
 * `columnsOf<UserTable>()([...])` does not compile when one is missing.
 */
export function columnsOf<T>() {
  return <const L extends readonly (keyof Selectable<T>)[]>(columns: L & AllColumns<T, L>): L => columns;
}
