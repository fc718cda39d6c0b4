// GET /metrics reports the webhook deliveries that settled (delivered or failed
// for good) in the last hour: an index range per state, however many finished
// rows the retention period keeps. `updated` is set when a row settles.
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('hook_task_status_updated').on('hook_task').columns(['status', 'updated']).execute();
}
