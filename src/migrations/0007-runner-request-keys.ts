// forgejo-runner's x-runner-request-key, kept with the tasks a FetchTask
// claimed under it (Forgejo: action_task.runner_request_key, migration
// v15b_add-runner_request_key.go, indexed with runner_id): a retry of that
// FetchTask — whichever Gantry process it reaches, before or after a restart —
// is answered with the same tasks instead of claiming new ones. Unlike
// Forgejo's, the key expires (`runner_request_key_expires`, Unix seconds; 0 for
// tasks claimed without a key).
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('action_task')
    .addColumn('runner_request_key', 'text', (c) => c.notNull().defaultTo(''))
    .execute();
  await db.schema
    .alterTable('action_task')
    .addColumn('runner_request_key_expires', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .createIndex('action_task_runner_request_key')
    .on('action_task')
    .columns(['runner_id', 'runner_request_key'])
    .execute();
}
