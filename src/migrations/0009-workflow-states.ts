// Workflows a repository administrator disabled (Gitea's `DisabledWorkflows`
// list in the Actions unit config, models/repo/repo_unit_actions.go; Forgejo
// keeps the same list for its web enable/disable buttons). One row per
// disabled workflow: a row present means `disabled_manually`, no row means
// `active`, so enabling deletes the row and nothing grows with history.
//
// `workflow_id` is the run's workflow_id: the file's path relative to the
// workflows directory (`ci.yml`, `sub/x.yml`), whichever directory holds it,
// as Gitea keys the list by file name alone.
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { isPostgres, withId } from './dialect.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Byte order, as action_run.workflow_id: the same file name compares equal on both dialects.
  const textC = isPostgres(db) ? sql`text collate "C"` : 'text';
  await withId(db, db.schema.createTable('action_workflow_state'))
    .addColumn('repo_id', 'bigint', (c) => c.notNull())
    .addColumn('workflow_id', textC, (c) => c.notNull())
    .addColumn('created', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('action_workflow_state_repo_workflow_uq')
    .unique()
    .on('action_workflow_state')
    .columns(['repo_id', 'workflow_id'])
    .execute();
}
