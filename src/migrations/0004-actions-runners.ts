// Runners and what they report (Forgejo's action_runner, action_runner_token,
// action_tasks_version, action_task_step, action_task_output).
//
// Scope columns as elsewhere: (0, 0) global, (owner, 0) a user or
// organization, (0, repo) a repository. Secrets are never stored in clear:
// runner tokens as SHA-256 digests; registration tokens, which the API must
// show again, as key-ring ciphertext plus a digest to find them by.
import type { Kysely } from 'kysely';
import { withId } from './dialect.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await withId(db, db.schema.createTable('action_runner'))
    .addColumn('uuid', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('version', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('owner_id', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('repo_id', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('token_hash', 'text', (c) => c.notNull())
    .addColumn('token_last_eight', 'text', (c) => c.notNull())
    // JSON array of label names; NULL until the runner declared any (Forgejo shows null).
    .addColumn('agent_labels', 'text')
    .addColumn('ephemeral', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_online', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('last_active', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('created', 'bigint', (c) => c.notNull())
    .addColumn('updated', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('action_runner_uuid_uq').unique().on('action_runner').column('uuid').execute();
  await db.schema
    .createIndex('action_runner_token_hash_uq')
    .unique()
    .on('action_runner')
    .column('token_hash')
    .execute();
  // Lists are per scope, newest contact first.
  await db.schema
    .createIndex('action_runner_scope_online')
    .on('action_runner')
    .columns(['owner_id', 'repo_id', 'last_online'])
    .execute();

  await withId(db, db.schema.createTable('action_runner_token'))
    .addColumn('owner_id', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('repo_id', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('token_hash', 'text', (c) => c.notNull())
    .addColumn('token_encrypted', 'text', (c) => c.notNull())
    .addColumn('is_active', 'integer', (c) => c.notNull())
    .addColumn('created', 'bigint', (c) => c.notNull())
    .addColumn('updated', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('action_runner_token_token_hash_uq')
    .unique()
    .on('action_runner_token')
    .column('token_hash')
    .execute();
  await db.schema
    .createIndex('action_runner_token_scope')
    .on('action_runner_token')
    .columns(['owner_id', 'repo_id', 'id'])
    .execute();

  // Bumped whenever a job of the scope becomes waiting; runners skip the job
  // search while the version they saw is current.
  await withId(db, db.schema.createTable('action_tasks_version'))
    .addColumn('owner_id', 'bigint', (c) => c.notNull())
    .addColumn('repo_id', 'bigint', (c) => c.notNull())
    .addColumn('version', 'bigint', (c) => c.notNull())
    .addColumn('created', 'bigint', (c) => c.notNull())
    .addColumn('updated', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('action_tasks_version_scope_uq')
    .unique()
    .on('action_tasks_version')
    .columns(['owner_id', 'repo_id'])
    .execute();

  await withId(db, db.schema.createTable('action_task_step'))
    .addColumn('task_id', 'bigint', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    // Forgejo's column is `index`, a reserved word in SQL.
    .addColumn('step_index', 'bigint', (c) => c.notNull())
    .addColumn('repo_id', 'bigint', (c) => c.notNull())
    .addColumn('status', 'integer', (c) => c.notNull())
    .addColumn('log_index', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('log_length', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('started', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('stopped', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('created', 'bigint', (c) => c.notNull())
    .addColumn('updated', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('action_task_step_task_index_uq')
    .unique()
    .on('action_task_step')
    .columns(['task_id', 'step_index'])
    .execute();

  await withId(db, db.schema.createTable('action_task_output'))
    .addColumn('task_id', 'bigint', (c) => c.notNull())
    .addColumn('output_key', 'text', (c) => c.notNull())
    .addColumn('output_value', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('action_task_output_task_key_uq')
    .unique()
    .on('action_task_output')
    .columns(['task_id', 'output_key'])
    .execute();

  // Housekeeping finds running tasks by their last report, and waiting jobs by age.
  await db.schema.createIndex('action_task_status_updated').on('action_task').columns(['status', 'updated']).execute();
  await db.schema.createIndex('action_task_runner_status').on('action_task').columns(['runner_id', 'status']).execute();
  await db.schema
    .createIndex('action_run_job_status_updated')
    .on('action_run_job')
    .columns(['status', 'updated'])
    .execute();
}
