// Actions variables (Forgejo's `action_variable` table). Names arrive upper-cased.
import type { Queryable } from './database.ts';
import { compiledStatement } from './compiled-statements.ts';
import { countScopedValues, scopedValueFromRow } from './scoped-values.ts';
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

/**
 * One page of a scope's variables ordered by name, then id (Forgejo's order),
 * each row with how many the scope has (`count(*) over ()` counts the rows
 * before LIMIT and OFFSET): the page and its total in one read. Built and
 * compiled once per dialect (compiled-statements.ts). Args: owner id,
 * repository id, limit, offset.
 */
const VARIABLES_PAGE = compiledStatement((db, arg) =>
  db
    .selectFrom('action_variable')
    .selectAll()
    .select((eb) => eb.fn.countAll<number | string>().over().as('total'))
    .where('owner_id', '=', arg<number>(0))
    .where('repo_id', '=', arg<number>(1))
    .orderBy('name')
    .orderBy('id')
    .limit(arg<number>(2))
    .offset(arg<number>(3)),
);

/**
 * One page of a scope's variables and the scope's count, read together; an
 * empty page (an empty scope, or a page past the end) has no row to carry the
 * count, so the count is read alone then.
 */
export async function listVariablesPage(
  db: Queryable,
  key: ScopeColumns,
  limit: number,
  offset: number,
): Promise<{ variables: ScopedValue[]; total: number }> {
  const { rows } = await VARIABLES_PAGE.execute(db, [key.ownerId, key.repoId, limit, offset]);
  const first = rows[0];
  if (first === undefined) return { variables: [], total: await countScopedValues(db, 'action_variable', key) };
  return { variables: rows.map(scopedValueFromRow), total: Number(first.total) };
}
