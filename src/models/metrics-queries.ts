// The database reads behind GET /metrics: queue depths and counts by state.
// Every count reads one index range and stops after `cap` entries, so a scrape
// costs at most that much however much history the tables hold (a count equal
// to the cap means "at least"). Finished webhook deliveries are counted over a
// recent window, not over the retention period. The runners count is the one
// whole-table read: action_runner holds a row per registered runner (ephemeral
// runners are deleted after their task), and the runners API counts it alike.
import { ActionStatus } from '../modules/actions-status.ts';
import type { Queryable } from './database.ts';
import { HookTaskStatus } from './hook-tasks.ts';
import type { ActionStatusValue } from '../modules/actions-status.ts';

/** Outbox rows by state. */
export interface HookTaskStateCounts {
  /** Due and waiting for a worker: new deliveries, and retries whose time has come. */
  pending: number;
  /** Failed, backing off until their next attempt time. */
  retrying: number;
  /** Claimed by a worker (its lease held): queued in that worker or being sent. */
  delivering: number;
  /** Settled as delivered since `settledSince`. */
  delivered: number;
  /** Settled as failed for good since `settledSince`. */
  failed: number;
}

type HookTaskRange = { status: number; dueBy?: number; dueAfter?: number; updatedSince?: number };

/**
 * Rows of hook_task in one index range, stopping at `cap`: (status,
 * next_attempt_at) for the queue, (status, updated) for what settled lately.
 * Index-only: no row is read.
 */
async function countHookTasks(db: Queryable, range: HookTaskRange, cap: number): Promise<number> {
  const row = await db
    .selectFrom((eb) => {
      let rows = eb.selectFrom('hook_task').select('status').where('status', '=', range.status);
      if (range.dueBy !== undefined) rows = rows.where('next_attempt_at', '<=', range.dueBy);
      if (range.dueAfter !== undefined) rows = rows.where('next_attempt_at', '>', range.dueAfter);
      if (range.updatedSince !== undefined) rows = rows.where('updated', '>=', range.updatedSince);
      return rows.limit(cap).as('capped');
    })
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** `nowMs`: what is due; `settledSinceMs`: the window of delivered and failed rows (hook_task times are Unix ms). */
export async function countHookTasksByState(
  db: Queryable,
  cap: number,
  nowMs: number,
  settledSinceMs: number,
): Promise<HookTaskStateCounts> {
  return {
    pending: await countHookTasks(db, { status: HookTaskStatus.pending, dueBy: nowMs }, cap),
    retrying: await countHookTasks(db, { status: HookTaskStatus.pending, dueAfter: nowMs }, cap),
    delivering: await countHookTasks(db, { status: HookTaskStatus.delivering }, cap),
    delivered: await countHookTasks(db, { status: HookTaskStatus.delivered, updatedSince: settledSinceMs }, cap),
    failed: await countHookTasks(db, { status: HookTaskStatus.failed, updatedSince: settledSinceMs }, cap),
  };
}

/** Jobs with `status`, through (status, id), stopping at `cap`. */
export async function countJobsWithStatus(db: Queryable, status: ActionStatusValue, cap: number): Promise<number> {
  const row = await db
    .selectFrom((eb) =>
      eb.selectFrom('action_run_job').select('status').where('status', '=', status).limit(cap).as('capped'),
    )
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export interface WaitingJobGroup {
  /** The job's runs-on labels as stored (a JSON array). */
  runsOn: string;
  count: number;
}

/**
 * Waiting jobs grouped by their runs-on, over the `maxJobs` oldest waiting
 * jobs (the ones runners take first), read through (status, id).
 */
export async function countWaitingJobsByRunsOn(db: Queryable, maxJobs: number): Promise<WaitingJobGroup[]> {
  const rows = await db
    .selectFrom((eb) =>
      eb
        .selectFrom('action_run_job')
        .select('runs_on')
        .where('status', '=', ActionStatus.waiting)
        .orderBy('id')
        .limit(maxJobs)
        .as('oldest'),
    )
    .select((eb) => ['runs_on', eb.fn.countAll<number>().as('n')])
    .groupBy('runs_on')
    .execute();
  return rows.map((row) => ({ runsOn: row.runs_on, count: Number(row.n) }));
}

export interface RunnerLivenessCounts {
  total: number;
  /** Contacted the server at or after `onlineSince`. */
  online: number;
  /** Online, and reported on a task at or after `activeSince`. */
  active: number;
}

/** Registered runners by last contact and last task report (Unix seconds thresholds). */
export async function countRunnersByLiveness(
  db: Queryable,
  onlineSince: number,
  activeSince: number,
): Promise<RunnerLivenessCounts> {
  const row = await db
    .selectFrom('action_runner')
    .select((eb) => [
      eb.fn.countAll<number>().as('total'),
      eb.fn.sum<number>(eb.case().when('last_online', '>=', onlineSince).then(1).else(0).end()).as('online'),
      eb.fn
        .sum<number>(
          eb
            .case()
            .when(eb.and([eb('last_online', '>=', onlineSince), eb('last_active', '>=', activeSince)]))
            .then(1)
            .else(0)
            .end(),
        )
        .as('active'),
    ])
    .executeTakeFirstOrThrow();
  return { total: Number(row.total), online: Number(row.online ?? 0), active: Number(row.active ?? 0) };
}
