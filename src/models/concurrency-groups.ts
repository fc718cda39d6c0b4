// The rows behind concurrency groups (services/actions/concurrency.ts has the
// rules): the group lock, the unfinished members of a group, and holding or
// releasing the jobs of a run that queues behind an older member.
import { sql } from 'kysely';
import { ActionStatus } from '../modules/actions-status.ts';
import { compiledStatement } from './compiled-statements.ts';
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
  await LOCK_GROUPS.execute(tx, [repoId]);
}

// Every run has a group (the default one when its workflow names none), so
// each run that finishes runs this lock and UNFINISHED_MEMBERS: compiled once
// (compiled-statements.ts), not built and compiled by Kysely for each call
// (together 0.7 % of `gantry web`'s busy samples in a PostgreSQL throughput
// profile of 2026-11-28, 0.4 % in Kysely).
const LOCK_GROUPS = compiledStatement((db, arg) =>
  db
    .insertInto('action_run_index')
    .values({ repo_id: arg<number>(0), max_index: 0 })
    .onConflict((oc) => oc.column('repo_id').doUpdateSet({ max_index: sql<number>`action_run_index.max_index` })),
);

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
  const { rows } = await UNFINISHED_MEMBERS.execute(db, [repoId, group, exceptRunId]);
  // SQLite answers EXISTS as 0/1, PostgreSQL as a boolean.
  return rows.map((row) => ({ runId: row.id, held: Boolean(row.held) }));
}

// Arguments: 0 repository, 1 group, 2 the run left out.
const UNFINISHED_MEMBERS = compiledStatement((db, arg) =>
  db
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
    .where('r.repo_id', '=', arg<number>(0))
    .where('r.concurrency_group', '=', arg<string>(1))
    .where('r.status', 'in', UNFINISHED)
    .where('r.id', '!=', arg<number>(2))
    .orderBy('r.id'),
);

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

// Job-level groups (services/actions/job-concurrency.ts). A member is a job
// of the repository whose evaluated group is the group; it is active when
// waiting (claimable) or running, held when blocked with group_held (1, or
// REPLACED while its cancel is pending).

/** group_held of a held job a newer one replaced: still held (cancellable), never released nor counted busy. */
const REPLACED = -1;

/** Whether a job of the group other than `exceptJobId` is waiting, running or held. */
export async function jobGroupIsBusy(
  tx: Queryable,
  repoId: number,
  group: string,
  exceptJobId: number,
): Promise<boolean> {
  const row = await tx
    .selectFrom('action_run_job')
    .select('id')
    .where('repo_id', '=', repoId)
    .where('concurrency_group', '=', group)
    .where('id', '!=', exceptJobId)
    .where((eb) =>
      eb.or([
        eb('status', 'in', [ActionStatus.waiting, ActionStatus.running]),
        eb.and([eb('status', '=', ActionStatus.blocked), eb('group_held', '=', 1)]),
      ]),
    )
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** The unfinished members of a job group but `exceptJobId`, oldest first (cancel in progress cancels them). */
export async function listUnfinishedJobMembers(
  tx: Queryable,
  repoId: number,
  group: string,
  exceptJobId: number,
): Promise<Array<{ id: number; runId: number }>> {
  const rows = await tx
    .selectFrom('action_run_job')
    .select(['id', 'run_id'])
    .where('repo_id', '=', repoId)
    .where('concurrency_group', '=', group)
    .where('id', '!=', exceptJobId)
    .where('status', 'in', UNFINISHED)
    .orderBy('id')
    .execute();
  return rows.map((row) => ({ id: row.id, runId: row.run_id }));
}

/**
 * The held members of a job group but `newerJobId` are replaced by it:
 * marked so that no release hands them out before their cancel (after the
 * commit) reaches them; returns their ids.
 */
export async function replaceHeldJobs(
  tx: Queryable,
  repoId: number,
  group: string,
  newerJobId: number,
  now: number,
): Promise<number[]> {
  const rows = await tx
    .updateTable('action_run_job')
    .set({ group_held: REPLACED, updated: now })
    .where('repo_id', '=', repoId)
    .where('concurrency_group', '=', group)
    .where('id', '!=', newerJobId)
    .where('status', '=', ActionStatus.blocked)
    .where('group_held', '=', 1)
    .returning('id')
    .execute();
  return rows.map((row) => row.id);
}

/** Stores a ready job's evaluated group; `held` keeps it blocked behind another member. */
export async function admitJob(
  tx: Queryable,
  jobId: number,
  admission: { group: string; cancel: boolean; held: boolean },
  now: number,
): Promise<boolean> {
  const result = await tx
    .updateTable('action_run_job')
    .set({
      concurrency_group: admission.group,
      concurrency_cancel: admission.cancel ? 1 : 0,
      group_held: admission.held ? 1 : 0,
      ...(admission.held ? {} : { status: ActionStatus.waiting }),
      updated: now,
    })
    .where('id', '=', jobId)
    .where('status', '=', ActionStatus.blocked)
    .where('group_held', '=', 0)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** A ready job whose group does not evaluate fails, with the reason. */
export async function failJobConcurrency(tx: Queryable, jobId: number, reason: string, now: number): Promise<boolean> {
  const result = await tx
    .updateTable('action_run_job')
    .set({ status: ActionStatus.failure, concurrency_error: reason, stopped: now, updated: now })
    .where('id', '=', jobId)
    .where('status', '=', ActionStatus.blocked)
    .where('group_held', '=', 0)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * When no member of the group is active, the held one (there is one: the
 * others were replaced) becomes waiting; returns it (its run settles), or
 * undefined.
 */
export async function releaseHeldJob(
  tx: Queryable,
  repoId: number,
  group: string,
  now: number,
): Promise<{ id: number; runId: number } | undefined> {
  const active = await tx
    .selectFrom('action_run_job')
    .select('id')
    .where('repo_id', '=', repoId)
    .where('concurrency_group', '=', group)
    .where('status', 'in', [ActionStatus.waiting, ActionStatus.running])
    .limit(1)
    .executeTakeFirst();
  if (active !== undefined) return undefined;
  const next = await tx
    .selectFrom('action_run_job')
    .select(['id', 'run_id'])
    .where('repo_id', '=', repoId)
    .where('concurrency_group', '=', group)
    .where('status', '=', ActionStatus.blocked)
    .where('group_held', '=', 1)
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
  if (next === undefined) return undefined;
  const result = await tx
    .updateTable('action_run_job')
    .set({ status: ActionStatus.waiting, group_held: 0, updated: now })
    .where('id', '=', next.id)
    .where('status', '=', ActionStatus.blocked)
    .where('group_held', '=', 1)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0 ? { id: next.id, runId: next.run_id } : undefined;
}

/** Whether the run has a job that declares a job-level `concurrency:` and is not done. */
export async function runHasUnfinishedGroupJobs(db: Queryable, runId: number): Promise<boolean> {
  const row = await db
    .selectFrom('action_run_job')
    .select('id')
    .where('run_id', '=', runId)
    .where('raw_concurrency', '!=', '')
    .where('status', 'in', UNFINISHED)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Ready jobs with a job group go back to `blocked` until they are admitted (a rerun); held ones stay held. */
export async function awaitAdmission(tx: Queryable, jobIds: readonly number[], now: number): Promise<void> {
  if (jobIds.length === 0) return;
  await tx
    .updateTable('action_run_job')
    .set({ status: ActionStatus.blocked, updated: now })
    .where('id', 'in', [...jobIds])
    .where('status', '=', ActionStatus.waiting)
    .where('task_id', '=', 0)
    .execute();
}
