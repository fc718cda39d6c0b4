// Queries shared by the two tables of Actions scope values, `secret` and
// `action_variable`: same columns, same unique (owner_id, repo_id, name) index.
import type { CompiledQuery, Selectable } from 'kysely';
import type { ScopeColumns } from '../modules/scope.ts';
import { compiledStatement } from './compiled-statements.ts';
import { isPostgres } from './database.ts';
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

/** Parameter stand-ins of the compiled lookup (ids are never negative; names never hold NUL). */
const OWNER_ID_PARAM = -1;
const REPO_ID_PARAM = -2;
const NAME_PARAM = '\0name';
/** The lookup compiled once per table and dialect: building and compiling it cost as much as running it. */
const compiledLookups = new Map<string, CompiledQuery>();

/** One value by name (an Actions variable is read on every job and by the API's GET). */
export async function findScopedValue(
  db: Queryable,
  name: ScopedValueTableName,
  key: ScopeColumns,
  valueName: string,
): Promise<ScopedValue | null> {
  const cacheKey = `${name}:${isPostgres(db) ? 'pg' : 'sqlite'}`;
  let compiled = compiledLookups.get(cacheKey);
  if (compiled === undefined) {
    compiled = db
      .selectFrom(table(name))
      .selectAll()
      .where('owner_id', '=', OWNER_ID_PARAM)
      .where('repo_id', '=', REPO_ID_PARAM)
      .where('name', '=', NAME_PARAM)
      .compile();
    compiledLookups.set(cacheKey, compiled);
  }
  const parameters = compiled.parameters.map((p) =>
    p === OWNER_ID_PARAM ? key.ownerId : p === REPO_ID_PARAM ? key.repoId : p === NAME_PARAM ? valueName : p,
  );
  const row = (await db.executeQuery<Selectable<ScopedValueTable>>({ ...compiled, parameters })).rows[0];
  return row ? scopedValueFromRow(row) : null;
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
