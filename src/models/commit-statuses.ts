// Commit statuses: appending a status with its per-(repository, sha) number,
// the filtered and sorted list of one sha, and the latest status per context
// (Forgejo's models/git/commit_status.go).
import { createHash } from 'node:crypto';
import type { Selectable } from 'kysely';
import { sql } from 'kysely';
import type { Queryable, Tx } from './database.ts';
import type { CommitStatusTable } from './tables.ts';

export interface CommitStatus {
  /** Global row id (internal; the API shows `index`). */
  rowId: number;
  repoId: number;
  sha: string;
  index: number;
  state: string;
  targetUrl: string;
  description: string;
  context: string;
  creatorId: number;
  created: number;
  updated: number;
}

export interface NewCommitStatus {
  repoId: number;
  sha: string;
  state: string;
  targetUrl: string;
  description: string;
  context: string;
  creatorId: number;
}

/** Forgejo's list sorts (routers/api/v1/repo/status.go); anything else is newest first. */
export type StatusSort = 'oldest' | 'recentupdate' | 'leastupdate' | 'leastindex' | 'highestindex' | '';

export interface StatusListOptions {
  /** Only statuses in this state (already checked to be one Forgejo filters on). */
  state?: string;
  sort: StatusSort;
  offset: number;
  limit: number;
}

function fromRow(row: Selectable<CommitStatusTable>): CommitStatus {
  return {
    rowId: Number(row.id),
    repoId: Number(row.repo_id),
    sha: row.sha,
    index: Number(row.index_in_sha),
    state: row.state,
    targetUrl: row.target_url,
    description: row.description,
    context: row.context,
    creatorId: Number(row.creator_id),
    created: Number(row.created),
    updated: Number(row.updated),
  };
}

/** Forgejo's HashCommitStatusContext: hex SHA-1 of the context. */
export function contextHash(context: string): string {
  return createHash('sha1').update(context).digest('hex');
}

/**
 * Takes the next number of (repository, sha). Must run inside the transaction
 * that inserts the status: the upsert locks the counter row until commit, so
 * concurrent writers queue behind it and a rollback returns the number.
 */
async function nextStatusIndex(tx: Queryable, repoId: number, sha: string): Promise<number> {
  const row = await tx
    .insertInto('commit_status_index')
    .values({ repo_id: repoId, sha, max_index: 1 })
    .onConflict((oc) =>
      oc.columns(['repo_id', 'sha']).doUpdateSet({ max_index: sql<number>`commit_status_index.max_index + 1` }),
    )
    .returning('max_index')
    .executeTakeFirstOrThrow();
  return Number(row.max_index);
}

/** Appends a status. Call inside a transaction. `now` in Unix seconds. */
export async function insertCommitStatus(tx: Tx, status: NewCommitStatus, now: number): Promise<CommitStatus> {
  const index = await nextStatusIndex(tx, status.repoId, status.sha);
  const row = await tx
    .insertInto('commit_status')
    .values({
      repo_id: status.repoId,
      sha: status.sha,
      index_in_sha: index,
      state: status.state,
      target_url: status.targetUrl,
      description: status.description,
      context: status.context,
      context_hash: contextHash(status.context),
      creator_id: status.creatorId,
      created: now,
      updated: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return fromRow(row);
}

/** The statuses of one sha, one page, and how many match in all. */
export async function listCommitStatuses(
  db: Queryable,
  repoId: number,
  sha: string,
  options: StatusListOptions,
): Promise<{ statuses: CommitStatus[]; total: number }> {
  let base = db.selectFrom('commit_status').where('repo_id', '=', repoId).where('sha', '=', sha);
  if (options.state !== undefined) base = base.where('state', '=', options.state);
  const counted = await base.select((eb) => eb.fn.countAll<number | string>().as('n')).executeTakeFirstOrThrow();
  // Rows created in the same second keep their index order, in the sort's direction.
  const [column, direction] = (
    {
      oldest: ['created', 'asc'],
      recentupdate: ['updated', 'desc'],
      leastupdate: ['updated', 'asc'],
      // Forgejo's names are inverted (leastindex sorts index DESC): kept as Forgejo answers.
      leastindex: ['index_in_sha', 'desc'],
      highestindex: ['index_in_sha', 'asc'],
      '': ['created', 'desc'],
    } as const
  )[options.sort];
  const rows = await base
    .selectAll()
    .orderBy(column, direction)
    .orderBy('index_in_sha', direction)
    .offset(options.offset)
    .limit(options.limit)
    .execute();
  return { statuses: rows.map(fromRow), total: Number(counted.n) };
}

/** The latest status of each context of one sha, newest context first (Forgejo's GetLatestCommitStatus), one page, and how many contexts. */
export async function latestCommitStatuses(
  db: Queryable,
  repoId: number,
  sha: string,
  page?: { offset: number; limit: number },
): Promise<{ statuses: CommitStatus[]; total: number }> {
  const latest = db
    .selectFrom('commit_status')
    .select((eb) => eb.fn.max('index_in_sha').as('latest'))
    .where('repo_id', '=', repoId)
    .where('sha', '=', sha)
    .groupBy('context_hash');
  const counted = await db
    .selectFrom(latest.as('l'))
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow();
  let query = db
    .selectFrom('commit_status')
    .selectAll()
    .where('repo_id', '=', repoId)
    .where('sha', '=', sha)
    .where('index_in_sha', 'in', latest)
    .orderBy('index_in_sha', 'desc');
  if (page) query = query.offset(page.offset).limit(page.limit);
  const rows = await query.execute();
  return { statuses: rows.map(fromRow), total: Number(counted.n) };
}

/** The latest status of one context of a sha, or null. */
export async function latestStatusOfContext(
  db: Queryable,
  repoId: number,
  sha: string,
  context: string,
): Promise<CommitStatus | null> {
  const row = await db
    .selectFrom('commit_status')
    .selectAll()
    .where('repo_id', '=', repoId)
    .where('sha', '=', sha)
    .where('context_hash', '=', contextHash(context))
    .orderBy('index_in_sha', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row ? fromRow(row) : null;
}
