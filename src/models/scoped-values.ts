// Queries shared by the two tables of Actions scope values, `secret` and
// `action_variable`: same columns, same unique (owner_id, repo_id, name) index.
import type { Selectable } from 'kysely';
import type { ScopeColumns } from '../modules/scope.ts';
import { columnsOf, valuesOf } from './array-rows.ts';
import { compiledArrayStatement, compiledStatement } from './compiled-statements.ts';
import type { Queryable } from './database.ts';
import type { ScopedValueTable } from './tables.ts';

export type ScopedValueTableName = 'secret' | 'action_variable';

export interface ScopedValue {
  id: number;
  ownerId: number;
  repoId: number;
  name: string;
  /** As stored: ciphertext for secrets, the value for variables. */
  data: string;
  createdUnix: number;
  updatedUnix: number;
}

export function scopedValueFromRow(row: Selectable<ScopedValueTable>): ScopedValue {
  return {
    id: row.id,
    ownerId: row.owner_id,
    repoId: row.repo_id,
    name: row.name,
    data: row.data,
    createdUnix: row.created_unix,
    updatedUnix: row.updated_unix,
  };
}

// Both names resolve to ScopedValueTable; naming one of them lets Kysely type
// the query once for either table.
function table(name: ScopedValueTableName): 'secret' {
  return name as 'secret';
}

export const SCOPED_VALUE_COLUMNS = columnsOf<ScopedValueTable>()([
  'id',
  'owner_id',
  'repo_id',
  'name',
  'data',
  'created_unix',
  'updated_unix',
]);

/** The row of SCOPED_VALUE_COLUMNS's values from index `at` on: an object literal, one shape, no work per key. */
export function scopedValueRowFromValues(values: readonly unknown[], at: number): Selectable<ScopedValueTable> {
  return {
    id: values[at] as number,
    owner_id: values[at + 1] as number,
    repo_id: values[at + 2] as number,
    name: values[at + 3] as string,
    data: values[at + 4] as string,
    created_unix: values[at + 5] as number,
    updated_unix: values[at + 6] as number,
  };
}

/**
 * The lookup, compiled once per table and dialect (the shape: the table's
 * name): building and compiling it cost as much as running it. Rows as
 * arrays (array-rows.ts). Args: owner id, repository id, name.
 */
const SCOPED_VALUE = compiledArrayStatement((db, arg, shape) =>
  db
    .selectFrom(table(shape as ScopedValueTableName))
    .select(SCOPED_VALUE_COLUMNS)
    .where('owner_id', '=', arg<number>(0))
    .where('repo_id', '=', arg<number>(1))
    .where('name', '=', arg<string>(2)),
);

/** One value by name (an Actions variable is read on every job and by the API's GET). */
export async function findScopedValue(
  db: Queryable,
  name: ScopedValueTableName,
  key: ScopeColumns,
  valueName: string,
): Promise<ScopedValue | null> {
  const row = await SCOPED_VALUE.takeFirst(db, [key.ownerId, key.repoId, valueName], name);
  return row === undefined ? null : scopedValueFromRow(scopedValueRowFromValues(valuesOf(row), 0));
}

export async function deleteScopedValue(
  db: Queryable,
  name: ScopedValueTableName,
  key: ScopeColumns,
  valueName: string,
): Promise<boolean> {
  const result = await db
    .deleteFrom(table(name))
    .where('owner_id', '=', key.ownerId)
    .where('repo_id', '=', key.repoId)
    .where('name', '=', valueName)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

export async function countScopedValues(db: Queryable, name: ScopedValueTableName, key: ScopeColumns): Promise<number> {
  const row = await db
    .selectFrom(table(name))
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('owner_id', '=', key.ownerId)
    .where('repo_id', '=', key.repoId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * The values a job of a repository sees, by name, from its owner's rows
 * (repoId 0) and its own: the owner's first, overridden by the
 * repository's own; `valueOf` turns a row's stored data into its value.
 */
export function ownerThenRepositoryValues<R extends Pick<ScopedValue, 'repoId' | 'name'>>(
  rows: readonly R[],
  valueOf: (row: R) => string,
): Map<string, string> {
  const values = new Map<string, string>();
  for (const row of rows) if (row.repoId === 0) values.set(row.name, valueOf(row));
  for (const row of rows) if (row.repoId !== 0) values.set(row.name, valueOf(row));
  return values;
}

/** What a repository's jobs see: its own values and its owner's (user or organization), by id. */
export async function listScopedValuesForRepository(
  db: Queryable,
  name: ScopedValueTableName,
  ownerId: number,
  repoId: number,
): Promise<ScopedValue[]> {
  const rows = await FOR_REPOSITORY.execute(db, [ownerId, repoId], name);
  return rows.rows.map(scopedValueFromRow);
}

/** The table's name is the shape (0 owner id, 1 repository id): compiled once per table and dialect. */
const FOR_REPOSITORY = compiledStatement((db, arg, shape) =>
  db
    .selectFrom(table(shape as ScopedValueTableName))
    .selectAll()
    .where((eb) =>
      eb.or([
        eb.and([eb('owner_id', '=', arg<number>(0)), eb('repo_id', '=', 0)]),
        eb.and([eb('owner_id', '=', 0), eb('repo_id', '=', arg<number>(1))]),
      ]),
    )
    .orderBy('id'),
);
