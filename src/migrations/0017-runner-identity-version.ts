// One counter that moves whenever a runner's identity changes in a way a
// cached copy must not outlive: the runner row is deleted (by the API, by its
// owner's deletion, by an ephemeral runner finishing) or its token, labels,
// scope or ephemeral flag change. Each Gantry process caches authenticated
// runners (services/actions/runner-identity-cache.ts) and reads this one row
// at most once a second: when it moved, the cache is dropped. Triggers bump
// it, so every code path that deletes or edits runners is covered without
// having to remember to.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { isPostgres } from './dialect.ts';

/** The columns whose change makes a cached runner stale (last_online and friends are not among them). */
const IDENTITY_COLUMNS = 'token_hash, agent_labels, ephemeral, owner_id, repo_id, uuid';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('action_runner_version')
    .addColumn('id', 'integer', (c) => c.primaryKey())
    .addColumn('version', 'bigint', (c) => c.notNull())
    .execute();
  await sql`insert into action_runner_version (id, version) values (1, 1)`.execute(db);
  if (isPostgres(db)) {
    await sql`create function action_runner_version_bump() returns trigger language plpgsql as $$
      begin
        update action_runner_version set version = version + 1 where id = 1;
        return null;
      end $$`.execute(db);
    // Statement level: one bump per statement, however many rows it touched.
    await sql`create trigger action_runner_version_on_delete after delete on action_runner
      for each statement execute function action_runner_version_bump()`.execute(db);
    await sql
      .raw(
        `create trigger action_runner_version_on_update after update of ${IDENTITY_COLUMNS} on action_runner
      for each statement execute function action_runner_version_bump()`,
      )
      .execute(db);
    return;
  }
  await sql`create trigger action_runner_version_on_delete after delete on action_runner
    begin update action_runner_version set version = version + 1 where id = 1; end`.execute(db);
  await sql
    .raw(
      `create trigger action_runner_version_on_update after update of ${IDENTITY_COLUMNS} on action_runner
    begin update action_runner_version set version = version + 1 where id = 1; end`,
    )
    .execute(db);
}
