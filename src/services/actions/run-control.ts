// Run control: cancel a run, start another attempt of a finished run (all
// jobs, the failed ones, or one job with its dependants), delete a finished
// run. Forgejo: services/actions/run.go (CancelRun, DeleteRun), rerun.go,
// task.go (StopTask); the paths and answers are in http/api/v1/actions-run-control.ts.
//
// Guarantees:
// - Each transaction takes the run's lock first (and SQLite's write lock),
//   the order every writer of a run's jobs takes (task-reports.ts,
//   housekeeping.ts), and every job or task transition is a conditional
//   update on the state read. Rerun and delete are one transaction; a cancel
//   is one per pass, a new pass for the jobs runners were claiming meanwhile. A cancel racing a runner's final
//   UpdateTask ends in one state: whichever commits first wins, and the other
//   sees a finished task or job and changes nothing.
// - A runner learns of a cancel only from its next UpdateTask answer
//   (RESULT_CANCELLED, task-reports.ts); UpdateLog keeps acknowledging.
//   An ephemeral runner whose task is stopped is removed, as Forgejo does.
// - A rerun keeps the job rows (same ids) and their old tasks with logs;
//   each rerun job gets `attempt` + 1 and a new handle; the next claim
//   creates the attempt's task. Run and job status events are recorded as
//   for a new run, so workflow_run `requested` and workflow_job `queued`
//   webhooks go out again.
// - A deleted run's rows go in one transaction; its log files after the
//   commit (an after-commit hook of DomainEvents), so no row ever points at
//   a missing file.
import { randomUUID } from 'node:crypto';
import { ActionStatus, aggregateJobStatus, isDone, shownJobStatus } from '../../modules/actions-status.ts';
import type { Clock } from '../../modules/clock.ts';
import { isWorkflowDisabled } from '../../models/workflow-states.ts';
import { AppError } from '../../modules/errors.ts';
import { rerunStatuses } from '../../modules/rerun-selection.ts';
import { markForDeletion } from '../../models/artifacts.ts';
import type { RerunSelection } from '../../modules/rerun-selection.ts';
import {
  deleteFinishedRun,
  findRunById,
  listJobsOfRun,
  lockRun,
  restartRun,
  unblockJobs,
} from '../../models/action-runs.ts';
import type { ActionRun, ActionRunJob, DeletedTaskLog } from '../../models/action-runs.ts';
import { isRetryableError } from '../../models/database.ts';
import type { Db, Queryable, Tx } from '../../models/database.ts';
import type { Repository } from '../../models/repos.ts';
import { cancelJob, lockUnfinishedJobsOfRun, prepareNextAttempt } from '../../models/run-control.ts';
import { bumpTasksVersionsForRepo } from '../../models/runners.ts';
import { findJobById } from '../../models/task-claims.ts';
import {
  closeUnfinishedSteps,
  deleteEphemeralRunner,
  findReportedTask,
  finishTask,
  takeWriteLock,
} from '../../models/task-reports.ts';
import type { DomainEvents } from '../events.ts';
import type { GitRepositories } from '../git-repositories.ts';
import { holdRerunIfQueued, lockGroupFirst } from './concurrency.ts';
import { awaitAdmission } from '../../models/concurrency-groups.ts';
import type { RunProgress } from './run-progress.ts';
import { plainLogName } from './task-logs.ts';
import type { TaskLogStore } from './task-logs.ts';
import type { WorkflowCatalog } from './workflow-catalog.ts';

export type { RerunSelection } from '../../modules/rerun-selection.ts';

/** Gitea's refusal of a rerun or delete of a run that has not finished (routers/api/v1/repo/action.go). */
export const RUN_NOT_DONE = 'this workflow run is not done';

// A transaction that lost a deadlock (PostgreSQL: a claim locks the job row,
// then the run; we lock the run, then the jobs) or a busy SQLite is retried.
const MAX_TX_ATTEMPTS = 5;
// Passes of a cancel while runners keep claiming its jobs (each pass takes every job not being claimed).
const MAX_CANCEL_PASSES = 20;

