// One time unit per table: hook_task kept `created` and `updated` in Unix
// seconds beside `next_attempt_at`, `lease_until` and `delivered` in Unix
// milliseconds (and hook_task_attempt.started, also milliseconds), so every
// comparison had to remember which column was which. From here on every
// time column of hook_task is Unix milliseconds; existing rows are converted
// in place, their times kept (to the second they had).
//
// Both dialects run the same statement: the columns are bigint (0005), and a
// seconds value times 1000 stays far inside its range.
import type { Kysely } from 'kysely';
import { sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`update hook_task set created = created * 1000, updated = updated * 1000`.execute(db);
}
