// Actions variables (Forgejo's `action_variable` table). Names arrive upper-cased.
import type { Selectable } from 'kysely';
import type { Queryable } from './database.ts';
import type { ScopeKey } from './secrets.ts';
import type { ActionVariableTable } from './tables.ts';

export interface ActionVariable {
  id: number;
  ownerId: number;
  repoId: number;
  name: string;
  data: string;
  createdUnix: number;
  updatedUnix: number;
}

function variableFromRow(row: Selectable<ActionVariableTable>): ActionVariable {
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

/** Inserts a variable; a name taken in the scope is a unique violation (see isUniqueViolation). */
export async function insertVariable(db: Queryable, key: ScopeKey, name: string, data: string, nowSec: number): Promise<ActionVariable> {
  const row = await db
    .insertInto('action_variable')
    .values({ owner_id: key.ownerId, repo_id: key.repoId, name, data, created_unix: nowSec, updated_unix: nowSec })
    .returningAll()
    .executeTakeFirstOrThrow();
  return variableFromRow(row);
}

export async function findVariable(db: Queryable, key: ScopeKey, name: string): Promise<ActionVariable | null> {
  const row = await db
    .selectFrom('action_variable')
    .selectAll()
    .where('owner_id', '=', key.ownerId)
    .where('repo_id', '=', key.repoId)
    .where('name', '=', name)
    .executeTakeFirst();
  return row ? variableFromRow(row) : null;
}

/** Renames and/or sets the value of the variable `id`; false when it no longer exists. */
export async function updateVariable(db: Queryable, id: number, name: string, data: string, nowSec: number): Promise<boolean> {
  const result = await db.updateTable('action_variable').set({ name, data, updated_unix: nowSec }).where('id', '=', id).executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export async function deleteVariable(db: Queryable, key: ScopeKey, name: string): Promise<boolean> {
  const result = await db
    .deleteFrom('action_variable')
    .where('owner_id', '=', key.ownerId)
    .where('repo_id', '=', key.repoId)
    .where('name', '=', name)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

export async function countVariables(db: Queryable, key: ScopeKey): Promise<number> {
  const row = await db
    .selectFrom('action_variable')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('owner_id', '=', key.ownerId)
    .where('repo_id', '=', key.repoId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** One page of a scope's variables ordered by name, then id (Forgejo's order). */
export async function listVariables(db: Queryable, key: ScopeKey, limit: number, offset: number): Promise<ActionVariable[]> {
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
  return rows.map(variableFromRow);
}

/** The variables a repository's jobs see: its own and its owner's. */
export async function listVariablesForRepository(db: Queryable, ownerId: number, repoId: number): Promise<ActionVariable[]> {
  const rows = await db
    .selectFrom('action_variable')
    .selectAll()
    .where((eb) =>
      eb.or([
        eb.and([eb('owner_id', '=', ownerId), eb('repo_id', '=', 0)]),
        eb.and([eb('owner_id', '=', 0), eb('repo_id', '=', repoId)]),
      ]),
    )
    .orderBy('id')
    .execute();
  return rows.map(variableFromRow);
}

export async function deleteVariablesOfScope(db: Queryable, key: ScopeKey): Promise<void> {
  await db.deleteFrom('action_variable').where('owner_id', '=', key.ownerId).where('repo_id', '=', key.repoId).execute();
}
