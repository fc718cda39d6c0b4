// Rows whose owner is gone. The schema has no foreign keys (0 means "none" in
// owner_id/repo_id), so this is the check that stands in for them: for every
// table, each column that names an owner must name an existing row (or 0
// where 0 means "none"). A table this file does not know is reported too, so
// a new table cannot slip past the rule in docs/architecture.md ("everything a
// deleted owner owned goes with it", src/models/owned-rows.ts). Read-only.
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import type { DatabaseLocation } from './crash-invariants.ts';

/** An owning reference: `column` names a row of `parent` (by id); `zeroMeansNone` allows 0. */
interface OwnerRef {
  column: string;
  parent: string;
  zeroMeansNone?: boolean;
}

const USER = 'user';
const REPO = 'repository';
const scope = (): OwnerRef[] => [
  { column: 'owner_id', parent: USER, zeroMeansNone: true },
  { column: 'repo_id', parent: REPO, zeroMeansNone: true },
];

/**
 * Every table and the columns that name its owner. References that are only
 * history (a run's trigger user, a task's runner) are deliberately absent.
 */
export const OWNER_REFERENCES: Readonly<Record<string, readonly OwnerRef[]>> = {
  user: [],
  access_token: [{ column: 'uid', parent: USER }],
  web_session: [{ column: 'user_id', parent: USER }],
  team: [{ column: 'org_id', parent: USER }],
  team_user: [
    { column: 'org_id', parent: USER },
    { column: 'team_id', parent: 'team' },
    { column: 'uid', parent: USER },
  ],
  org_user: [
    { column: 'org_id', parent: USER },
    { column: 'uid', parent: USER },
  ],
  repository: [{ column: 'owner_id', parent: USER }],
  team_repo: [
    { column: 'org_id', parent: USER },
    { column: 'team_id', parent: 'team' },
    { column: 'repo_id', parent: REPO },
  ],
  collaboration: [
    { column: 'repo_id', parent: REPO },
    { column: 'user_id', parent: USER },
  ],
  secret: scope(),
  action_variable: scope(),
  action_run: [
    { column: 'repo_id', parent: REPO },
    { column: 'owner_id', parent: USER },
  ],
  action_run_index: [{ column: 'repo_id', parent: REPO }],
  commit_status: [{ column: 'repo_id', parent: REPO }],
  commit_status_index: [{ column: 'repo_id', parent: REPO }],
  action_artifact: [
    { column: 'repo_id', parent: REPO },
    { column: 'owner_id', parent: USER },
  ],
  action_run_count: [{ column: 'repo_id', parent: REPO }],
  action_run_job: [
    { column: 'run_id', parent: 'action_run' },
    { column: 'repo_id', parent: REPO },
  ],
  action_task: [
    { column: 'job_id', parent: 'action_run_job' },
    { column: 'repo_id', parent: REPO },
  ],
  action_task_step: [
    { column: 'task_id', parent: 'action_task' },
    { column: 'repo_id', parent: REPO },
  ],
  action_task_output: [{ column: 'task_id', parent: 'action_task' }],
  action_runner: scope(),
  action_runner_token: scope(),
  action_tasks_version: scope(),
  // One counter row for the whole instance (migration 0017): nobody owns it.
  action_runner_version: [],
  // The same for the repository guard's rows (migration 0020, SQLite only).
  repository_guard_version: [],
  action_workflow_state: [{ column: 'repo_id', parent: REPO }],
  action_schedule: [
    { column: 'repo_id', parent: REPO },
    { column: 'owner_id', parent: USER },
  ],
  webhook: scope(),
  hook_task: [{ column: 'hook_id', parent: 'webhook' }],
  hook_task_attempt: [{ column: 'task_id', parent: 'hook_task' }],
};

/** Kysely's own bookkeeping. */
const NOT_OWNED = new Set(['kysely_migration', 'kysely_migration_lock']);

function orphanQuery(table: string, ref: OwnerRef): string {
  const none = ref.zeroMeansNone ? ` and t.${ref.column} <> 0` : '';
  return `select t.${ref.column} as ${ref.column}, count(*) as n from "${table}" t
          where not exists (select 1 from "${ref.parent}" p where p.id = t.${ref.column})${none}
          group by t.${ref.column}`;
}

/** One line per broken reference (table, column, missing owner ids) and per unknown table; empty when clean. */
export async function findOrphans(where: DatabaseLocation): Promise<string[]> {
  const problems: string[] = [];
  const check = async (tables: string[], all: (sql: string) => Promise<unknown[]>): Promise<void> => {
    for (const table of tables) {
      if (NOT_OWNED.has(table)) continue;
      const refs = OWNER_REFERENCES[table];
      if (refs === undefined) {
        problems.push(
          `table ${table} is not in test/support/orphans.ts: say which columns name its owner (and delete its rows in src/models/owned-rows.ts)`,
        );
        continue;
      }
      for (const ref of refs) {
        const rows = await all(orphanQuery(table, ref));
        if (rows.length > 0)
          problems.push(`${table}.${ref.column} names missing ${ref.parent} rows: ${JSON.stringify(rows.slice(0, 5))}`);
      }
    }
  };
  if (where.sqlitePath !== null) {
    const sqlite = new BetterSqlite3(where.sqlitePath, { readonly: true, fileMustExist: true });
    try {
      sqlite.pragma('busy_timeout = 10000');
      const tables = (
        sqlite
          .prepare("select name from sqlite_master where type = 'table' and name not like 'sqlite_%'")
          .all() as Array<{ name: string }>
      ).map((r) => r.name);
      await check(tables, async (sql) => sqlite.prepare(sql).all());
    } finally {
      sqlite.close();
    }
    return problems;
  }
  if (where.pgUrl === null) throw new Error('findOrphans: neither a SQLite path nor a PostgreSQL URL');
  const client = new pg.Client({ connectionString: where.pgUrl });
  await client.connect();
  try {
    const tables = (
      await client.query<{ table_name: string }>(
        "select table_name from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE'",
      )
    ).rows.map((r) => r.table_name);
    await check(tables, async (sql) => (await client.query(sql)).rows);
  } finally {
    await client.end();
  }
  return problems;
}
