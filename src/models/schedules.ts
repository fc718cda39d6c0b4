// The registered `cron:` entries of default-branch workflows (table
// action_schedule, migration 0013) and the two queries the scheduler of every
// process runs: the due rows, oldest first, through the `next` index; and the
// claim of one tick, a conditional update of `next` that only one process
// can win (services/actions/scheduler.ts).
import { ActionStatus } from '../modules/actions-status.ts';
import { isPostgres } from './database.ts';
import type { Queryable } from './database.ts';

export interface Schedule {
  id: number;
  repoId: number;
  ownerId: number;
  workflowId: string;
  workflowDirectory: string;
  ref: string;
  commitSha: string;
  spec: string;
  /** '' when the workflow gave no `timezone:` key. */
  timeZone: string;
  /** Unix seconds. */
  next: number;
  prev: number;
}

export type NewSchedule = Omit<Schedule, 'id' | 'prev'>;

/** Rows per INSERT: far below SQLite's bound on bound parameters. */
const INSERT_BATCH = 500;

type Row = {
  id: number;
  repo_id: number;
  owner_id: number;
  workflow_id: string;
  workflow_directory: string;
  ref: string;
  commit_sha: string;
  spec: string;
  time_zone: string;
  next: number;
  prev: number;
};

function toSchedule(row: Row): Schedule {
  return {
    id: row.id,
    repoId: row.repo_id,
    ownerId: row.owner_id,
    workflowId: row.workflow_id,
    workflowDirectory: row.workflow_directory,
    ref: row.ref,
    commitSha: row.commit_sha,
    spec: row.spec,
    timeZone: row.time_zone,
    next: Number(row.next),
    prev: Number(row.prev),
  };
}

const COLUMNS = [
  'id',
  'repo_id',
  'owner_id',
  'workflow_id',
  'workflow_directory',
  'ref',
  'commit_sha',
  'spec',
  'time_zone',
  'next',
  'prev',
] as const;

/**
 * Every schedule of the repository is replaced by `schedules` (Forgejo deletes, then creates, on
 * each push). On PostgreSQL the repository row is locked first: two replacements racing (pushes
 * served by two processes) would otherwise each delete only the rows they saw and both insert.
 */
export async function replaceSchedulesOfRepository(
  tx: Queryable,
  repoId: number,
  schedules: readonly NewSchedule[],
  now: number,
): Promise<void> {
  if (isPostgres(tx)) await tx.selectFrom('repository').select('id').where('id', '=', repoId).forUpdate().execute();
  await deleteSchedulesOfRepository(tx, repoId);
  for (let start = 0; start < schedules.length; start += INSERT_BATCH) {
    const batch = schedules.slice(start, start + INSERT_BATCH);
    await tx
      .insertInto('action_schedule')
      .values(
        batch.map((s) => ({
          repo_id: s.repoId,
          owner_id: s.ownerId,
          workflow_id: s.workflowId,
          workflow_directory: s.workflowDirectory,
          ref: s.ref,
          commit_sha: s.commitSha,
          spec: s.spec,
          time_zone: s.timeZone,
          next: s.next,
          prev: 0,
          created: now,
        })),
      )
      .execute();
  }
}

export async function deleteSchedulesOfRepository(tx: Queryable, repoId: number): Promise<void> {
  await tx.deleteFrom('action_schedule').where('repo_id', '=', repoId).execute();
}

export async function deleteSchedule(tx: Queryable, id: number): Promise<void> {
  await tx.deleteFrom('action_schedule').where('id', '=', id).execute();
}

export async function deleteSchedulesOfWorkflow(tx: Queryable, repoId: number, workflowId: string): Promise<void> {
  await tx.deleteFrom('action_schedule').where('repo_id', '=', repoId).where('workflow_id', '=', workflowId).execute();
}

/**
 * Up to `limit` ids, after `afterId`, of the repository's scheduled runs on
 * `ref` that have not finished (waiting, running or blocked), oldest first,
 * through the (repo_id, ref, id) index: what Forgejo's CancelPreviousJobs
 * finds for the `schedule` trigger event.
 */
export async function listUnfinishedScheduleRunIds(
  db: Queryable,
  repoId: number,
  ref: string,
  afterId: number,
  limit: number,
): Promise<number[]> {
  const rows = await db
    .selectFrom('action_run')
    .select('id')
    .where('repo_id', '=', repoId)
    .where('ref', '=', ref)
    .where('id', '>', afterId)
    .where('trigger_event', '=', 'schedule')
    .where('status', 'in', [ActionStatus.waiting, ActionStatus.running, ActionStatus.blocked])
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((row) => Number(row.id));
}

export async function listSchedulesOfRepository(db: Queryable, repoId: number): Promise<Schedule[]> {
  const rows = await db
    .selectFrom('action_schedule')
    .select(COLUMNS)
    .where('repo_id', '=', repoId)
    .orderBy('id')
    .execute();
  return rows.map(toSchedule);
}

/** Up to `limit` schedules whose tick is due at `nowSec`, the most overdue first. */
export async function listDueSchedules(db: Queryable, nowSec: number, limit: number): Promise<Schedule[]> {
  const rows = await db
    .selectFrom('action_schedule')
    .select(COLUMNS)
    .where('next', '<=', nowSec)
    .orderBy('next')
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map(toSchedule);
}

/** The earliest `next` of all schedules (the index answers it), or null when there are none. */
export async function earliestScheduleTick(db: Queryable): Promise<number | null> {
  const row = await db.selectFrom('action_schedule').select('next').orderBy('next').limit(1).executeTakeFirst();
  return row === undefined ? null : Number(row.next);
}

/**
 * Moves a schedule past the tick `tick` (prev = tick, next = `nextTick`),
 * only if no one did it first: true for the one caller that wins the tick.
 * On PostgreSQL a concurrent claimer waits for the winner's transaction, then
 * sees `next` changed and updates nothing; SQLite serialises writers.
 */
export async function claimScheduleTick(tx: Queryable, id: number, tick: number, nextTick: number): Promise<boolean> {
  const result = await tx
    .updateTable('action_schedule')
    .set({ prev: tick, next: nextTick })
    .where('id', '=', id)
    .where('next', '=', tick)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}
