// Scheduled workflows (`on: schedule`). One row per `cron:` entry of a
// workflow of the default branch: Forgejo keeps a row per workflow
// (action_schedule: title, ref, commit, content) and one per entry
// (action_schedule_spec: spec, next, prev, time zone), models/actions/
// schedule.go and schedule_spec.go; the per-workflow columns are repeated on
// each entry here, so firing reads one row and registration writes one table.
//
// `next` and `prev` are Unix seconds, as Forgejo's. The `next` index is what
// the scheduler of every process polls (`next <= now`, oldest first), so a
// pass costs the due rows, not the repositories or specs that are not due.
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { isPostgres, withId } from './dialect.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Byte order, as action_run.workflow_id: the same file name compares equal on both dialects.
  const textC = isPostgres(db) ? sql`text collate "C"` : 'text';
  await withId(db, db.schema.createTable('action_schedule'))
    .addColumn('repo_id', 'bigint', (c) => c.notNull())
    .addColumn('owner_id', 'bigint', (c) => c.notNull())
    .addColumn('workflow_id', textC, (c) => c.notNull())
    .addColumn('workflow_directory', 'text', (c) => c.notNull())
    // The default branch as a full ref, and the commit the workflow was read at.
    .addColumn('ref', 'text', (c) => c.notNull())
    .addColumn('commit_sha', 'text', (c) => c.notNull())
    // The `cron:` text as written (github.event.schedule) and the `timezone:` key ('' when absent).
    .addColumn('spec', 'text', (c) => c.notNull())
    .addColumn('time_zone', 'text', (c) => c.notNull())
    .addColumn('next', 'bigint', (c) => c.notNull())
    .addColumn('prev', 'bigint', (c) => c.notNull())
    .addColumn('created', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('action_schedule_next').on('action_schedule').columns(['next']).execute();
  await db.schema
    .createIndex('action_schedule_repo_workflow')
    .on('action_schedule')
    .columns(['repo_id', 'workflow_id'])
    .execute();
}
