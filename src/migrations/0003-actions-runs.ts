// Workflow runs, their jobs and the tasks runners execute (Forgejo's
// action_run, action_run_job, action_task), the per-repository run counter and
// the per-repository run counts that keep `total_count` cheap.
//
// Times are Unix seconds (0 = never). Statuses are Forgejo's numeric values
// (unknown 0 … blocked 7). No foreign keys, as elsewhere: the services delete a
// repository's rows in the transaction that deletes the repository.
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { isPostgres, withId } from './dialect.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Byte order, as for secret names: refs and file names compare the same on both dialects.
  const textC = isPostgres(db) ? sql`text collate "C"` : 'text';

  await withId(db, db.schema.createTable('action_run'))
    .addColumn('repo_id', 'bigint', (c) => c.notNull())
    .addColumn('owner_id', 'bigint', (c) => c.notNull())
    // Forgejo's column is `index`, a reserved word in SQL.
    .addColumn('index_in_repo', 'bigint', (c) => c.notNull())
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('workflow_id', textC, (c) => c.notNull())
    .addColumn('workflow_directory', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('trigger_user_id', 'bigint', (c) => c.notNull())
    .addColumn('schedule_id', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('ref', textC, (c) => c.notNull())
    .addColumn('commit_sha', textC, (c) => c.notNull())
    .addColumn('is_fork_pull_request', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('need_approval', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('approved_by', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('event', textC, (c) => c.notNull())
    .addColumn('event_payload', 'text', (c) => c.notNull())
    .addColumn('trigger_event', 'text', (c) => c.notNull())
    .addColumn('status', 'integer', (c) => c.notNull())
    // Why the run failed before any job could start (a workflow that does not parse).
    .addColumn('pre_execution_error', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('started', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('stopped', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('previous_duration', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('created', 'bigint', (c) => c.notNull())
    .addColumn('updated', 'bigint', (c) => c.notNull())
    .execute();
  // Run numbers are unique per repository; this index also serves `run_number=`.
  await db.schema
    .createIndex('action_run_repo_index_uq')
    .unique()
    .on('action_run')
    .columns(['repo_id', 'index_in_repo'])
    .execute();
  // The runs list is `repo_id = ? [AND filter] ORDER BY id DESC`: one index per
  // filter, each ending in id, so a page is an index range read backwards.
  await db.schema.createIndex('action_run_repo_id').on('action_run').columns(['repo_id', 'id']).execute();
  await db.schema
    .createIndex('action_run_repo_status_id')
    .on('action_run')
    .columns(['repo_id', 'status', 'id'])
    .execute();
  await db.schema
    .createIndex('action_run_repo_event_id')
    .on('action_run')
    .columns(['repo_id', 'event', 'id'])
    .execute();
  await db.schema
    .createIndex('action_run_repo_sha_id')
    .on('action_run')
    .columns(['repo_id', 'commit_sha', 'id'])
    .execute();
  await db.schema.createIndex('action_run_repo_ref_id').on('action_run').columns(['repo_id', 'ref', 'id']).execute();
  await db.schema
    .createIndex('action_run_repo_workflow_id')
    .on('action_run')
    .columns(['repo_id', 'workflow_id', 'id'])
    .execute();

  // The last run number handed out per repository. Incremented in the
  // transaction that inserts the run, so numbers are gap-free: a rolled-back
  // insert rolls the increment back too, and the row lock serialises writers.
  await db.schema
    .createTable('action_run_index')
    .addColumn('repo_id', 'bigint', (c) => c.primaryKey())
    .addColumn('max_index', 'bigint', (c) => c.notNull())
    .execute();

  // How many runs a repository has per (workflow, ref, event, status), kept in
  // step with action_run by the model. A runs list whose filters are only
  // these columns counts by summing a handful of rows instead of counting a
  // million index entries.
  await withId(db, db.schema.createTable('action_run_count'))
    .addColumn('repo_id', 'bigint', (c) => c.notNull())
    .addColumn('workflow_id', textC, (c) => c.notNull())
    .addColumn('ref', textC, (c) => c.notNull())
    .addColumn('event', textC, (c) => c.notNull())
    .addColumn('status', 'integer', (c) => c.notNull())
    .addColumn('count', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('action_run_count_key_uq')
    .unique()
    .on('action_run_count')
    .columns(['repo_id', 'workflow_id', 'ref', 'event', 'status'])
    .execute();

  await withId(db, db.schema.createTable('action_run_job'))
    .addColumn('run_id', 'bigint', (c) => c.notNull())
    .addColumn('repo_id', 'bigint', (c) => c.notNull())
    .addColumn('owner_id', 'bigint', (c) => c.notNull())
    .addColumn('commit_sha', 'text', (c) => c.notNull())
    .addColumn('is_fork_pull_request', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('attempt', 'bigint', (c) => c.notNull().defaultTo(0))
    // Forgejo's handle: a UUID naming the current attempt (FetchSingleTask, jobs search).
    .addColumn('handle', 'text', (c) => c.notNull())
    .addColumn('workflow_payload', 'text', (c) => c.notNull())
    .addColumn('job_id', 'text', (c) => c.notNull())
    .addColumn('needs', 'text', (c) => c.notNull())
    .addColumn('runs_on', 'text', (c) => c.notNull())
    .addColumn('has_if', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('task_id', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('status', 'integer', (c) => c.notNull())
    .addColumn('started', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('stopped', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('created', 'bigint', (c) => c.notNull())
    .addColumn('updated', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('action_run_job_run_id').on('action_run_job').columns(['run_id', 'id']).execute();
  // Runners look for waiting jobs oldest first; the jobs search lists waiting and running ones.
  await db.schema.createIndex('action_run_job_status_id').on('action_run_job').columns(['status', 'id']).execute();
  await db.schema
    .createIndex('action_run_job_repo_status')
    .on('action_run_job')
    .columns(['repo_id', 'status', 'id'])
    .execute();
  await db.schema
    .createIndex('action_run_job_owner_status')
    .on('action_run_job')
    .columns(['owner_id', 'status', 'id'])
    .execute();

  await withId(db, db.schema.createTable('action_task'))
    .addColumn('job_id', 'bigint', (c) => c.notNull())
    .addColumn('attempt', 'bigint', (c) => c.notNull())
    .addColumn('runner_id', 'bigint', (c) => c.notNull())
    .addColumn('status', 'integer', (c) => c.notNull())
    .addColumn('started', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('stopped', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('repo_id', 'bigint', (c) => c.notNull())
    .addColumn('owner_id', 'bigint', (c) => c.notNull())
    .addColumn('commit_sha', 'text', (c) => c.notNull())
    .addColumn('is_fork_pull_request', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('token_hash', 'text')
    .addColumn('token_last_eight', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('log_filename', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('log_in_storage', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('log_length', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('log_size', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('log_expired', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created', 'bigint', (c) => c.notNull())
    .addColumn('updated', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('action_task_repo_id').on('action_task').columns(['repo_id', 'id']).execute();
  await db.schema
    .createIndex('action_task_repo_status_id')
    .on('action_task')
    .columns(['repo_id', 'status', 'id'])
    .execute();
  await db.schema.createIndex('action_task_job_id').on('action_task').columns(['job_id']).execute();
  // NULL until a token is issued; unique so a token names one task.
  await db.schema.createIndex('action_task_token_hash_uq').unique().on('action_task').columns(['token_hash']).execute();
}
