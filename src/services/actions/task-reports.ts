// What a runner reports while it runs a task: its state (UpdateTask — the
// heartbeat, step progress, outputs, the final result) and its log lines
// (UpdateLog, with Forgejo's ack-index protocol). Matches Forgejo's
// routers/api/actions/runner/runner.go and models/actions/task.go
// UpdateTaskByState; the log layout and durability rules are in task-logs.ts.
import path from 'node:path';
import { ActionStatus, isDone } from '../../modules/actions-status.ts';
import type { ActionStatusValue } from '../../modules/actions-status.ts';
import type { Clock } from '../../modules/clock.ts';
import { AppError } from '../../modules/errors.ts';
import { isPostgres, isRetryableError } from '../../models/database.ts';
import type { Db, Queryable, Tx } from '../../models/database.ts';
import { GroupedWrites } from '../../models/grouped-writes.ts';
import type { Runner } from '../../models/runners.ts';
import {
  closeUnfinishedSteps,
  commitLogAppend,
  commitLogArchive,
  deleteEphemeralRunner,
  findReportedTask,
  findReportedTaskWithJob,
  finishReportLockingRun,
  finishTaskAndJob,
  insertTaskOutputs,
  listTaskOutputKeys,
  listTaskSteps,
  takeWriteLock,
  touchReportAlone,
  touchTask,
  updateTaskStep,
} from '../../models/task-reports.ts';
import type { FinishedTask, ReportedTask, ReportedTaskJob, SeenTask, TaskJobRef } from '../../models/task-reports.ts';
import type { ActionRun } from '../../models/action-runs.ts';
import { ReportGroups } from './report-groups.ts';
import type { RunProgress } from './run-progress.ts';
import { plainLogName, TaskLogStore } from './task-logs.ts';
import type { LogRow, ReadLogOptions } from './task-logs.ts';

export type { LogRow, ReadLogOptions } from './task-logs.ts';

/** StepState; `id` is the step's 0-based index. Times are Unix seconds (absent or 0 = not reported). */
export interface StepReport {
  id: number;
  result: number;
  startedAt?: number;
  stoppedAt?: number;
  logIndex: number;
  logLength: number;
}

/** A StepReport whose result was checked (updateTask). */
type CheckedStepReport = Omit<StepReport, 'result'> & { result: ActionStatusValue };

/** TaskState as the runner sends it. `result` 0 = still running (a heartbeat). */
export interface TaskStateReport {
  id: number;
  result: number;
  startedAt?: number;
  stoppedAt?: number;
  steps: StepReport[];
}

export interface TaskStateAnswer {
  /** The server's view as a Result: 0 while running, CANCELLED (3) when stopped server-side. */
  result: number;
  /** Every output key stored for the task so far, not only this call's. */
  sentOutputs: string[];
}

export interface LogReport {
  taskId: number;
  /** Absolute index of rows[0]. */
  index: number;
  rows: LogRow[];
  noMore: boolean;
}

// Forgejo's limits (runner.go UpdateTask): larger outputs are ignored, not refused.
const MAX_OUTPUT_KEY_BYTES = 255;
const MAX_OUTPUT_VALUE_BYTES = 1024 * 1024;
// Concurrent appends to one task's log (a retried request overlapping the
// original) lose a conditional update at most a few times in a row.
const MAX_LOG_ATTEMPTS = 5;
/**
 * Attempts of UpdateTask's transaction. On PostgreSQL it can lose a deadlock
 * through no fault of its own: a claim whose `FOR UPDATE SKIP LOCKED` pick
 * met this task's job just as another claim committed it keeps that row
 * locked (the pick rechecks the row, skips it, and holds the lock to its
 * commit), then waits for the run's lock this report holds while this
 * report waits for the job. Run again, it finds the claim gone.
 */
const MAX_REPORT_ATTEMPTS = 5;

/** A Result the runner may send: unknown (still running) or one of the done statuses, which share their numbers. */
function isResult(value: number): value is ActionStatusValue {
  return Number.isInteger(value) && value >= ActionStatus.unknown && value <= ActionStatus.skipped;
}

/** A stored status as a Result: the done statuses share their numbers; anything else is UNSPECIFIED. */
function asResult(status: ActionStatusValue): ActionStatusValue {
  return isDone(status) ? status : ActionStatus.unknown;
}

function isMissing(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 'ENOENT';
}

