// At most one active registration token per runner scope, enforced by the
// database: a unique partial index on (owner_id, repo_id) over the active rows.
// Get-or-create then becomes `INSERT … ON CONFLICT DO NOTHING` followed by a
// read, which concurrent first calls cannot make fail (before, PostgreSQL's
// SERIALIZABLE retries ran out under 20 concurrent first calls: 500).
//
// Older versions could leave several active rows in one scope (two first calls
// that both inserted on SQLite's deferred transactions, or rows written by
// hand). Before the index is built, every active row but the newest of its
// scope is deactivated, so the migration cannot fail on existing data; the
// newest is the one the API showed (Forgejo: GetLatestRunnerToken).
import type { Kysely } from 'kysely';
import { sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    UPDATE action_runner_token SET is_active = 0
    WHERE is_active = 1
      AND id < (SELECT MAX(newer.id) FROM action_runner_token newer
                WHERE newer.owner_id = action_runner_token.owner_id
                  AND newer.repo_id = action_runner_token.repo_id
                  AND newer.is_active = 1)
  `.execute(db);
  // Raw DDL: the predicate must be the literal `is_active = 1` (never a bound
  // parameter) so that ON CONFLICT's index inference matches it on both dialects.
  await sql`CREATE UNIQUE INDEX action_runner_token_active_uq ON action_runner_token (owner_id, repo_id) WHERE is_active = 1`.execute(
    db,
  );
}
