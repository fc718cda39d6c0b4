// Actions variables (Forgejo's `action_variable` table). Names arrive upper-cased.
import type { Queryable } from './database.ts';
import { scopedValueFromRow } from './scoped-values.ts';
import type { ScopeColumns } from '../modules/scope.ts';
import type { ScopedValue } from './scoped-values.ts';

/** Inserts a variable; a name taken in the scope is a unique violation (see isUniqueViolation). */
export async function insertVariable(
  db: Queryable,
  key: ScopeColumns,
  name: string,
  data: string,
  nowSec: number,
): Promise<ScopedValue> {
  const row = await db
    .insertInto('action_variable')
    .values({ owner_id: key.ownerId, repo_id: key.repoId, name, data, created_unix: nowSec, updated_unix: nowSec })
    .returningAll()
    .executeTakeFirstOrThrow();
  return scopedValueFromRow(row);
}

/** Renames and/or sets the value of the variable `id`; false when it no longer exists. */
export async function updateVariable(
  db: Queryable,
  id: number,
  name: string,
  data: string,
  nowSec: number,
): Promise<boolean> {
  const result = await db
    .updateTable('action_variable')
    .set({ name, data, updated_unix: nowSec })
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** One page of a scope's variables ordered by name, then id (Forgejo's order). */
export async function listVariables(
  db: Queryable,
  key: ScopeColumns,
  limit: number,
  offset: number,
): Promise<ScopedValue[]> {
  const rows = await db
    .selectFrom('action_variable')
    .selectAll()
    .where('owner_id', '=', key.ownerId)
    .where('repo_id', '=', key.repoId)
    .orderBy('name')
    .orderBy('id')
    .limit(limit)
    .offset(offset)
    .execute();
  return rows.map(scopedValueFromRow);
}
