// A run's jobs counted by status, which settling a run reads after every
// finish (services/actions/run-progress.ts): a 100-leg matrix is 100 rows.
// - Both dialects: an index that holds what the count reads, so it is read
//   from the index alone instead of 100 rows of the job table.
// - PostgreSQL: the count as committed when it runs rather than when the
//   calling statement began. A finishing report locks its run and finishes
//   its task and job in one statement (models/task-reports.ts); under READ
//   COMMITTED that statement's own reads keep the snapshot it started with,
//   from before it waited for the run's lock, and would miss jobs finished by
//   whoever held the lock. A VOLATILE PL/pgSQL function takes a fresh
//   snapshot for each query it runs, so called once the lock is held it sees
//   every job they finished. `except_job` (the caller's own job, counted by
//   the caller as it leaves it) is left out. SQLite needs no such function:
//   its writers hold the database's lock from their start.
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { isPostgres } from './dialect.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('action_run_job_run_status')
    .on('action_run_job')
    .columns(['run_id', 'status', 'concurrency_held'])
    .execute();
  if (!isPostgres(db)) return;
  await sql`create function action_run_job_counts_now(run bigint, except_job bigint) returns json
    language plpgsql volatile as $$
      declare
        counts json;
      begin
        select coalesce(json_agg(json_build_array(c.status, c.concurrency_held, c.n)), '[]') into counts
        from (select j.status, j.concurrency_held, count(*) as n from action_run_job as j
              where j.run_id = run and j.id <> except_job
              group by j.status, j.concurrency_held) as c;
        return counts;
      end $$`.execute(db);
}
