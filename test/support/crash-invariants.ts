// What must hold in the stored data whatever moment a process died at: the
// database's own integrity check (SQLite), and the cross-table invariants the
// services keep in one transaction (run numbers and their counters, jobs and
// tasks and their parents, the webhook outbox), as SQL that runs unchanged on
// SQLite and PostgreSQL. Read-only: safe while a server writes.
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { ActionStatus } from '../../src/modules/actions-status.ts';

/** A statement that must return no rows; the rows it does return are the offenders. */
interface Invariant {
  name: string;
  sql: string;
}

const RUNNING = ActionStatus.running;
const DELIVERED = 2;

const INVARIANTS: readonly Invariant[] = [
  {
    name: 'run numbers are unique per repository',
    sql: 'select repo_id, index_in_repo from action_run group by repo_id, index_in_repo having count(*) > 1',
  },
  {
    name: "a repository's run counter equals its number of runs and its highest run number (numbering is gap-free)",
    sql: `select i.repo_id, i.max_index,
            (select count(*) from action_run r where r.repo_id = i.repo_id) as runs,
            (select coalesce(max(r.index_in_repo), 0) from action_run r where r.repo_id = i.repo_id) as highest
          from action_run_index i
          where i.max_index <> (select count(*) from action_run r where r.repo_id = i.repo_id)
             or i.max_index <> (select coalesce(max(r.index_in_repo), 0) from action_run r where r.repo_id = i.repo_id)`,
  },
  {
    name: 'every repository with runs has a run counter',
    sql: 'select distinct r.repo_id from action_run r left join action_run_index i on i.repo_id = r.repo_id where i.repo_id is null',
  },
  {
    name: 'action_run_count agrees with action_run for every (repository, workflow, ref, event, status)',
    sql: `select repo_id, workflow_id, ref, event, status, sum(n) as difference from (
            select repo_id, workflow_id, ref, event, status, "count" as n from action_run_count
            union all
            select repo_id, workflow_id, ref, event, status, -1 as n from action_run
          ) t group by repo_id, workflow_id, ref, event, status having sum(n) <> 0`,
  },
  {
    name: 'every run belongs to an existing repository',
    sql: 'select r.id from action_run r left join repository p on p.id = r.repo_id where p.id is null',
  },
  {
    name: 'every job belongs to an existing run',
    sql: 'select j.id from action_run_job j left join action_run r on r.id = j.run_id where r.id is null',
  },
  {
    name: 'every task belongs to an existing job',
    sql: 'select t.id from action_task t left join action_run_job j on j.id = t.job_id where j.id is null',
  },
  {
    name: "a job's task_id names an existing task",
    sql: 'select j.id from action_run_job j left join action_task t on t.id = j.task_id where j.task_id <> 0 and t.id is null',
  },
  {
    name: 'a running job has a running task',
    sql: `select j.id from action_run_job j left join action_task t on t.id = j.task_id where j.status = ${RUNNING} and (t.id is null or t.status <> ${RUNNING})`,
  },
  {
    name: "a running task is its job's current task, and the job runs",
    sql: `select t.id from action_task t join action_run_job j on j.id = t.job_id where t.status = ${RUNNING} and (j.task_id <> t.id or j.status <> ${RUNNING})`,
  },
  {
    name: 'every task step belongs to an existing task',
    sql: 'select s.id from action_task_step s left join action_task t on t.id = s.task_id where t.id is null',
  },
  {
    name: 'every task output belongs to an existing task',
    sql: 'select o.id from action_task_output o left join action_task t on t.id = o.task_id where t.id is null',
  },
  {
    name: 'every hook_task belongs to an existing webhook',
    sql: 'select h.id from hook_task h left join webhook w on w.id = h.hook_id where w.id is null',
  },
  {
    name: 'every delivery attempt belongs to an existing hook_task',
    sql: 'select a.id from hook_task_attempt a left join hook_task h on h.id = a.task_id where h.id is null',
  },
  {
    name: 'a delivered hook_task has a 2xx attempt on record',
    sql: `select h.id from hook_task h where h.status = ${DELIVERED}
            and not exists (select 1 from hook_task_attempt a where a.task_id = h.id and a.response_status between 200 and 299)`,
  },
];

export interface DatabaseLocation {
  /** The SQLite file, or null on PostgreSQL. */
  sqlitePath: string | null;
  /** The PostgreSQL URL, or null on SQLite. */
  pgUrl: string | null;
}

/** Every broken invariant with (a few of) its offending rows; empty when all hold. */
export async function findBrokenInvariants(where: DatabaseLocation): Promise<string[]> {
  const broken: string[] = [];
  const report = (name: string, rows: unknown[]): void => {
    if (rows.length > 0)
      broken.push(
        `${name}: ${JSON.stringify(rows.slice(0, 5))}${rows.length > 5 ? ` (+${rows.length - 5} more)` : ''}`,
      );
  };
  if (where.sqlitePath !== null) {
    // Read-only, so the check never takes the write lock from the server (or
    // recovers a WAL on its own: the server's open connection already did).
    const sqlite = new BetterSqlite3(where.sqlitePath, { readonly: true, fileMustExist: true });
    try {
      sqlite.pragma('busy_timeout = 10000');
      const integrity = sqlite.pragma('integrity_check') as Array<{ integrity_check: string }>;
      if (integrity.length !== 1 || integrity[0]?.integrity_check !== 'ok') report('PRAGMA integrity_check', integrity);
      report('PRAGMA foreign_key_check', sqlite.pragma('foreign_key_check') as unknown[]);
      // One read transaction: every invariant sees the same snapshot.
      sqlite.transaction(() => {
        for (const invariant of INVARIANTS) report(invariant.name, sqlite.prepare(invariant.sql).all());
      })();
    } finally {
      sqlite.close();
    }
    return broken;
  }
  if (where.pgUrl === null) throw new Error('findBrokenInvariants: neither a SQLite path nor a PostgreSQL URL');
  const client = new pg.Client({ connectionString: where.pgUrl });
  await client.connect();
  try {
    await client.query('begin isolation level repeatable read read only');
    for (const invariant of INVARIANTS) report(invariant.name, (await client.query(invariant.sql)).rows);
    await client.query('commit');
  } finally {
    await client.end();
  }
  return broken;
}
