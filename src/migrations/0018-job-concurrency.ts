// Job-level concurrency groups (Gitea 1.26: models/actions/run_job.go
// RawConcurrency, ConcurrencyGroup, ConcurrencyCancel; the rules are in
// services/actions/job-concurrency.ts). A job that declares `concurrency:`
// keeps it, with the contexts known when its run was created, until it
// becomes ready; then its group (lowercased) and cancel flag are stored, and a
// job that must wait for another member of its group is stored `blocked` with
// `group_held` = 1 (out of the claimable set, shown `blocked`). A group that
// does not evaluate fails the job with the reason in `concurrency_error`.
// `action_run.job_concurrency` = 1 when some job of the run declares one.
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { isPostgres } from './dialect.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Byte order, as action_run.concurrency_group: one group compares equal on both dialects.
  const textC = isPostgres(db) ? sql`text collate "C"` : 'text';
  await db.schema
    .alterTable('action_run')
    .addColumn('job_concurrency', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('action_run_job')
    .addColumn('raw_concurrency', 'text', (c) => c.notNull().defaultTo(''))
    .execute();
  await db.schema
    .alterTable('action_run_job')
    .addColumn('concurrency_group', textC, (c) => c.notNull().defaultTo(''))
    .execute();
  await db.schema
    .alterTable('action_run_job')
    .addColumn('concurrency_cancel', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('action_run_job')
    .addColumn('group_held', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .alterTable('action_run_job')
    .addColumn('concurrency_error', 'text', (c) => c.notNull().defaultTo(''))
    .execute();
  // The members of one job group, oldest first.
  await db.schema
    .createIndex('action_run_job_repo_concurrency_group')
    .on('action_run_job')
    .columns(['repo_id', 'concurrency_group', 'id'])
    .execute();
}
