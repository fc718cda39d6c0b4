// Actions secrets and variables at user, organization and repository scope
// (Forgejo's `secret` and `action_variable` tables). A row belongs to exactly
// one scope: user/org rows have owner_id set and repo_id 0, repository rows
// owner_id 0 and repo_id set. Zeros rather than NULLs keep the unique index
// effective on both dialects (NULLs never collide). No foreign keys: the
// services delete a scope's rows in the transaction that deletes the scope.
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { isPostgres, withId } from './dialect.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Byte order for names on PostgreSQL too, so lists sort the same on both
  // dialects whatever the cluster's locale (SQLite compares bytes).
  const nameType = isPostgres(db) ? sql`text collate "C"` : 'text';
  // `data` holds the AES-GCM ciphertext ("v1:<key id>:<base64>"), never the value.
  await withId(db, db.schema.createTable('secret'))
    .addColumn('owner_id', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('repo_id', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('name', nameType, (c) => c.notNull())
    .addColumn('data', 'text', (c) => c.notNull())
    .addColumn('created_unix', 'bigint', (c) => c.notNull())
    .addColumn('updated_unix', 'bigint', (c) => c.notNull())
    .execute();
  // Also serves listing a scope and deleting it (owner_id, repo_id prefix).
  await db.schema
    .createIndex('secret_owner_repo_name_uq')
    .unique()
    .on('secret')
    .columns(['owner_id', 'repo_id', 'name'])
    .execute();

  await withId(db, db.schema.createTable('action_variable'))
    .addColumn('owner_id', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('repo_id', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('name', nameType, (c) => c.notNull())
    .addColumn('data', 'text', (c) => c.notNull())
    .addColumn('created_unix', 'bigint', (c) => c.notNull())
    .addColumn('updated_unix', 'bigint', (c) => c.notNull())
    .execute();
  // Lists are ordered by name within a scope: this index gives that order directly.
  await db.schema
    .createIndex('action_variable_owner_repo_name_uq')
    .unique()
    .on('action_variable')
    .columns(['owner_id', 'repo_id', 'name'])
    .execute();
}
