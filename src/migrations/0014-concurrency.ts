// Concurrency groups (Forgejo 15: models/actions/run.go ConcurrencyGroup,
// ConcurrencyType; services/actions/workflows.go ConfigureActionRunConcurrency).
// A run stores its evaluated group (lowercased: groups are case-insensitive)
// and its mode (0 unlimited, 1 queue behind, 2 cancel in progress: Forgejo's
// ConcurrencyMode numbers). A job of a run that queues behind an older member
// of its group is stored `blocked` with `concurrency_held` = 1: out of the
// claimable set (FetchTask takes only `waiting` jobs) and shown as `waiting`.
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { isPostgres } from './dialect.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Byte order, as workflow_id and ref: one group compares equal on both dialects.
  const textC = isPostgres(db) ? sql`text collate "C"` : 'text';
  await db.schema
    .alterTable('action_run')
    .addColumn('concurrency_group', textC, (c) => c.notNull().defaultTo(''))
    .execute();
  await db.schema
    .alterTable('action_run')
    .addColumn('concurrency_type', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('action_run_job')
    .addColumn('concurrency_held', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  // The unfinished members of one group, oldest first (Forgejo's index(concurrency)).
  await db.schema
    .createIndex('action_run_repo_concurrency_group')
    .on('action_run')
    .columns(['repo_id', 'concurrency_group', 'id'])
    .execute();
}
