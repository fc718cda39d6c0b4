// The rows behind concurrency groups (services/actions/concurrency.ts has the
// rules): the group lock, the unfinished members of a group, and holding or
// releasing the jobs of a run that queues behind an older member.
import { sql } from 'kysely';
import { ActionStatus } from '../modules/actions-status.ts';
import type { Queryable } from './database.ts';

const UNFINISHED = [ActionStatus.unknown, ActionStatus.waiting, ActionStatus.running, ActionStatus.blocked];

/**
 * Serialises every "check the group, then hold or release" of one repository
 * until the transaction ends: a no-op upsert of the repository's run counter
 * row (action_run_index), which takes its row lock on PostgreSQL (creating the
 * row with 0 when the repository has no run yet; the next run number stays 1)
 * and SQLite's write lock. Run creation takes the same row to number its run,
 * so creation and group checks of a repository queue on one lock.
 */
export async function lockConcurrencyGroups(tx: Queryable, repoId: number): Promise<void> {
  await tx
    .insertInto('action_run_index')
    .values({ repo_id: repoId, max_index: 0 })
    .onConflict((oc) => oc.column('repo_id').doUpdateSet({ max_index: sql<number>`action_run_index.max_index` }))
    .execute();
}

export interface GroupMember {
  runId: number;
  /** Some job of the run is held: the run waits for older members to finish. */
  held: boolean;
}

/** The runs of a group that are not done, oldest first, `exceptRunId` left out. */
export async function listUnfinishedMembers(
  db: Queryable,
  repoId: number,
  group: string,
  exceptRunId = 0,
): Promise<GroupMember[]> {
  const rows = await db
    .selectFrom('action_run as r')
    .select([
      'r.id as id',
      (eb) =>
        eb
          .exists(
            eb
              .selectFrom('action_run_job as j')
              .select('j.id')
              .whereRef('j.run_id', '=', 'r.id')
              .where('j.concurrency_held', '=', 1)
              .where('j.status', '=', ActionStatus.blocked),
          )
          .as('held'),
    ])
    .where('r.repo_id', '=', repoId)
    .where('r.concurrency_group', '=', group)
    .where('r.status', 'in', UNFINISHED)
    .where('r.id', '!=', exceptRunId)
    .orderBy('r.id')
    .execute();
  // SQLite answers EXISTS as 0/1, PostgreSQL as a boolean.
  return rows.map((row) => ({ runId: row.id, held: Boolean(row.held) }));
}

/**
 * The waiting jobs of a run become held (blocked, not claimable); returns
 * their ids. Only jobs nobody claimed: a job a runner took meanwhile runs.
 */
export async function holdWaitingJobs(tx: Queryable, runId: number, now: number): Promise<number[]> {
  const rows = await tx
    .updateTable('action_run_job')
    .set({ status: ActionStatus.blocked, concurrency_held: 1, updated: now })
    .where('run_id', '=', runId)
    .where('status', '=', ActionStatus.waiting)
    .where('task_id', '=', 0)
    .returning('id')
    .execute();
  return rows.map((row) => row.id);
}

/**
 * Lifts the hold of a run's jobs: they stay blocked and the job emitter
 * (RunProgress.settle) moves them on as it would any blocked job; returns
 * their ids.
 */
export async function releaseHeldJobs(tx: Queryable, runId: number, now: number): Promise<number[]> {
  const rows = await tx
    .updateTable('action_run_job')
    .set({ concurrency_held: 0, updated: now })
    .where('run_id', '=', runId)
    .where('concurrency_held', '=', 1)
    .returning('id')
    .execute();
  return rows.map((row) => row.id);
}

/** Whether some job of the run is held (blocked behind an older run of its group). */
export async function runHasHeldJobs(db: Queryable, runId: number): Promise<boolean> {
  const row = await db
    .selectFrom('action_run_job')
    .select('id')
    .where('run_id', '=', runId)
    .where('concurrency_held', '=', 1)
    .where('status', '=', ActionStatus.blocked)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}
