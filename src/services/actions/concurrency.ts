// Workflow-level concurrency groups, Forgejo 15's behaviour (services/actions/
// workflows.go ConfigureActionRunConcurrency, schedule_tasks.go
// CancelPreviousWithConcurrencyGroup, models/actions/task.go
// getConcurrencyCondition), safe with several Gantry processes on one database.
//
// Each run is created with a group (lowercased; a default one when the
// workflow names none) and a mode (modules/workflows/concurrency.ts):
// - cancel in progress: before the new run is inserted, every unfinished run
//   of its repository and group is cancelled through the cancel API's own
//   service (RunControlService.cancel): running tasks' runners get
//   RESULT_CANCELLED at their next UpdateTask and the webhooks fire exactly as
//   for POST …/runs/{id}/cancel;
// - queue behind: a run created while another run of its group is unfinished
//   has its jobs held: stored `blocked` with `concurrency_held` (out of the
//   set FetchTask claims from, which takes `waiting` jobs only), shown as
//   `waiting` by the API and the runs list. When a member of the group
//   reaches a final state, the oldest held run is released (its jobs move on
//   as the job emitter moves blocked jobs: the first ones to `waiting`, the
//   tasks version bumped so idle runners poll again) — unless another member
//   is still unfinished and not held. One at a time, oldest first;
// - unlimited: nothing happens (but its unfinished runs still hold back
//   queue-behind runs of the same group, as in Forgejo).
//
// Guarantees:
// - Never two released (claimable or running) members of a queue-behind
//   group, with any number of processes: every decision "check the group,
//   then hold or release" is taken inside the transaction that writes it,
//   after taking the group lock (lockConcurrencyGroups: the repository's run
//   counter row, locked on PostgreSQL, SQLite's write lock), and the check
//   reads the committed state of whoever held the lock before. Creating a
//   queued run and finishing a member are such transactions, so one of any two
//   sees the other's result: a run created as a member finishes is either held
//   and released by that finish, or created after it and released at once.
// - A held run is released in the transaction in which the member before it
//   reaches a final state (task report, cancel, housekeeping: all go through
//   RunProgress.settle), so a crash cannot lose a release.
// - Lock order: a finishing run's row, then the group lock, then the run
//   counts, then the released run's row. A held run's row is only ever taken
//   after the group lock: its release comes from another run's transaction
//   that holds the lock, and cancelling it takes the lock first (lockGroupFirst;
//   a run released meanwhile is an ordinary finishing run). What is left is
//   housekeeping's 24-hour abandon of a held job racing the release of that
//   very run: PostgreSQL's deadlock detection aborts one, and the next pass
//   (or the runner's repeated UpdateTask) does it again.
// - A run whose jobs have job-level groups (job-concurrency.ts) takes the
//   group lock before its own row whenever it settles; the group lock still
//   comes before any other run's row.
// - Every run creation numbers its run on the same row (action_run_index), so
//   even runs that never queue are serialised with the releases.
// - Cancel in progress is a best effort before the insert, as in Forgejo: two
//   runs created at the same moment may both run.
import type { ExpansionContext } from '../../modules/workflows/planning-scope.ts';
import { ConcurrencyMode, evaluateRunConcurrency } from '../../modules/workflows/concurrency.ts';
import type { ConcurrencyRun, RunConcurrency } from '../../modules/workflows/concurrency.ts';
import { ExpressionFailure } from '../../modules/workflows/expressions.ts';
import type { ParsedWorkflow } from '../../modules/workflows/parse.ts';
import type { ActionRun } from '../../models/action-runs.ts';
import {
  holdWaitingJobs,
  listUnfinishedMembers,
  lockConcurrencyGroups,
  releaseHeldJobs,
  runHasHeldJobs,
} from '../../models/concurrency-groups.ts';
import type { Queryable } from '../../models/database.ts';
import type { Repository } from '../../models/repos.ts';
import { AppError } from '../../modules/errors.ts';

export { ConcurrencyMode } from '../../modules/workflows/concurrency.ts';
export type { RunConcurrency } from '../../modules/workflows/concurrency.ts';

/** Cancels one run as the cancel API does (RunControlService.cancel). */
export type CancelRun = (repo: Repository, runId: number) => Promise<void>;

