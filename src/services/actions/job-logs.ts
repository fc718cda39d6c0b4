// Serving job logs (Forgejo 16's services/actions/job_logs.go): one job's log
// as text, and a zip of every job's current-attempt log of a run.
//
// Guarantees:
// - A running task's log is served up to the log_size read with the task:
//   only lines the runner has been acknowledged, never a half-written line
//   past it (task-logs.ts). A log archived between that read and the open is
//   found again through a fresh read of the task.
// - Nothing is held whole in memory: the plain file and the gunzipped archive
//   are streamed (one job's log through buffers reused for the whole
//   download, log-body.ts); a byte range of an archive is reached by skipping
//   decompressed bytes; the zip is written entry by entry (zip-stream.ts).
// - Failures after the answer started cannot change its status: in the zip a
//   log that cannot be read becomes a `.MISSING` entry, one cut mid-stream a
//   `.PARTIAL` sibling, as Forgejo's WriteRunLogsZip does. Messages never
//   carry file paths.
import { Readable } from 'node:stream';
import { ZipStream } from '../../modules/archive/zip-stream.ts';
import type { EntryResult } from '../../modules/archive/zip-stream.ts';
import { AppError } from '../../modules/errors.ts';
import { listJobsOfRun } from '../../models/action-runs.ts';
import type { ActionRunJob } from '../../models/action-runs.ts';
import type { Db } from '../../models/database.ts';
import type { Repository } from '../../models/repos.ts';
import { findJobTaskByAttempt, findJobTaskById } from '../../models/run-jobs.ts';
import type { JobTask } from '../../models/run-jobs.ts';
import { textLogBody } from './log-body.ts';
import type { LogBody } from './log-body.ts';
import type { TaskLogStore } from './task-logs.ts';
import { jobOfRepo, runOfRepo } from './jobs.ts';

/** A retry or two covers a log archived between reading the task and opening its file. */
const MAX_OPEN_ATTEMPTS = 3;

/** One job log ready to be served: its size is known before any byte is sent. */
export interface JobLog {
  /** `job-<job id>-attempt-<task attempt>.log` (Forgejo). */
  filename: string;
  /** Unix seconds: when the task stopped, or its last report while it runs. */
  modified: number;
  /** Bytes of the whole log as served now. */
  size: number;
  /** Bytes `start`..`end` (inclusive, within `size`), opened: a missing log has failed here, before any byte is sent. */
  read(start: number, end: number): Promise<LogBody>;
}

function isMissing(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 'ENOENT';
}

/** Forgejo's entry name part: control characters, DEL, `/` and `\` dropped, trimmed, `job` when blank. */
export function zipEntryJobName(name: string): string {
  // eslint-disable-next-line no-control-regex
  const cleaned = name.replace(/[\u0000-\u001f\u007f/\\]/gu, '').trim();
  return cleaned === '' ? 'job' : cleaned;
}

/** The log of a job that failed before any runner took it: the reason, one line. */
function reasonText(job: ActionRunJob): Buffer {
  return Buffer.from(`${job.concurrencyError}\n`);
}

function reasonLog(job: ActionRunJob): JobLog {
  const text = reasonText(job);
  return {
    filename: `job-${job.id}-attempt-${Math.max(job.attempt, 1)}.log`,
    modified: job.stopped,
    size: text.length,
    read: async (start, end) => textLogBody(text.subarray(start, end + 1)),
  };
}

export class JobLogService {
  constructor(
    private readonly db: Db,
    private readonly store: TaskLogStore,
  ) {}

