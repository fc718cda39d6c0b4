// Job-level concurrency groups, Gitea 1.26's rules (services/actions/
// concurrency.go EvaluateJobConcurrencyFillModel, clear_tasks.go
// PrepareToStartJobWithConcurrency, job_emitter.go), on the machinery of the
// workflow-level groups (concurrency.ts), safe with several Gantry processes
// on one database.
//
// A job that declares `concurrency:` is created `blocked` with its block and
// the run's contexts (github, vars, inputs, its matrix leg). When it becomes
// ready (at once, or when its needs are done; RunProgress.settle) its group is
// evaluated, with `needs` too, and the job is admitted:
// - the group does not evaluate: the job fails, the reason is its log and
//   the run goes on as after any failed job (Gitea leaves it blocked);
// - `cancel-in-progress: true`: the job is waiting at once, and every other
//   unfinished job of its group is cancelled after the commit through the
//   cancel API's service (RunControlService.cancelJobs): a runner sees
//   RESULT_CANCELLED on its next UpdateTask, the webhooks fire;
// - otherwise, while another job of its group is waiting, running or held,
//   it is held: stored `blocked` with group_held (out of the set FetchTask
//   claims from) and shown `blocked`, and the other held jobs of its group are
//   cancelled after the commit by the same path: one running (or waiting)
//   member and one pending, the newest, as in Gitea and GitHub. When a job of
//   the group reaches a final state and no member is waiting or running, the
//   held job is released to `waiting` and the runners' tasks version bumped.
//   A replaced job is marked in the admission's transaction (group_held -1:
//   still held, never released), so a finish that commits before its cancel
//   does not hand it out. A waiting member is kept like a running one (Gitea
//   cancels it): a runner may be claiming it.
// Job groups are their own namespace: a job group and a workflow group of the
// same name do not wait for each other (in Gitea they do).
//
// Guarantees:
// - Never two active (waiting or running) members of a group that does not
//   cancel, with any number of processes: admission and release are decided
//   after taking the group lock (lockConcurrencyGroups, the repository's run
//   counter row) in the transaction that writes them, and read the committed
//   result of the previous holder. A finishing member's transaction takes the
//   lock before it looks for a job to release, so of a finish and an
//   admission one sees the other: the admitted job is held and released by
//   the finish, or admitted after it.
// - Lock order: a run with job groups is settled with the group lock taken
//   before the run's row (lockJobGroupsFirst; cancel and rerun take it first
//   too), so a release, which takes another run's row after the lock, cannot
//   wait in a circle with that run's own settle.
// - A crash loses nothing held: admission, failure and release commit with
//   the change that caused them. Only the cancel of older members runs after
//   the commit (a best effort, as for workflow groups): after a crash there,
//   with cancel in progress the older job runs to its end beside the newer
//   one; without, the replaced job stays blocked until a cancel of its run or
//   the housekeeping of abandoned jobs (housekeeping.ts) ends it.
import { isDone, statusName } from '../../modules/actions-status.ts';
import { ExpressionFailure } from '../../modules/workflows/expressions.ts';
import { evaluateJobConcurrency } from '../../modules/workflows/job-concurrency.ts';
import type { NeedContext, StoredJobConcurrency } from '../../modules/workflows/job-concurrency.ts';
import { aggregateJobStatus } from '../../modules/actions-status.ts';
import { listJobsByIds, listJobsOfRun } from '../../models/action-runs.ts';
import type { ActionRun, ActionRunJob } from '../../models/action-runs.ts';
import {
  admitJob,
  failJobConcurrency,
  jobGroupIsBusy,
  listUnfinishedJobMembers,
  lockConcurrencyGroups,
  releaseHeldJob,
  replaceHeldJobs,
  runHasUnfinishedGroupJobs,
} from '../../models/concurrency-groups.ts';
import type { Queryable } from '../../models/database.ts';
import { outputsOfTasks } from '../../models/task-claims.ts';

export interface Admission {
  /** Jobs now waiting (claimable). */
  waiting: number[];
  /** Jobs whose group did not evaluate: failed. */
  failed: number[];
  /** Other jobs to cancel after the commit: held ones, and with cancel in progress the active ones too. */
  superseded: number[];
}

/** The prefix of a failed job's reason (Forgejo's wording for the workflow-level block). */
export const JOB_CONCURRENCY_ERROR = 'unable to evaluate job `concurrency` block';

/**
 * Before a run with job groups takes its row: the group lock first (the
 * lock order above). Cheap for other runs: the flag is on the run.
 */
