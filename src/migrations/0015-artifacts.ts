// Actions artifacts (Forgejo's action_artifact, models/actions/artifact.go):
// one row per uploaded artifact of the v4 protocol (`<name>.zip`). The bytes
// live in the artifact storage (modules/storage), named by `storage_path`;
// the row is the truth about whether they are complete (`status`).
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { isPostgres, withId } from './dialect.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Byte order, as for refs: names compare the same on both dialects.
  const textC = isPostgres(db) ? sql`text collate "C"` : 'text';

  await withId(db, db.schema.createTable('action_artifact'))
    .addColumn('run_id', 'bigint', (c) => c.notNull())
    // The action_run_job the uploading task ran (the `workflow_job_run_backend_id` of the v4 protocol).
    .addColumn('job_id', 'bigint', (c) => c.notNull())
    .addColumn('task_id', 'bigint', (c) => c.notNull())
    .addColumn('repo_id', 'bigint', (c) => c.notNull())
    .addColumn('owner_id', 'bigint', (c) => c.notNull())
    .addColumn('commit_sha', 'text', (c) => c.notNull())
    .addColumn('artifact_name', textC, (c) => c.notNull())
    .addColumn('artifact_path', textC, (c) => c.notNull())
    .addColumn('storage_path', 'text', (c) => c.notNull())
    .addColumn('file_size', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('file_compressed_size', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('content_encoding', 'text', (c) => c.notNull().defaultTo(''))
    // Bytes of blocks received and not yet committed: bounds what an upload may stage (GANTRY_ARTIFACT_MAX_SIZE).
    .addColumn('staged_size', 'bigint', (c) => c.notNull().defaultTo(0))
    // `sha256:<hex>` of the committed file ('' before the block list is committed).
    .addColumn('digest', 'text', (c) => c.notNull().defaultTo(''))
    // Forgejo's ArtifactStatus: 1 upload pending, 2 confirmed, 3 error, 4 expired, 5 pending deletion, 6 deleted.
    .addColumn('status', 'integer', (c) => c.notNull())
    .addColumn('created', 'bigint', (c) => c.notNull())
    .addColumn('updated', 'bigint', (c) => c.notNull())
    .addColumn('expired_unix', 'bigint', (c) => c.notNull())
    .execute();
  // One live artifact of a name per run: a second CreateArtifact of the name
  // reuses the row, as Forgejo does. Rows on their way out (expired, pending
  // deletion, deleted) keep their files' names until the retention pass has
  // removed them, so a new upload of the name gets a row of its own.
  await db.schema
    .createIndex('action_artifact_run_name_path_uq')
    .unique()
    .on('action_artifact')
    .columns(['run_id', 'artifact_name', 'artifact_path'])
    .where(sql.raw<boolean>('status in (1, 2)'))
    .execute();
  await db.schema.createIndex('action_artifact_run_id').on('action_artifact').columns(['run_id', 'id']).execute();
  // The repository's artifact list, newest first.
  await db.schema.createIndex('action_artifact_repo_id').on('action_artifact').columns(['repo_id', 'id']).execute();
  // The retention pass: confirmed rows past their expiry, and rows marked for deletion.
  await db.schema
    .createIndex('action_artifact_status_expired')
    .on('action_artifact')
    .columns(['status', 'expired_unix'])
    .execute();
}