  /**
   * The log of a job's current attempt, or of attempt `attempt` when given
   * (0, what an unparsable `?attempt=` gives, matches no task). 404s:
   * Forgejo's job lookup messages, `job has not been executed yet`, the
   * attempt's task lookup message, `logs have expired`.
   */
  async open(repo: Repository, jobId: number, attempt: number | undefined): Promise<JobLog> {
    const job = await jobOfRepo(this.db, repo, jobId);
    let task: JobTask | null;
    if (attempt !== undefined) {
      task = await findJobTaskByAttempt(this.db, job.id, attempt);
      if (task === null)
        throw AppError.notFoundMessage(`task with job_id ${job.id} and attempt ${attempt}: resource does not exist`);
    } else {
      if (job.taskId === 0 && job.concurrencyError !== '') return reasonLog(job);
      if (job.taskId === 0) throw AppError.notFoundMessage('job has not been executed yet');
      task = await findJobTaskById(this.db, job.taskId);
      if (task === null) throw AppError.notFoundMessage(`task with id ${job.taskId}: resource does not exist`);
    }
    if (task.logExpired) throw AppError.notFoundMessage('logs have expired');
    const seen = task;
    return {
      filename: `job-${job.id}-attempt-${seen.attempt}.log`,
      modified: seen.stopped !== 0 ? seen.stopped : seen.updated,
      size: seen.logSize,
      read: (start, end) => this.openRange(seen, start, end),
    };
  }

  /**
   * The run's logs as a zip, streamed: one entry per job by id,
   * `<job name>-<job id>-attempt-<job attempt>.log`, or a `.MISSING` entry
   * saying why there is no log. A 404 for the run is thrown before the first byte.
   */
  async runLogsZip(repo: Repository, runId: number): Promise<Readable> {
    const run = await runOfRepo(this.db, repo, runId);
    const jobs = await listJobsOfRun(this.db, run.id);
    return Readable.from(this.zipEntries(jobs));
  }

  private async *zipEntries(jobs: readonly ActionRunJob[]): AsyncGenerator<Buffer> {
    const zip = new ZipStream();
    for (const job of jobs) {
      const base = `${zipEntryJobName(job.name)}-${job.id}-attempt-${job.attempt}`;
      const missing = (reason: string) => zip.entry(`${base}.MISSING`, [`${reason}\n`]);
      if (job.taskId === 0 && job.concurrencyError !== '') {
        yield* zip.entry(`${base}.log`, [reasonText(job)]);
        continue;
      }
      if (job.taskId === 0) {
        yield* missing('job has not been executed yet');
        continue;
      }
      const task = await findJobTaskById(this.db, job.taskId);
      if (task === null) {
        yield* missing(`task lookup failed: task with id ${job.taskId}: resource does not exist`);
        continue;
      }
      if (task.logExpired) {
        yield* missing('logs have been cleaned up');
        continue;
      }
      const name = `${base}.log`;
      if (!zip.fits(Buffer.byteLength(name, 'utf8'), task.logSize)) {
        yield* missing("log open failed: the run's logs exceed the 4 GiB a zip archive without ZIP64 holds");
        continue;
      }
      let stream: Readable;
      try {
        stream = (await this.openRange(task, 0, task.logSize - 1)).stream();
      } catch {
        yield* missing('log open failed: the log file cannot be read');
        continue;
      }
      const result: EntryResult = { error: null };
      yield* zip.entry(name, stream as AsyncIterable<Buffer>, result);
      if (result.error !== null) yield* zip.entry(`${base}.PARTIAL`, ['log read failed mid-stream\n']);
    }
    yield* zip.finish();
  }

  /** Opens a byte range of the task's log; a log archived meanwhile is looked up again and read from the archive. */
  private async openRange(task: JobTask, start: number, end: number): Promise<LogBody> {
    let current = task;
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.store.openRange(
          { filename: current.logFilename, inStorage: current.logInStorage, size: current.logSize },
          start,
          end,
        );
      } catch (error) {
        if (!isMissing(error) || attempt >= MAX_OPEN_ATTEMPTS) throw error;
        const fresh = await findJobTaskById(this.db, current.id);
        if (fresh === null) throw error;
        // The archive holds every committed byte, so the range read before stays valid.
        current = fresh;
      }
    }
  }
}