export async function lockJobGroupsFirst(
  tx: Queryable,
  run: Pick<ActionRun, 'id' | 'repoId' | 'jobConcurrency'>,
): Promise<void> {
  if (run.jobConcurrency) await lockConcurrencyGroups(tx, run.repoId);
}

/** Whether a cancel or rerun of the run must take the group lock before the run's row. */
export async function runNeedsGroupLock(
  tx: Queryable,
  run: Pick<ActionRun, 'id' | 'jobConcurrency'>,
): Promise<boolean> {
  return run.jobConcurrency && (await runHasUnfinishedGroupJobs(tx, run.id));
}

/** The `needs` context of a job: each needed job's result and its legs' outputs (non-empty wins). */
async function needsOf(
  db: Queryable,
  job: ActionRunJob,
  runJobs: readonly ActionRunJob[],
): Promise<Record<string, NeedContext>> {
  if (job.needs.length === 0) return {};
  const needed = new Set(job.needs);
  const legs = runJobs.filter((leg) => needed.has(leg.jobId));
  const outputs = await outputsOfTasks(
    db,
    legs.filter((leg) => leg.taskId !== 0 && isDone(leg.status)).map((leg) => leg.taskId),
  );
  const needs: Record<string, NeedContext> = {};
  for (const jobId of needed) {
    const of = legs.filter((leg) => leg.jobId === jobId);
    const merged: Record<string, string> = {};
    for (const leg of of)
      for (const [key, value] of outputs.get(leg.taskId) ?? [])
        if (value !== '' || !Object.hasOwn(merged, key)) merged[key] = value;
    Object.defineProperty(needs, jobId, {
      value: { result: statusName(aggregateJobStatus(of.map((leg) => leg.status))), outputs: merged },
      enumerable: true,
    });
  }
  return needs;
}

/**
 * Admits ready jobs (blocked, needs done, declaring `concurrency:`) of `run`,
 * inside the transaction that made them ready, holding the run's row.
 */
export async function admitReadyJobs(
  tx: Queryable,
  run: ActionRun,
  jobIds: readonly number[],
  now: number,
): Promise<Admission> {
  const admission: Admission = { waiting: [], failed: [], superseded: [] };
  if (jobIds.length === 0) return admission;
  await lockConcurrencyGroups(tx, run.repoId);
  const jobs = await listJobsByIds(tx, jobIds);
  const runJobs = jobs.some((job) => job.needs.length > 0) ? await listJobsOfRun(tx, run.id) : [];
  let event: unknown;
  for (const job of jobs) {
    let group: string;
    let cancel: boolean;
    try {
      const stored = JSON.parse(job.rawConcurrency) as StoredJobConcurrency;
      event ??= JSON.parse(run.eventPayload) as unknown;
      ({ group, cancelInProgress: cancel } = evaluateJobConcurrency(stored, event, await needsOf(tx, job, runJobs)));
    } catch (error) {
      if (!(error instanceof ExpressionFailure)) throw error;
      if (await failJobConcurrency(tx, job.id, `${JOB_CONCURRENCY_ERROR}: ${error.message}`, now))
        admission.failed.push(job.id);
      continue;
    }
    const held = group !== '' && !cancel && (await jobGroupIsBusy(tx, run.repoId, group, job.id));
    if (!(await admitJob(tx, job.id, { group, cancel, held }, now))) continue;
    if (!held) admission.waiting.push(job.id);
    if (group !== '' && cancel)
      admission.superseded.push(...(await listUnfinishedJobMembers(tx, run.repoId, group, job.id)).map((m) => m.id));
    else if (held) admission.superseded.push(...(await replaceHeldJobs(tx, run.repoId, group, job.id, now)));
  }
  return admission;
}

/**
 * After jobs reached a final state (the group lock taken): for each of their
 * groups with no member waiting or running, the held job is released.
 * Returns the released jobs.
 */
export async function releaseJobGroups(
  tx: Queryable,
  finished: readonly ActionRunJob[],
  now: number,
): Promise<Array<{ id: number; runId: number }>> {
  const released: Array<{ id: number; runId: number }> = [];
  const seen = new Set<string>();
  for (const job of finished) {
    if (job.concurrencyGroup === '' || !isDone(job.status)) continue;
    const key = `${job.repoId}\u0000${job.concurrencyGroup}`;
    if (seen.has(key)) continue;
    seen.add(key);
    await lockConcurrencyGroups(tx, job.repoId);
    const next = await releaseHeldJob(tx, job.repoId, job.concurrencyGroup, now);
    if (next !== undefined) released.push(next);
  }
  return released;
}
