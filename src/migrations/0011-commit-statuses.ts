// Commit statuses (Forgejo's commit_status and commit_status_index,
// models/git/commit_status.go): rows are only ever appended, each with the
// next number of its (repository, sha) — the `id` the API shows.
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { isPostgres, withId } from './dialect.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Byte order, as for refs: shas and contexts compare the same on both dialects.
  const textC = isPostgres(db) ? sql`text collate "C"` : 'text';

  await withId(db, db.schema.createTable('commit_status'))
    .addColumn('repo_id', 'bigint', (c) => c.notNull())
    .addColumn('sha', textC, (c) => c.notNull())
    // Forgejo's column is `index`, a reserved word in SQL.
    .addColumn('index_in_sha', 'bigint', (c) => c.notNull())
    // Any string: Forgejo 15 stores the state it is given unchecked.
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('target_url', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull())
    .addColumn('context', 'text', (c) => c.notNull())
    // SHA-1 of the context, as Forgejo: a fixed-size key for "latest per context".
    .addColumn('context_hash', textC, (c) => c.notNull())
    .addColumn('creator_id', 'bigint', (c) => c.notNull())
    .addColumn('created', 'bigint', (c) => c.notNull())
    .addColumn('updated', 'bigint', (c) => c.notNull())
    .execute();
  // The lists (by index) and the uniqueness of the per-sha number.
  await db.schema
    .createIndex('commit_status_repo_sha_index_uq')
    .unique()
    .on('commit_status')
    .columns(['repo_id', 'sha', 'index_in_sha'])
    .execute();
  // The latest status of each context: the highest index per (repo, sha, context_hash).
  await db.schema
    .createIndex('commit_status_repo_sha_context')
    .on('commit_status')
    .columns(['repo_id', 'sha', 'context_hash', 'index_in_sha'])
    .execute();

  // The last number handed out per (repository, sha). Incremented in the
  // transaction that inserts the status, so numbers are gap-free and
  // concurrent writers queue on the row lock (as action_run_index, 0003).
  await db.schema
    .createTable('commit_status_index')
    .addColumn('repo_id', 'bigint', (c) => c.notNull())
    .addColumn('sha', textC, (c) => c.notNull())
    .addColumn('max_index', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('commit_status_index_pk', ['repo_id', 'sha'])
    .execute();
}
