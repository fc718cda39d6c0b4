// Repositories and their collaborators.
import { sql } from 'kysely';
import type { Selectable, Updateable } from 'kysely';
import { columnsOf, valuesOf } from './array-rows.ts';
import { compiledArrayStatement } from './compiled-statements.ts';
import { GuardRowCache } from './guard-row-cache.ts';
import type { Queryable } from './database.ts';
import { SCOPED_VALUE_COLUMNS, scopedValueFromRow, scopedValueRowFromValues } from './scoped-values.ts';
import type { ScopedValue } from './scoped-values.ts';
import type { RepositoryTable } from './tables.ts';
import {
  USER_COLUMNS,
  cannotBeStoredName,
  findAccountByName,
  userFromRow,
  userRowFromValues,
  visibilityFromCode,
} from './users.ts';
import type { AccountAccess, User } from './users.ts';

/** Repository units that can be switched on and off (Forgejo's repo_unit rows). */
export const REPO_UNITS = ['issues', 'wiki', 'pull_requests', 'projects', 'releases', 'packages', 'actions'] as const;
export type RepoUnit = (typeof REPO_UNITS)[number];

export interface Repository {
  id: number;
  ownerId: number;
  ownerName: string;
  name: string;
  lowerName: string;
  description: string;
  website: string;
  defaultBranch: string;
  objectFormatName: 'sha1' | 'sha256';
  isPrivate: boolean;
  isArchived: boolean;
  isEmpty: boolean;
  isTemplate: boolean;
  units: Readonly<Record<RepoUnit, boolean>>;
  archivedUnix: number;
  createdUnix: number;
  updatedUnix: number;
}

/**
 * What the repository guards decide with about a repository (services/permissions.ts,
 * http/guards.ts): a full Repository satisfies it; the GET of a repository
 * variable reads only these columns (findOwnerRepositoryAndVariable).
 */
export type RepositoryAccess = Pick<Repository, 'id' | 'ownerId' | 'name' | 'isPrivate' | 'isArchived' | 'units'>;

function repoFromRow(row: Selectable<RepositoryTable>): Repository {
  return {
    id: row.id,
    ownerId: row.owner_id,
    ownerName: row.owner_name,
    name: row.name,
    lowerName: row.lower_name,
    description: row.description,
    website: row.website,
    defaultBranch: row.default_branch,
    objectFormatName: row.object_format_name === 'sha256' ? 'sha256' : 'sha1',
    isPrivate: row.is_private === 1,
    isArchived: row.is_archived === 1,
    isEmpty: row.is_empty === 1,
    isTemplate: row.is_template === 1,
    units: {
      issues: row.has_issues === 1,
      wiki: row.has_wiki === 1,
      pull_requests: row.has_pull_requests === 1,
      projects: row.has_projects === 1,
      releases: row.has_releases === 1,
      packages: row.has_packages === 1,
      actions: row.has_actions === 1,
    },
    archivedUnix: row.archived_unix,
    createdUnix: row.created_unix,
    updatedUnix: row.updated_unix,
  };
}

export interface NewRepository {
  ownerId: number;
  ownerName: string;
  name: string;
  description: string;
  defaultBranch: string;
  objectFormatName: 'sha1' | 'sha256';
  isPrivate: boolean;
  isTemplate: boolean;
  nowSec: number;
}

