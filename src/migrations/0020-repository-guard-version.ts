// SQLite only: one counter that moves whenever an account, a repository or an
// Actions variable is inserted, changed or deleted. The repository guard's
// reads (the owner and repository of every /repos/{owner}/{repo} route, the
// GET of a repository variable) keep their rows between requests
// (models/guard-row-cache.ts) and read this one row before each use: an entry
// read under another value of the counter is never served. Triggers bump it,
// so every code path that writes those tables, from this process or any other
// (`gantry admin`), is covered without having to remember to; those tables
// change rarely (an edit, a new repository, a variable's PUT), so the
// triggers cost the writes next to nothing.
//
// PostgreSQL gets nothing: there a read of the counter is a round trip, as
// much as the read it would save, and one row that every writer of the three
// tables updates would order those writers across processes on its lock.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { isPostgres } from './dialect.ts';

const WATCHED_TABLES = ['user', 'repository', 'action_variable'] as const;

export async function up(db: Kysely<unknown>): Promise<void> {
  if (isPostgres(db)) return;
  await db.schema
    .createTable('repository_guard_version')
    .addColumn('id', 'integer', (c) => c.primaryKey())
    .addColumn('version', 'bigint', (c) => c.notNull())
    .execute();
  await sql`insert into repository_guard_version (id, version) values (1, 1)`.execute(db);
  for (const table of WATCHED_TABLES) {
    for (const event of ['insert', 'update', 'delete'] as const) {
      await sql
        .raw(
          `create trigger repository_guard_version_${table}_${event} after ${event} on "${table}"
          begin update repository_guard_version set version = version + 1 where id = 1; end`,
        )
        .execute(db);
    }
  }
}
