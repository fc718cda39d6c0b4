// Repository webhooks (owner_id 0, repo_id set) are listed and looked up by
// repository; the organization hooks' index (0005) is on owner_id.
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('webhook_repo_id').on('webhook').columns(['repo_id', 'id']).execute();
}