function reported(time: number | undefined): boolean {
  return time !== undefined && time > 0;
}

/** What stands for U+0000 in a stored output: PostgreSQL text cannot hold NUL. */
const NUL_REPLACEMENT = '\uFFFD';

/** Outputs as stored, and the keys to acknowledge beyond the stored ones. */
interface OutputsToStore {
  rows: Array<[string, string]>;
  /** Keys as the runner sent them where the stored key differs (NUL replaced). */
  sentAs: string[];
}

/**
 * The outputs within Forgejo's limits (larger ones are ignored, as Forgejo
 * does; both runners drop them before sending), with every NUL replaced by
 * U+FFFD so PostgreSQL and SQLite store the same text. A key that needed
 * that is acknowledged as the runner sent it: runners tick off
 * `sent_outputs` by exact key and resend anything else until they give up.
 */
function outputsToStore(outputs: Record<string, string>): OutputsToStore {
  const result: OutputsToStore = { rows: [], sentAs: [] };
  for (const [key, value] of Object.entries(outputs)) {
    if (
      Buffer.byteLength(key, 'utf8') > MAX_OUTPUT_KEY_BYTES ||
      Buffer.byteLength(value, 'utf8') > MAX_OUTPUT_VALUE_BYTES
    )
      continue;
    const storedKey = key.replaceAll('\0', NUL_REPLACEMENT);
    result.rows.push([storedKey, value.replaceAll('\0', NUL_REPLACEMENT)]);
    if (storedKey !== key) result.sentAs.push(key);
  }
  return result;
}

/**
 * Whether reportAlone's statements can apply these steps as applySteps would: each
 * index at most once (applySteps lets the last report of an index win) and
 * every number a safe integer, which its bigint columns hold.
 */
function eachStepOnce(steps: readonly CheckedStepReport[]): boolean {
  const seen = new Set<number>();
  for (const step of steps) {
    if (seen.has(step.id)) return false;
    seen.add(step.id);
    if (![step.id, step.logIndex, step.logLength].every(Number.isSafeInteger)) return false;
  }
  return true;
}

/**
 * The status the server imposes on a running task, or null when it has none:
 * the job was finished without it (cancelled), or the job is gone or belongs
 * to another attempt now.
 */
function imposedStatus(task: ReportedTask, job: TaskJobRef | null): ActionStatusValue | null {
  if (job === null || job.taskId !== task.id) return ActionStatus.cancelled;
  return isDone(job.status) ? job.status : null;
}