export async function insertRepository(db: Queryable, repo: NewRepository): Promise<Repository> {
  const row = await db
    .insertInto('repository')
    .values({
      owner_id: repo.ownerId,
      owner_name: repo.ownerName,
      lower_name: repo.name.toLowerCase(),
      name: repo.name,
      description: repo.description,
      default_branch: repo.defaultBranch,
      object_format_name: repo.objectFormatName,
      is_private: repo.isPrivate ? 1 : 0,
      is_template: repo.isTemplate ? 1 : 0,
      created_unix: repo.nowSec,
      updated_unix: repo.nowSec,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return repoFromRow(row);
}

export async function findRepository(db: Queryable, ownerId: number, name: string): Promise<Repository | null> {
  if (cannotBeStoredName(name)) return null;
  const row = await db
    .selectFrom('repository')
    .selectAll()
    .where('owner_id', '=', ownerId)
    .where('lower_name', '=', name.toLowerCase())
    .executeTakeFirst();
  return row ? repoFromRow(row) : null;
}

/** The repository table's columns, for statements that read rows as arrays (array-rows.ts). */
export const REPOSITORY_COLUMNS = columnsOf<RepositoryTable>()([
  'id',
  'owner_id',
  'owner_name',
  'lower_name',
  'name',
  'description',
  'website',
  'default_branch',
  'object_format_name',
  'is_private',
  'is_archived',
  'is_empty',
  'is_template',
  'has_issues',
  'has_wiki',
  'has_pull_requests',
  'has_projects',
  'has_releases',
  'has_packages',
  'has_actions',
  'archived_unix',
  'created_unix',
  'updated_unix',
]);

/** The row of REPOSITORY_COLUMNS's values from index `at` on: an object literal, one shape, no work per key. */
export function repositoryRowFromValues(values: readonly unknown[], at: number): Selectable<RepositoryTable> {
  return {
    id: values[at] as number,
    owner_id: values[at + 1] as number,
    owner_name: values[at + 2] as string,
    lower_name: values[at + 3] as string,
    name: values[at + 4] as string,
    description: values[at + 5] as string,
    website: values[at + 6] as string,
    default_branch: values[at + 7] as string,
    object_format_name: values[at + 8] as string,
    is_private: values[at + 9] as number,
    is_archived: values[at + 10] as number,
    is_empty: values[at + 11] as number,
    is_template: values[at + 12] as number,
    has_issues: values[at + 13] as number,
    has_wiki: values[at + 14] as number,
    has_pull_requests: values[at + 15] as number,
    has_projects: values[at + 16] as number,
    has_releases: values[at + 17] as number,
    has_packages: values[at + 18] as number,
    has_actions: values[at + 19] as number,
    archived_unix: values[at + 20] as number,
    created_unix: values[at + 21] as number,
    updated_unix: values[at + 22] as number,
  };
}

/**
 * Built and compiled once (compiled-statements.ts): building it cost more than running it. Args: owner,
 * repository lower names. A row: the account's USER_COLUMNS, then the repository's REPOSITORY_COLUMNS
 * (prefixed r_: names must differ; all null without one), as an array (array-rows.ts).
 */
const OWNER_AND_REPOSITORY = compiledArrayStatement((db, arg) =>
  db
    .selectFrom('user')
    .leftJoin('repository', (join) =>
      join.onRef('repository.owner_id', '=', 'user.id').on('repository.lower_name', '=', arg<string>(1)),
    )
    .select(USER_COLUMNS.map((column) => `user.${column}` as const))
    .select(REPOSITORY_COLUMNS.map((column) => `repository.${column} as r_${column}` as const))
    .where('user.lower_name', '=', arg<string>(0)),
);
/** OWNER_AND_REPOSITORY's rows kept between requests on SQLite while exact (guard-row-cache.ts). */
const OWNER_AND_REPOSITORY_ROWS = new GuardRowCache(OWNER_AND_REPOSITORY);

/**
 * An account by name and its repository by name in one query (the
 * repository guard of every /repos/{owner}/{repo} route asks both): null
 * when there is no such account; `repo` null when it has no such repository.
 */
export async function findOwnerAndRepository(
  db: Queryable,
  ownerName: string,
  repoName: string,
): Promise<{ owner: User; repo: Repository | null } | null> {
  if (cannotBeStoredName(ownerName)) return null;
  if (cannotBeStoredName(repoName)) {
    const owner = await findAccountByName(db, ownerName);
    return owner === null ? null : { owner, repo: null };
  }
  const row = await OWNER_AND_REPOSITORY_ROWS.takeFirst(db, [ownerName.toLowerCase(), repoName.toLowerCase()]);
  if (row === undefined) return null;
  const values = valuesOf(row);
  const repoAt = USER_COLUMNS.length;
  return {
    owner: userFromRow(userRowFromValues(values, 0)),
    repo: values[repoAt] === null ? null : repoFromRow(repositoryRowFromValues(values, repoAt)),
  };
}

/**
 * The repository's flags the guards read, each a bit of one summed column
 * (r_flags) of the guard's row instead of a column each: a column costs the
 * read about as much to turn into a JavaScript value whatever it holds. A bit
 * is set exactly when its column is 1, as repoFromRow reads them, on either
 * database (plain CASE and addition, no dialect's boolean or bit operators).
 */
const ACCESS_FLAGS = {
  is_private: 1,
  is_archived: 2,
  has_issues: 4,
  has_wiki: 8,
  has_pull_requests: 16,
  has_projects: 32,
  has_releases: 64,
  has_packages: 128,
  has_actions: 256,
} as const;
type AccessFlag = keyof typeof ACCESS_FLAGS;

const ACCESS_FLAGS_SUM = sql<number>`(${sql.join(
  (Object.keys(ACCESS_FLAGS) as AccessFlag[]).map(
    (flag) => sql`case when ${sql.ref(`repository.${flag}`)} = 1 then ${sql.lit(ACCESS_FLAGS[flag])} else 0 end`,
  ),
  sql` + `,
)})`;

/**
 * The repository guard's row for the GET of one repository variable: of the
 * account and the repository only what the guards decide with (AccountAccess,
 * RepositoryAccess: 4 and 4 columns, not 25 and 23, the repository's nine
 * flags summed into one, ACCESS_FLAGS; turning a column into a JavaScript
 * value was most of this point read's cost), then the repository's
 * own Actions variable of a name (its SCOPED_VALUE_COLUMNS, all null without
 * one). Args: owner, repository lower names, the variable's stored
 * (upper-case) name. Rows as arrays, in the order of the select.
 */
const OWNER_REPOSITORY_ACCESS_AND_VARIABLE = compiledArrayStatement((db, arg) =>
  db
    .selectFrom('user')
    .leftJoin('repository', (join) =>
      join.onRef('repository.owner_id', '=', 'user.id').on('repository.lower_name', '=', arg<string>(1)),
    )
    .leftJoin('action_variable', (join) =>
      join
        .on('action_variable.owner_id', '=', 0)
        .onRef('action_variable.repo_id', '=', 'repository.id')
        .on('action_variable.name', '=', arg<string>(2)),
    )
    .select(['user.id', 'user.name', 'user.type', 'user.visibility'])
    .select(['repository.id as r_id', 'repository.owner_id as r_owner_id', 'repository.name as r_name'])
    .select(ACCESS_FLAGS_SUM.as('r_flags'))
    .select(SCOPED_VALUE_COLUMNS.map((column) => `action_variable.${column} as v_${column}` as const))
    .where('user.lower_name', '=', arg<string>(0)),
);
/** OWNER_REPOSITORY_ACCESS_AND_VARIABLE's rows kept between requests on SQLite while exact (guard-row-cache.ts). */
const OWNER_REPOSITORY_ACCESS_AND_VARIABLE_ROWS = new GuardRowCache(OWNER_REPOSITORY_ACCESS_AND_VARIABLE);
/** Where the repository's and the variable's values start in a row of OWNER_REPOSITORY_ACCESS_AND_VARIABLE. */
const ACCESS_REPO_AT = 4;
const ACCESS_VARIABLE_AT = ACCESS_REPO_AT + 4;

function accountAccessFromValues(values: readonly unknown[]): AccountAccess {
  return {
    id: values[0] as number,
    name: values[1] as string,
    isOrganization: values[2] === 1,
    visibility: visibilityFromCode(values[3] as number),
  };
}

function repositoryAccessFromValues(values: readonly unknown[], at: number): RepositoryAccess {
  const flags = Number(values[at + 3]);
  return {
    id: values[at] as number,
    ownerId: values[at + 1] as number,
    name: values[at + 2] as string,
    isPrivate: (flags & ACCESS_FLAGS.is_private) !== 0,
    isArchived: (flags & ACCESS_FLAGS.is_archived) !== 0,
    units: {
      issues: (flags & ACCESS_FLAGS.has_issues) !== 0,
      wiki: (flags & ACCESS_FLAGS.has_wiki) !== 0,
      pull_requests: (flags & ACCESS_FLAGS.has_pull_requests) !== 0,
      projects: (flags & ACCESS_FLAGS.has_projects) !== 0,
      releases: (flags & ACCESS_FLAGS.has_releases) !== 0,
      packages: (flags & ACCESS_FLAGS.has_packages) !== 0,
      actions: (flags & ACCESS_FLAGS.has_actions) !== 0,
    },
  };
}

/**
 * The account and repository as the repository guard needs them, and the
 * repository's variable `variableName` (as stored: upper-case), in one
 * statement, for the API's GET of a repository variable: one read instead of
 * the guard's and the handler's. Null when there is no such account; `repo`
 * null when it has no such repository; `variable` null when the repository
 * has no such variable (or there is no repository). Whoever calls this still
 * decides what the caller may see.
 */
export async function findOwnerRepositoryAndVariable(
  db: Queryable,
  ownerName: string,
  repoName: string,
  variableName: string,
): Promise<{ owner: AccountAccess; repo: RepositoryAccess | null; variable: ScopedValue | null } | null> {
  if (cannotBeStoredName(ownerName) || cannotBeStoredName(repoName)) {
    const found = await findOwnerAndRepository(db, ownerName, repoName);
    return found === null ? null : { ...found, variable: null };
  }
  const row = await OWNER_REPOSITORY_ACCESS_AND_VARIABLE_ROWS.takeFirst(db, [
    ownerName.toLowerCase(),
    repoName.toLowerCase(),
    variableName,
  ]);
  if (row === undefined) return null;
  const values = valuesOf(row);
  return {
    owner: accountAccessFromValues(values),
    repo: values[ACCESS_REPO_AT] === null ? null : repositoryAccessFromValues(values, ACCESS_REPO_AT),
    variable:
      values[ACCESS_VARIABLE_AT] === null
        ? null
        : scopedValueFromRow(scopedValueRowFromValues(values, ACCESS_VARIABLE_AT)),
  };
}

export async function findRepositoryById(db: Queryable, id: number): Promise<Repository | null> {
  const row = await db.selectFrom('repository').selectAll().where('id', '=', id).executeTakeFirst();
  return row ? repoFromRow(row) : null;
}

/** The most recently updated repositories, newest first (the web console's home page filters them by access). */
export async function listRecentRepositories(db: Queryable, limit: number): Promise<Repository[]> {
  const rows = await db
    .selectFrom('repository')
    .selectAll()
    .orderBy('updated_unix', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows.map(repoFromRow);
}

export interface RepositoryChanges {
  name?: string;
  description?: string;
  website?: string;
  defaultBranch?: string;
  isPrivate?: boolean;
  isArchived?: boolean;
  isEmpty?: boolean;
  isTemplate?: boolean;
  units?: Partial<Record<RepoUnit, boolean>>;
}

export async function updateRepository(
  db: Queryable,
  id: number,
  changes: RepositoryChanges,
  nowSec: number,
): Promise<void> {
  const set: Updateable<RepositoryTable> = { updated_unix: nowSec };
  if (changes.name !== undefined) {
    set.name = changes.name;
    set.lower_name = changes.name.toLowerCase();
  }
  if (changes.description !== undefined) set.description = changes.description;
  if (changes.website !== undefined) set.website = changes.website;
  if (changes.defaultBranch !== undefined) set.default_branch = changes.defaultBranch;
  if (changes.isPrivate !== undefined) set.is_private = changes.isPrivate ? 1 : 0;
  if (changes.isTemplate !== undefined) set.is_template = changes.isTemplate ? 1 : 0;
  if (changes.isEmpty !== undefined) set.is_empty = changes.isEmpty ? 1 : 0;
  if (changes.isArchived !== undefined) {
    set.is_archived = changes.isArchived ? 1 : 0;
    set.archived_unix = changes.isArchived ? nowSec : 0;
  }
  for (const [unit, enabled] of Object.entries(changes.units ?? {})) {
    if (enabled !== undefined) set[`has_${unit as RepoUnit}`] = enabled ? 1 : 0;
  }
  await db.updateTable('repository').set(set).where('id', '=', id).execute();
}

export async function deleteRepository(db: Queryable, id: number): Promise<void> {
  await db.deleteFrom('repository').where('id', '=', id).execute();
}

export async function upsertCollaborator(
  db: Queryable,
  repoId: number,
  userId: number,
  mode: number,
  nowSec: number,
): Promise<void> {
  await db
    .insertInto('collaboration')
    .values({ repo_id: repoId, user_id: userId, mode, created_unix: nowSec })
    .onConflict((oc) => oc.columns(['repo_id', 'user_id']).doUpdateSet({ mode }))
    .execute();
}

export async function deleteCollaborator(db: Queryable, repoId: number, userId: number): Promise<boolean> {
  const result = await db
    .deleteFrom('collaboration')
    .where('repo_id', '=', repoId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

export async function findCollaboratorMode(db: Queryable, repoId: number, userId: number): Promise<number | null> {
  const row = await db
    .selectFrom('collaboration')
    .select('mode')
    .where('repo_id', '=', repoId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return row ? row.mode : null;
}