async function retrying<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await work();
    } catch (error) {
      if (attempt < MAX_TX_ATTEMPTS && isRetryableError(error)) continue;
      throw error;
    }
  }
}

export interface RerunResult {
  run: ActionRun;
  /** Every job of the run as it now is, in id order. */
  jobs: ActionRunJob[];
}

export class RunControlService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly events: DomainEvents,
    private readonly progress: RunProgress,
    private readonly catalog: WorkflowCatalog,
    private readonly git: GitRepositories,
    private readonly logs: TaskLogStore,
  ) {
    events.afterCommit(async (event) => {
      if (event.type === 'actions.run.deleted') await this.removeLogs(event.tasks);
      // Older members of a job group a newer one replaces (job-concurrency.ts).
      else if (event.type === 'actions.jobs.superseded') await this.cancelJobs(event.jobIds);
    });
  }

  /**
   * Forgejo's CancelRun: every waiting or running job becomes cancelled (its
   * running task too, with its unfinished steps), blocked jobs are skipped,
   * then the run's status follows. A finished run changes nothing (Forgejo
   * answers 204 all the same). Jobs a runner is claiming at this moment are
   * left to that claim, which commits right after this transaction (it waits
   * for the run's lock), and are cancelled by the next pass: when this
   * returns, nothing of the run is left unfinished.
   */
  async cancel(repo: Repository, runId: number): Promise<void> {
    const run = await this.runOf(this.db, repo, runId);
    for (let pass = 0; pass < MAX_CANCEL_PASSES; pass += 1) {
      const busy = await retrying(() => this.progress.transaction(this.db, (tx) => this.cancelPass(tx, run)));
      if (busy === 0) return;
    }
    throw AppError.conflict('runners kept claiming jobs of the run while it was cancelled, try again');
  }

  /**
   * Cancels jobs of any runs as the cancel API cancels a run's waiting and
   * running jobs (older members of a job group, job-concurrency.ts): each
   * run in its own transactions, its dependants skipped. A job that finished
   * meanwhile is left as it is; a run whose jobs runners kept claiming is left
   * (logged by the caller of the after-commit hook).
   */
  async cancelJobs(jobIds: readonly number[]): Promise<void> {
    const byRun = new Map<number, Set<number>>();
    for (const id of jobIds) {
      const job = await findJobById(this.db, id);
      if (job === null || isDone(job.status)) continue;
      byRun.set(job.runId, (byRun.get(job.runId) ?? new Set()).add(id));
    }
    for (const [runId, ids] of byRun) {
      const run = await findRunById(this.db, runId);
      if (run === null) continue;
      for (let pass = 0; pass < MAX_CANCEL_PASSES; pass += 1) {
        const busy = await retrying(() => this.progress.transaction(this.db, (tx) => this.cancelPass(tx, run, ids)));
        if (busy === 0) break;
      }
    }
  }

  /**
   * One transaction of a cancel (of the run, or of `only` its jobs); returns
   * how many unfinished jobs it could not lock (claims in flight).
   */
  private async cancelPass(tx: Tx, run: ActionRun, only?: ReadonlySet<number>): Promise<number> {
    const runId = run.id;
    await takeWriteLock(tx);
    await lockGroupFirst(tx, run);
    await this.progress.lockRun(tx, runId);
    const now = this.clock.nowSec();
    const locked = await lockUnfinishedJobsOfRun(tx, runId);
    const jobs = only === undefined ? locked.jobs : locked.jobs.filter((job) => only.has(job.id));
    const busy = only === undefined ? locked.busy : 0;
    const changed: number[] = [];
    // A job held behind an older run of its concurrency group, or behind a
    // member of its job group, is waiting to the user (concurrency.ts,
    // job-concurrency.ts): cancelled like one.
    const needsBlocked = (job: ActionRunJob): boolean =>
      job.status === ActionStatus.blocked && !job.concurrencyHeld && !job.groupHeld;
    for (const job of jobs) {
      if (needsBlocked(job)) continue;
      if (await this.cancelOne(tx, job, now)) changed.push(job.id);
    }
    // Dependants never start: skipped, as the job emitter would mark them
    // after a cancelled need (a dependant with `if:` would otherwise be released).
    // Cancelling some jobs leaves the others to the job emitter (settle).
    const blocked = only === undefined ? jobs.filter(needsBlocked) : [];
    changed.push(...(await unblockJobs(tx, new Map(blocked.map((job) => [job.id, ActionStatus.skipped])), now)));
    if (changed.length > 0) await this.progress.settle(tx, runId, changed);
    return busy;
  }

  /**
   * Starts the next attempt of a finished run's selected jobs. Refused (400)
   * while the run or one of its jobs is unfinished, when the workflow no
   * longer parses at the run's commit, or when "failed jobs" finds none.
   */
  async rerun(repo: Repository, runId: number, selection: RerunSelection): Promise<RerunResult> {
    const run = await this.runOf(this.db, repo, runId);
    if (!isDone(run.status)) throw AppError.invalid(RUN_NOT_DONE);
    await this.checkWorkflow(repo, run);
    return retrying(() =>
      // A transaction with after-commit work: a rerun job's cancel in progress (job-concurrency.ts).
      this.progress.transaction(this.db, async (tx) => {
        await takeWriteLock(tx);
        await this.progress.lockRun(tx, run.id);
        const current = await this.runOf(tx, repo, run.id);
        const jobs = await listJobsOfRun(tx, run.id);
        if (!isDone(current.status) || !jobs.every((job) => isDone(job.status))) throw AppError.invalid(RUN_NOT_DONE);
        if (selection.kind === 'job' && !jobs.some((job) => job.id === selection.id))
          throw AppError.notFoundMessage(`workflow job with id ${selection.id}`);
        const next = rerunStatuses(jobs, selection);
        if (next.size === 0) throw AppError.invalid('this workflow run has no failed jobs to re-run');
        const now = this.clock.nowSec();
        for (const job of jobs) {
          const status = next.get(job.id);
          if (status === undefined) continue;
          // Under the run's lock nothing else moves a finished job; if one did, start over.
          if (!(await prepareNextAttempt(tx, job, status, randomUUID(), now)))
            throw AppError.conflict('the run changed meanwhile, try again');
        }
        // Forgejo's rerun marks the run's artifacts for deletion (services/actions/rerun.go): the new
        // attempt uploads its own; the retention pass removes the files.
        await markForDeletion(tx, { runId: run.id, name: null }, now);
        await holdRerunIfQueued(tx, current, now);
        // Jobs with a job group that are ready (and not held with a queued run)
        // wait for their admission (job-concurrency.ts), which settle below does.
        await awaitAdmission(
          tx,
          jobs.filter((job) => job.rawConcurrency !== '' && next.get(job.id) === ActionStatus.waiting).map((j) => j.id),
          now,
        );
        const status = aggregateJobStatus((await listJobsOfRun(tx, run.id)).map(shownJobStatus));
        const restarted = await restartRun(tx, current, status, now);
        if (restarted === undefined) throw AppError.conflict('the run changed meanwhile, try again');
        // Recorded before the jobs' events, as for a new run: workflow_run `requested`, then workflow_job `queued`.
        if (restarted.status !== current.status)
          await this.events.record(tx, { type: 'actions.run.status-changed', run: restarted, previous: current });
        const settled = (await this.progress.settle(tx, run.id, [...next.keys()])) ?? restarted;
        // Runners long-polling this scope look again (the jobs are waiting now).
        await bumpTasksVersionsForRepo(tx, run.ownerId, run.repoId, now);
        return { run: settled, jobs: await listJobsOfRun(tx, run.id) };
      }),
    );
  }

  /**
   * Deletes a finished run with its jobs, tasks (steps, outputs) and, after
   * the commit, their log files. An unfinished run is refused with Gitea's
   * 400 (Forgejo answers 500, a bug).
   */
  async deleteRun(repo: Repository, runId: number): Promise<void> {
    const run = await this.runOf(this.db, repo, runId);
    if (!isDone(run.status)) throw AppError.invalid(RUN_NOT_DONE);
    await retrying(() =>
      this.events.transaction(this.db, async (tx) => {
        await takeWriteLock(tx);
        await lockRun(tx, run.id);
        const current = await this.runOf(tx, repo, run.id);
        const jobs = await listJobsOfRun(tx, run.id);
        if (!isDone(current.status) || !jobs.every((job) => isDone(job.status))) throw AppError.invalid(RUN_NOT_DONE);
        // The artifacts' files go with the next retention pass; their rows stay as `deleted`.
        await markForDeletion(tx, { runId: current.id, name: null }, this.clock.nowSec());
        const tasks = await deleteFinishedRun(tx, current);
        if (tasks === undefined) throw AppError.invalid(RUN_NOT_DONE);
        await this.events.record(tx, { type: 'actions.run.deleted', run: current, tasks });
      }),
    );
  }

  /** A run of `repo` by its global id; 404 with Forgejo's messages (as GET …/runs/{run_id}). */
  private async runOf(db: Queryable, repo: Repository, runId: number): Promise<ActionRun> {
    const run = runId > 0 ? await findRunById(db, runId) : null;
    if (run === null) throw AppError.notFoundMessage(`run with id ${runId}: resource does not exist`);
    if (run.repoId !== repo.id) throw AppError.notFoundMessage('resource does not exist');
    return run;
  }

  /**
   * Cancels one waiting or running job, re-reading it when a conditional
   * update lost (a runner claimed it between our read and our write); true
   * when this call cancelled it.
   */
  private async cancelOne(tx: Tx, job: ActionRunJob, now: number): Promise<boolean> {
    let current: ActionRunJob | null = job;
    for (let attempt = 0; attempt < MAX_TX_ATTEMPTS && current !== null; attempt += 1) {
      const held = current.status === ActionStatus.blocked && (current.concurrencyHeld || current.groupHeld);
      if (current.status !== ActionStatus.waiting && current.status !== ActionStatus.running && !held) return false;
      if (await cancelJob(tx, current, now)) {
        if (current.taskId !== 0) await this.stopTask(tx, current.taskId, now);
        return true;
      }
      current = await findJobById(tx, job.id);
    }
    return false;
  }

  /** Forgejo's StopTask: the task and its unfinished steps are cancelled; an ephemeral runner that owned it is removed. */
  private async stopTask(tx: Queryable, taskId: number, now: number): Promise<void> {
    if (!(await finishTask(tx, taskId, ActionStatus.cancelled, now))) return;
    await closeUnfinishedSteps(tx, taskId, ActionStatus.cancelled, now);
    const task = await findReportedTask(tx, taskId);
    if (task !== null) await deleteEphemeralRunner(tx, task.runnerId);
  }

  /** Forgejo refuses to rerun a workflow that is no longer valid at the run's commit (rerun.go). */
  private async checkWorkflow(repo: Repository, run: ActionRun): Promise<void> {
    // A disabled workflow is triggered by nothing, a rerun included (Gitea: 400).
    if (await isWorkflowDisabled(this.db, repo.id, run.workflowId))
      throw AppError.invalid(`workflow ${run.workflowId} is disabled`);
    const workflow = await this.catalog.workflowAt(this.git.reader(repo), run.commitSha, run.workflowId);
    if (workflow === null || workflow.parsed.errors.length > 0)
      throw AppError.invalid(`workflow ${run.workflowId} is invalid`);
  }

  /** The plain and archived log of each deleted task (either may exist after a crash between archive and cleanup). */
  private async removeLogs(tasks: readonly DeletedTaskLog[]): Promise<void> {
    for (const task of tasks) {
      const plain = plainLogName(task.repoId, task.taskId);
      const names = new Set([plain, `${plain}.gz`, task.logFilename].filter((name) => name !== ''));
      // removePlain is a forced `rm` of one stored name: right for any of them.
      for (const name of names) await this.logs.removePlain(name);
    }
  }
}