/** The group and mode of a new run, or the run's error (Forgejo's wording) when the block does not evaluate. */
export function planRunConcurrency(
  parsed: ParsedWorkflow,
  ctx: ExpansionContext,
  run: ConcurrencyRun,
): RunConcurrency | { error: string } {
  try {
    return evaluateRunConcurrency(parsed, ctx, run);
  } catch (error) {
    if (!(error instanceof ExpressionFailure)) throw error;
    return { error: `unable to evaluate workflow \`concurrency\` block: ${error.message}` };
  }
}

/**
 * Cancel in progress: every unfinished run of the group is cancelled before
 * the new run is inserted. A run a cancel could not finish (runners kept
 * claiming it: 409) is left; anything else propagates.
 */
export async function cancelPreviousRuns(
  db: Queryable,
  repo: Repository,
  concurrency: RunConcurrency,
  cancelRun: CancelRun,
): Promise<void> {
  if (concurrency.mode !== ConcurrencyMode.cancelInProgress) return;
  // Newest first: the queued runs go before the running one, whose end would
  // otherwise start the oldest queued run for a moment.
  for (const member of (await listUnfinishedMembers(db, repo.id, concurrency.group)).reverse()) {
    try {
      await cancelRun(repo, member.runId);
    } catch (error) {
      if (!(error instanceof AppError && error.kind === 'conflict')) throw error;
    }
  }
}

/**
 * Queue behind: whether a run about to be inserted in `tx` must hold its
 * jobs (another run of its group is unfinished). Takes the group lock, held
 * until `tx` ends, so the insert is part of the same decision.
 */
export async function mustQueue(tx: Queryable, repoId: number, concurrency: RunConcurrency): Promise<boolean> {
  if (concurrency.mode !== ConcurrencyMode.queueBehind) return false;
  await lockConcurrencyGroups(tx, repoId);
  return (await listUnfinishedMembers(tx, repoId, concurrency.group)).length > 0;
}

/**
 * A finished run starting another attempt (rerun) queues like a new run: its
 * waiting jobs are held while another run of its queue-behind group is
 * unfinished (Forgejo: a rerun of an old run still waits for the running
 * one). Call after the jobs were prepared and before the run's status is
 * written, holding the run's row (the lock order above).
 */
export async function holdRerunIfQueued(
  tx: Queryable,
  run: Pick<ActionRun, 'id' | 'repoId' | 'concurrencyGroup' | 'concurrencyType'>,
  now: number,
): Promise<void> {
  const concurrency = { group: run.concurrencyGroup, mode: run.concurrencyType as RunConcurrency['mode'] };
  if (run.concurrencyGroup === '' || concurrency.mode !== ConcurrencyMode.queueBehind) return;
  await lockConcurrencyGroups(tx, run.repoId);
  const others = await listUnfinishedMembers(tx, run.repoId, run.concurrencyGroup, run.id);
  if (others.length > 0) await holdWaitingJobs(tx, run.id, now);
}

/**
 * Before a cancel takes a run's row: a run with held jobs is released by
 * another run's transaction that holds the group lock and then takes this
 * run's row, so the cancel takes the group lock first (the same order).
 */
export async function lockGroupFirst(
  tx: Queryable,
  run: Pick<ActionRun, 'id' | 'repoId' | 'concurrencyGroup'>,
): Promise<void> {
  if (run.concurrencyGroup !== '' && (await runHasHeldJobs(tx, run.id))) await lockConcurrencyGroups(tx, run.repoId);
}

/**
 * Call when `run` is about to reach a final state, inside that transaction
 * and before the run counts are written (the lock order above).
 */
export async function lockGroupOf(tx: Queryable, run: Pick<ActionRun, 'repoId' | 'concurrencyGroup'>): Promise<void> {
  if (run.concurrencyGroup !== '') await lockConcurrencyGroups(tx, run.repoId);
}

/**
 * After `finished` reached a final state (lockGroupOf taken): the oldest held
 * run of its group is released when no other member is unfinished and
 * released. Returns that run's id and the ids of its jobs whose hold was
 * lifted (the caller settles it), or undefined.
 */
export async function releaseNextRun(
  tx: Queryable,
  finished: Pick<ActionRun, 'id' | 'repoId' | 'concurrencyGroup'>,
  now: number,
): Promise<{ runId: number; jobIds: number[] } | undefined> {
  if (finished.concurrencyGroup === '') return undefined;
  const members = await listUnfinishedMembers(tx, finished.repoId, finished.concurrencyGroup, finished.id);
  if (members.some((member) => !member.held)) return undefined;
  const next = members[0];
  if (next === undefined) return undefined;
  return { runId: next.runId, jobIds: await releaseHeldJobs(tx, next.runId, now) };
}
