// Repositories and their collaborators.
import type { Selectable, Updateable } from 'kysely';
import { compiledStatement } from './compiled-statements.ts';
import type { Queryable } from './database.ts';
import type { RepositoryTable, UserTable } from './tables.ts';
import { cannotBeStoredName, findAccountByName, userFromRow } from './users.ts';
import type { User } from './users.ts';

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

/** A row of that query: the account's columns, and the repository's prefixed with r_ (null without one). */
type OwnerAndRepositoryRow = Selectable<UserTable> & {
  [K in keyof Selectable<RepositoryTable> as `r_${K}`]: Selectable<RepositoryTable>[K] | null;
};

/** Built and compiled once (compiled-statements.ts): building it cost more than running it. Args: owner, repository lower names. */
const OWNER_AND_REPOSITORY = compiledStatement<OwnerAndRepositoryRow>((db, arg) =>
  db
    .selectFrom('user')
    .leftJoin('repository', (join) =>
      join.onRef('repository.owner_id', '=', 'user.id').on('repository.lower_name', '=', arg<string>(1)),
    )
    .selectAll('user')
    .select([
      'repository.id as r_id',
      'repository.owner_id as r_owner_id',
      'repository.owner_name as r_owner_name',
      'repository.lower_name as r_lower_name',
      'repository.name as r_name',
      'repository.description as r_description',
      'repository.website as r_website',
      'repository.default_branch as r_default_branch',
      'repository.object_format_name as r_object_format_name',
      'repository.is_private as r_is_private',
      'repository.is_archived as r_is_archived',
      'repository.is_empty as r_is_empty',
      'repository.is_template as r_is_template',
      'repository.has_issues as r_has_issues',
      'repository.has_wiki as r_has_wiki',
      'repository.has_pull_requests as r_has_pull_requests',
      'repository.has_projects as r_has_projects',
      'repository.has_releases as r_has_releases',
      'repository.has_packages as r_has_packages',
      'repository.has_actions as r_has_actions',
      'repository.archived_unix as r_archived_unix',
      'repository.created_unix as r_created_unix',
      'repository.updated_unix as r_updated_unix',
    ])
    .where('user.lower_name', '=', arg<string>(0)),
);

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
  const row = await OWNER_AND_REPOSITORY.takeFirst(db, [ownerName.toLowerCase(), repoName.toLowerCase()]);
  if (row === undefined) return null;
  // The account read straight from the row: a rest copy of its columns (48 keys less 23) cost as much as the query.
  return { owner: userFromRow(row), repo: row.r_id === null ? null : repoFromRow(unprefixedRepository(row)) };
}

/** The repository columns of an owner-and-repository row (r_…, not null when r_id is not), as repoFromRow reads them. */
function unprefixedRepository(row: OwnerAndRepositoryRow): Selectable<RepositoryTable> {
  return {
    id: row.r_id as number,
    owner_id: row.r_owner_id as number,
    owner_name: row.r_owner_name as string,
    lower_name: row.r_lower_name as string,
    name: row.r_name as string,
    description: row.r_description as string,
    website: row.r_website as string,
    default_branch: row.r_default_branch as string,
    object_format_name: row.r_object_format_name as string,
    is_private: row.r_is_private as number,
    is_archived: row.r_is_archived as number,
    is_empty: row.r_is_empty as number,
    is_template: row.r_is_template as number,
    has_issues: row.r_has_issues as number,
    has_wiki: row.r_has_wiki as number,
    has_pull_requests: row.r_has_pull_requests as number,
    has_projects: row.r_has_projects as number,
    has_releases: row.r_has_releases as number,
    has_packages: row.r_has_packages as number,
    has_actions: row.r_has_actions as number,
    archived_unix: row.r_archived_unix as number,
    created_unix: row.r_created_unix as number,
    updated_unix: row.r_updated_unix as number,
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