export class TaskReportService {
  readonly logs: TaskLogStore;
  private readonly writes: GroupedWrites;
  /** PostgreSQL: the final reports that arrive together, finished in one statement (report-groups.ts). */
  private readonly reportGroups: ReportGroups;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    readonly runProgress: RunProgress,
    dataDir: string,
    /** GANTRY_ACTIONS_LOG_MAX_SIZE: past it a task's lines are acknowledged but dropped. */
    logMaxBytes: number = Number.POSITIVE_INFINITY,
    /** The process's grouped write transactions, shared with claims (one of its own otherwise). */
    writes: GroupedWrites = new GroupedWrites(db),
  ) {
    this.logs = new TaskLogStore(path.join(dataDir, 'actions_log'), logMaxBytes);
    this.writes = writes;
    this.reportGroups = new ReportGroups(db, () => clock.nowSec());
  }

  /**
   * UpdateTask. result 0: a heartbeat with step progress and outputs. Any
   * other result finishes the task, its unfinished steps and its job in one
   * transaction with the run's progress (dependants unblocked or skipped,
   * run status), and removes an ephemeral runner. On PostgreSQL either is
   * one statement instead when that is all it writes (reportAlone). A task
   * already done changes nothing. The answer is the server's view, so a job cancelled
   * server-side answers CANCELLED: the runner's only stop signal.
   */
  async updateTask(runner: Runner, state: TaskStateReport, outputs: Record<string, string>): Promise<TaskStateAnswer> {
    const result = state.result;
    if (!isResult(result)) throw AppError.invalid(`unknown result ${result}`);
    const steps: CheckedStepReport[] = [];
    for (const step of state.steps) {
      if (!Number.isInteger(step.id) || !isResult(step.result))
        throw AppError.invalid(`invalid state of step ${step.id}`);
      if (
        !Number.isInteger(step.logIndex) ||
        !Number.isInteger(step.logLength) ||
        step.logIndex < 0 ||
        step.logLength < 0
      ) {
        throw AppError.invalid(`invalid log range of step ${step.id}`);
      }
      steps.push({ ...step, result: step.result });
    }
    const accepted = outputsToStore(outputs);
    // PostgreSQL, a final report with no outputs to store: one statement, when that is all the finish writes.
    // A heartbeat too, when it needs nothing but its touch and steps.
    let seen: SeenTask | null = null;
    if (
      accepted.rows.length === 0 &&
      (result === ActionStatus.unknown || !runner.ephemeral) &&
      isPostgres(this.db) &&
      eachStepOnce(steps)
    ) {
      const alone = await this.reportAlone(runner, state.id, result, steps);
      if ('answer' in alone) return alone.answer;
      seen = alone.seen;
    }
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.reportInTransaction(runner, state, result, steps, accepted, seen);
      } catch (error) {
        if (attempt < MAX_REPORT_ATTEMPTS && isRetryableError(error)) {
          seen = null; // Read again: what the statement saw may have moved.
          continue;
        }
        throw error;
      }
    }
  }

  /** updateTask's transaction (from the task as reportAlone saw it, when it did). */
  private reportInTransaction(
    runner: Runner,
    state: TaskStateReport,
    result: ActionStatusValue,
    steps: readonly CheckedStepReport[],
    accepted: OutputsToStore,
    seenBefore: SeenTask | null,
  ): Promise<TaskStateAnswer> {
    let seen = seenBefore;
    // Committed together with the claims and reports that arrive meanwhile
    // (grouped-writes.ts); its after-commit work runs once the group commits.
    return this.runProgress.groupedTransaction(this.writes, async (tx) => {
      await takeWriteLock(tx);
      const now = this.clock.nowSec();
      // The task as reportAlone read it, if it did (the first time only: a retried transaction reads again).
      const own = seen ?? (await this.ownTaskWithJob(tx, runner, state.id));
      seen = null;
      let { task, job } = own;
      // Outputs are stored whatever the task's state, first write wins (Forgejo
      // stores them after UpdateTaskByState, even for a finished task): a
      // runner reporting after the end (the job was cancelled or swept as a
      // zombie meanwhile) gets them acknowledged and stops resending. Stored
      // and listed before the run's lock is taken, so the lock is held for
      // less; only this task's runner writes them.
      let stored = own.outputKeys;
      if (accepted.rows.length > 0) {
        await insertTaskOutputs(tx, task.id, accepted.rows);
        stored = await listTaskOutputKeys(tx, task.id);
      }
      const sentOutputs = [...stored, ...accepted.sentAs];
      const answer = (status?: ActionStatusValue) => this.answer(tx, runner, task.id, sentOutputs, status);
      if (isDone(task.status)) return answer(task.status);

      if (result !== ActionStatus.unknown || imposedStatus(task, job) !== null) {
        let run: ActionRun | null = null;
        if (job !== null) {
          // PostgreSQL, a reported result: one statement locks the run, reads
          // the task and its job again and finishes them (finishLocking).
          if (isPostgres(tx) && result !== ActionStatus.unknown) {
            const answered = await this.finishLocking(tx, task, job, result, steps, now, answer);
            if (answered !== null) return answered;
          }
          // Run first, then task, job, run again: the order every writer of a run's jobs takes.
          run = await this.runProgress.lockRunForSettle(tx, {
            id: job.runId,
            repoId: job.repoId,
            jobConcurrency: job.runJobConcurrency,
          });
          // On PostgreSQL waiting for the locks may have let the task and its job change: read again.
          // On SQLite this transaction holds the database's write lock from its start (takeWriteLock).
          if (isPostgres(tx)) {
            ({ task, job } = await this.ownTaskWithJob(tx, runner, state.id));
            if (isDone(task.status)) return answer(task.status);
          }
        }
        const imposed = imposedStatus(task, job);
        if (imposed !== null || result !== ActionStatus.unknown) {
          const status = imposed ?? result;
          // An imposed status came from whoever finished the job; they settled the run.
          const jobToFinish = imposed === null && job !== null ? job.id : null;
          // The run's jobs are counted with the finish only for a run settle would count (no job groups).
          const countRun = run !== null && !run.jobConcurrency ? run.id : null;
          const hooksOf = run === null ? null : { repoId: run.repoId, ownerId: run.ownerId };
          const finished = await finishTaskAndJob(
            tx,
            task.id,
            jobToFinish,
            status,
            now,
            steps.length === 0,
            countRun,
            hooksOf,
          );
          if (!finished.finished) return answer();
          await this.afterFinish(tx, task.id, status, steps, now, finished, run);
          return answer(status);
        }
      }

      if (!(await touchTask(tx, task.id, now))) return answer();
      await this.applySteps(tx, task.id, steps, now);
      // Still unfinished: answered as running.
      return answer(task.status);
    });
  }

  /**
   * A report on PostgreSQL that stores no outputs in one autocommitted
   * statement. A final one, from a runner that is not ephemeral, finishes
   * the task, its steps (the reported ones as applySteps, then the rest
   * closed) and its job when settling the run would write nothing else
   * (finishReportAlone says when), so the run's lock is held for that
   * statement alone; a heartbeat touches the task and applies its steps
   * when no status is imposed on it (touchReportAlone). When the statement
   * wrote nothing (the run's status changes, a dependant waits, a webhook or
   * commit status is due, the job was cancelled…) the report takes
   * updateTask's transaction, starting from the task as the statement read
   * it (so it costs no more round trips than before); that transaction
   * reads the task and its job again under the run's lock.
   */
  private async reportAlone(
    runner: Runner,
    taskId: number,
    result: ActionStatusValue,
    steps: readonly CheckedStepReport[],
  ): Promise<{ answer: TaskStateAnswer } | { seen: SeenTask | null }> {
    if (!Number.isSafeInteger(taskId) || taskId <= 0) return { seen: null };
    const reportedSteps = steps.map((step) => ({
      index: step.id,
      result: step.result,
      started: reported(step.startedAt),
      logIndex: step.logIndex,
      logLength: step.logLength,
    }));
    const now = this.clock.nowSec();
    if (result === ActionStatus.unknown) {
      let beat: Awaited<ReturnType<typeof touchReportAlone>>;
      try {
        beat = await touchReportAlone(this.db, taskId, runner.id, now, reportedSteps);
      } catch (error) {
        // A lost deadlock: the transaction does the work instead (and is run again if it loses too).
        if (isRetryableError(error)) return { seen: null };
        throw error;
      }
      if (beat.seen === null) return { seen: null };
      const { task } = beat.seen;
      this.owned(runner, task);
      // Still unfinished: answered as running.
      if (beat.touched) return { answer: { result: asResult(task.status), sentOutputs: beat.seen.outputKeys } };
      return { seen: beat.seen };
    }
    // With the final reports that arrive meanwhile, in one statement (report-groups.ts).
    const alone = await this.reportGroups.finish({ taskId, runnerId: runner.id, status: result, steps: reportedSteps });
    if (alone.seen === null) return { seen: null };
    const sentOutputs = alone.seen.outputKeys;
    this.owned(runner, alone.seen.task);
    if (alone.finished) return { answer: { result: asResult(result), sentOutputs } };
    // Done already (by another report, a cancel or the zombie sweep): the server's view.
    if (alone.doneAs !== null) return { answer: { result: asResult(alone.doneAs), sentOutputs } };
    return { seen: alone.seen };
  }

  /**
   * UpdateTask's finish on PostgreSQL: after the run's job-group lock if it
   * has job groups, one statement locks the run, reads the task and its job
   * again, finishes the task (with the status its job imposes, if any) and
   * the job with it, and counts the run's jobs as they are once locked
   * (finishReportLockingRun); then the reported steps, and the run settled.
   * Null when the run is gone: nothing was done.
   */
  private async finishLocking(
    tx: Tx,
    task: ReportedTask,
    job: ReportedTaskJob,
    result: ActionStatusValue,
    steps: readonly CheckedStepReport[],
    now: number,
    answer: (status?: ActionStatusValue) => Promise<TaskStateAnswer>,
  ): Promise<TaskStateAnswer | null> {
    await this.runProgress.lockJobGroupsBeforeRun(tx, {
      id: job.runId,
      repoId: job.repoId,
      jobConcurrency: job.runJobConcurrency,
    });
    const finished = await finishReportLockingRun(
      tx,
      task.id,
      job.id,
      job.runId,
      result,
      now,
      steps.length === 0,
      // The run's jobs are counted with the finish only for a run settle would count (no job groups).
      !job.runJobConcurrency,
      { repoId: task.repoId, ownerId: task.ownerId },
    );
    if (finished === null) return null;
    if (finished.status === null) throw AppError.notFoundMessage('task not found');
    // Done already (by another report, a cancel or the zombie sweep): the server's view.
    if (!finished.finished) return answer(finished.status);
    await this.afterFinish(tx, task.id, finished.status, steps, now, finished, finished.run);
    return answer(finished.status);
  }

  /** What follows a task's finish in its transaction: the reported steps, the rest closed, the run settled. */
  private async afterFinish(
    tx: Tx,
    taskId: number,
    status: ActionStatusValue,
    steps: readonly CheckedStepReport[],
    now: number,
    finished: FinishedTask,
    run: ActionRun | null,
  ): Promise<void> {
    if (steps.length > 0) {
      await this.applySteps(tx, taskId, steps, now);
      await closeUnfinishedSteps(tx, taskId, status, now);
    }
    if (finished.job !== null && run !== null)
      await this.runProgress.settleLocked(
        tx,
        run,
        [finished.job.id],
        [finished.job],
        finished.counts,
        finished.anyActiveHook === false,
      );
  }

  /**
   * UpdateLog, Forgejo's ack-index protocol: the ack is the number of lines
   * stored. Nothing new (no rows, a gap, or only lines already stored) →
   * the ack unchanged; otherwise the unstored tail is appended. `noMore`
   * archives the log; new lines after that are refused (conflict →
   * already_exists), while a repeated `noMore` just gets the ack.
   */
  async updateLog(runner: Runner, req: LogReport): Promise<{ ackIndex: number }> {
    if (!Number.isInteger(req.index) || req.index < 0) throw AppError.invalid(`invalid log index ${req.index}`);
    let task: ReportedTask | undefined;
    for (let attempt = 0; attempt < MAX_LOG_ATTEMPTS; attempt += 1) {
      task = await this.ownTask(this.db, runner, req.taskId);
      const ack = task.logLength;
      if (req.rows.length > 0 && req.index <= ack && req.index + req.rows.length > ack) {
        if (task.logInStorage) throw AppError.conflict('log file has been archived');
        const rows = req.rows.slice(ack - req.index);
        const filename = task.logFilename !== '' ? task.logFilename : plainLogName(task.repoId, task.id);
        const bytes = await this.logs.append(filename, task.logSize, rows);
        const next = { length: ack + rows.length, size: task.logSize + bytes };
        if (!(await commitLogAppend(this.db, task.id, { length: ack, size: task.logSize }, next, filename))) {
          // Archived meanwhile: the write above may have re-created the plain file.
          if ((await findReportedTask(this.db, task.id))?.logInStorage) await this.logs.removePlain(filename);
          continue;
        }
        task = { ...task, logFilename: filename, logLength: next.length, logSize: next.size };
      }
      // A gap means the runner holds lines this server lost: never archive without them.
      if (req.noMore && !task.logInStorage && req.index <= ack) {
        if (!(await this.archiveLog(task))) continue;
      }
      return { ackIndex: task.logLength };
    }
    // Still racing another writer: answer what is committed; the runner resends the rest.
    task = await this.ownTask(this.db, runner, req.taskId);
    return { ackIndex: task.logLength };
  }

  /** Archives a task's log if it is not yet (housekeeping, after a task is stopped). True if this call archived it. */
  async finaliseLog(taskId: number): Promise<boolean> {
    for (let attempt = 0; attempt < MAX_LOG_ATTEMPTS; attempt += 1) {
      const task = await findReportedTask(this.db, taskId);
      if (task === null || task.logInStorage) return false;
      if (await this.archiveLog(task)) return true;
    }
    return false;
  }

  /**
   * A task's log lines (without their newline), streamed from the running
   * log (up to its committed size) or the archive alike; nothing is opened
   * until iteration starts, and breaking out of it closes the file.
   */
  async *readLog(taskId: number, options: ReadLogOptions = {}): AsyncGenerator<string> {
    for (let attempt = 0; ; attempt += 1) {
      const task = await findReportedTask(this.db, taskId);
      if (task === null) throw AppError.notFoundMessage('task not found');
      let stream;
      try {
        stream = await this.logs.open({ filename: task.logFilename, inStorage: task.logInStorage, size: task.logSize });
      } catch (error) {
        // Archived (and the plain file removed) between the read and the open.
        if (isMissing(error) && attempt < MAX_LOG_ATTEMPTS) continue;
        throw error;
      }
      yield* this.logs.lines(stream, options);
      return;
    }
  }

  /** readLog, but an unknown task fails here (before a response starts) rather than on the first line. */
  async openLog(taskId: number, options: ReadLogOptions = {}): Promise<AsyncIterable<string>> {
    if ((await findReportedTask(this.db, taskId)) === null) throw AppError.notFoundMessage('task not found');
    return this.readLog(taskId, options);
  }

  private async ownTask(db: Queryable, runner: Runner, taskId: number): Promise<ReportedTask> {
    const task = Number.isSafeInteger(taskId) && taskId > 0 ? await findReportedTask(db, taskId) : null;
    return this.owned(runner, task);
  }

  /** ownTask, with the task's job (null when gone) read in the same statement. */
  private async ownTaskWithJob(
    db: Queryable,
    runner: Runner,
    taskId: number,
  ): Promise<{ task: ReportedTask; job: ReportedTaskJob | null; outputKeys: string[] }> {
    const found = Number.isSafeInteger(taskId) && taskId > 0 ? await findReportedTaskWithJob(db, taskId) : null;
    this.owned(runner, found?.task ?? null);
    return found as { task: ReportedTask; job: ReportedTaskJob | null; outputKeys: string[] };
  }

  private owned(runner: Runner, task: ReportedTask | null): ReportedTask {
    if (task === null) throw AppError.notFoundMessage('task not found');
    if (task.runnerId !== runner.id) throw AppError.forbidden('invalid runner for task');
    return task;
  }

  /**
   * The server's view of the task; an ephemeral runner whose task is done is
   * removed. `sentOutputs`: every output key stored for the task, and those
   * the runner sent in another form than stored. `status`: the task's status
   * when this transaction knows it (not read again).
   */
  private async answer(
    tx: Queryable,
    runner: Runner,
    taskId: number,
    sentOutputs: string[],
    known?: ActionStatusValue,
  ): Promise<TaskStateAnswer> {
    const status = known ?? (await findReportedTask(tx, taskId))?.status ?? ActionStatus.cancelled;
    if (isDone(status) && runner.ephemeral) await deleteEphemeralRunner(tx, runner.id);
    return { result: asResult(status), sentOutputs };
  }

  /**
   * Steps matched by index: the log range is copied; an unfinished step
   * takes the reported result, or becomes running once it reports a start.
   * Times are the server's clock (runner clocks drift), as newer Forgejo.
   */
  private async applySteps(
    tx: Queryable,
    taskId: number,
    reports: readonly CheckedStepReport[],
    now: number,
  ): Promise<void> {
    if (reports.length === 0) return;
    const steps = new Map((await listTaskSteps(tx, taskId)).map((step) => [step.index, step]));
    for (const report of reports) {
      const step = steps.get(report.id);
      if (step === undefined) continue;
      const next = { ...step, logIndex: report.logIndex, logLength: report.logLength };
      if (!isDone(step.status)) {
        if (report.result !== ActionStatus.unknown) {
          next.status = report.result;
          next.started = step.started === 0 ? now : step.started;
          next.stopped = now;
        } else if (reported(report.startedAt)) {
          next.status = ActionStatus.running;
          next.started = step.started === 0 ? now : step.started;
        }
      }
      const changed =
        next.status !== step.status ||
        next.started !== step.started ||
        next.stopped !== step.stopped ||
        next.logIndex !== step.logIndex ||
        next.logLength !== step.logLength;
      if (changed) await updateTaskStep(tx, next, now);
    }
  }

  /**
   * Compresses the committed lines and records the archive, unless the log
   * moved on or was archived meanwhile (false: re-read and retry). The
   * plain file goes only once the archive is committed.
   */
  private async archiveLog(task: ReportedTask): Promise<boolean> {
    const plainName = task.logFilename !== '' ? task.logFilename : plainLogName(task.repoId, task.id);
    let archivedName: string;
    try {
      archivedName = await this.logs.archive(plainName, task.logSize);
    } catch (error) {
      // Another process archived it and removed the plain file first.
      if (isMissing(error)) return false;
      throw error;
    }
    if (!(await commitLogArchive(this.db, task.id, task.logLength, archivedName))) return false;
    await this.logs.removePlain(plainName);
    return true;
  }
}
