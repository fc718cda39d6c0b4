// Reports one task to the instance as forgejo-runner does
// (internal/pkg/report/reporter.go): log lines are buffered and, every
// interval, sent with UpdateLog from the first line the server has not
// acknowledged (`index` = acknowledged count, rows dropped once acknowledged),
// then the task state goes out with UpdateTask (steps by index with their log
// range and result, not-yet-acknowledged outputs). An UpdateTask answer whose
// result is final while the job still runs (cancelled from the API) asks the
// job to stop. Closing sends the remaining lines with `no_more` and the final
// state, retrying until both went through or the close deadline passed.
//
// Guarantees: every line passes the masker before it is buffered, so no
// secret is ever held for sending; a step's lines are contiguous (steps run
// one after another and job-level lines are only written outside steps), so
// `log_index`/`log_length` describe exactly its lines.
import { timestampNow } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError } from '@connectrpc/connect';
import type { Timestamp } from '@bufbuild/protobuf/wkt';
import { Result } from '../gen/runner/v1/messages_pb.ts';
import type { RunnerConnection } from './connection.ts';
import type { Masker } from './masker.ts';

/** Forgejo's limits (reporter.go outputKeyMaxLength / outputValueMaxLength). */
const OUTPUT_KEY_MAX = 255;
const OUTPUT_VALUE_MAX = 1024 * 1024;
/** Rows per UpdateLog, so a burst of output never makes one oversized request. */
const ROWS_PER_REQUEST = 2000;
/** Forgejo's line limit is 64 KiB of content; longer lines are cut here rather than refused there. */
const MAX_LINE_CHARS = 64 * 1024;

interface StepReport {
  result: Result;
  startedAt?: Timestamp;
  stoppedAt?: Timestamp;
  logIndex: number;
  logLength: number;
}

interface Row {
  time: Timestamp;
  content: string;
}

export interface ReporterOptions {
  intervalMs: number;
  /** Called once when the server says the task is over (cancelled) while it still runs here. */
  onRemoteStop: (result: Result) => void;
  /** How long close() keeps retrying when the server cannot be reached. */
  closeDeadlineMs: number;
  /** Where transport errors go (the daemon's own log). */
  warn: (message: string) => void;
}

export class TaskReporter {
  private readonly rows: Row[] = [];
  /** Lines the server has acknowledged (UpdateLog's ack_index). */
  private logOffset = 0;
  private readonly steps: StepReport[];
  private result = Result.UNSPECIFIED;
  private readonly startedAt = timestampNow();
  private stoppedAt: Timestamp | undefined;
  /** Outputs not yet acknowledged in UpdateTaskResponse.sent_outputs. */
  private readonly pendingOutputs = new Map<string, string>();
  private readonly sentOutputs = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  /** Serialises network calls: a tick and close never interleave. */
  private chain: Promise<void> = Promise.resolve();
  private stopSignalled = false;
  private closed = false;

  constructor(
    private readonly connection: RunnerConnection,
    readonly taskId: bigint,
    stepCount: number,
    private readonly masker: Masker,
    private readonly options: ReporterOptions,
  ) {
    this.steps = Array.from({ length: stepCount }, () => ({ result: Result.UNSPECIFIED, logIndex: 0, logLength: 0 }));
  }

  start(): void {
    const tick = (): void => {
      this.timer = setTimeout(() => {
        void this.serialised(() => this.report(false)).then(() => {
          if (!this.closed) tick();
        });
      }, this.options.intervalMs);
    };
    tick();
  }

  private append(content: string): number {
    const masked = this.masker.mask(content.replace(/[\r\n]+$/, ''));
    this.rows.push({
      time: timestampNow(),
      content: masked.length > MAX_LINE_CHARS ? masked.slice(0, MAX_LINE_CHARS) : masked,
    });
    return this.logOffset + this.rows.length - 1;
  }

  /** A line outside any step (set up, clean up, pre and post steps of actions). */
  jobLog(content: string): void {
    this.append(content);
  }

  stepStarted(index: number): void {
    const step = this.steps[index];
    if (step !== undefined) step.startedAt = timestampNow();
  }

  stepLog(index: number, content: string): void {
    const line = this.append(content);
    const step = this.steps[index];
    if (step === undefined) return;
    if (step.logLength === 0) step.logIndex = line;
    step.logLength += 1;
  }

  stepFinished(index: number, result: Result): void {
    const step = this.steps[index];
    if (step === undefined) return;
    if (step.logLength === 0) step.logIndex = this.logOffset + this.rows.length;
    step.startedAt ??= timestampNow();
    step.stoppedAt = timestampNow();
    step.result = result;
  }

  /** Job outputs (sent only for a successful job, as forgejo-runner does); first value of a key wins. */
  setOutputs(outputs: Record<string, string>): void {
    for (const [key, value] of Object.entries(outputs)) {
      if (key.length > OUTPUT_KEY_MAX) {
        this.jobLog(`ignore output because the key is longer than ${OUTPUT_KEY_MAX}: "${key}"`);
      } else if (Buffer.byteLength(value) > OUTPUT_VALUE_MAX) {
        this.jobLog(`ignore output because the value of "${key}" is longer than ${OUTPUT_VALUE_MAX} bytes`);
      } else if (!this.pendingOutputs.has(key) && !this.sentOutputs.has(key)) {
        this.pendingOutputs.set(key, value);
      }
    }
  }

  private serialised(work: () => Promise<void>): Promise<void> {
    const next = this.chain.then(work, work);
    this.chain = next.catch(() => undefined);
    return next;
  }

  private async sendLog(noMore: boolean): Promise<void> {
    for (;;) {
      const batch = this.rows.slice(0, ROWS_PER_REQUEST);
      const last = batch.length === this.rows.length;
      let res;
      try {
        res = await this.connection.runner.updateLog({
          taskId: this.taskId,
          index: BigInt(this.logOffset),
          rows: batch,
          noMore: noMore && last,
        });
      } catch (error) {
        // The server archived the log (the task was stopped there): no line can be added any
        // more, so the rest is dropped rather than retried forever.
        if (error instanceof ConnectError && error.code === Code.AlreadyExists) {
          this.options.warn(`task ${this.taskId}: the log is closed on the server; ${this.rows.length} lines dropped`);
          this.rows.length = 0;
          return;
        }
        throw error;
      }
      const ack = Number(res.ackIndex);
      if (ack < this.logOffset) throw new Error(`submitted logs are lost (${ack} < ${this.logOffset})`);
      const accepted = ack - this.logOffset;
      this.rows.splice(0, Math.min(accepted, this.rows.length));
      this.logOffset = ack;
      if (last) {
        if (noMore && this.rows.length > 0) throw new Error(`not all logs are submitted, ${this.rows.length} remain`);
        return;
      }
      // The server took less than offered: the rest waits for the next report.
      if (accepted < batch.length) {
        if (noMore) throw new Error(`not all logs are submitted, ${this.rows.length} remain`);
        return;
      }
    }
  }

  private async sendState(): Promise<void> {
    const outputs = Object.fromEntries(this.pendingOutputs);
    const res = await this.connection.runner.updateTask({
      state: {
        id: this.taskId,
        result: this.result,
        startedAt: this.startedAt,
        stoppedAt: this.stoppedAt,
        steps: this.steps.map((step, id) => ({
          id: BigInt(id),
          result: step.result,
          startedAt: step.startedAt,
          stoppedAt: step.stoppedAt,
          logIndex: BigInt(step.logIndex),
          logLength: BigInt(step.logLength),
        })),
      },
      outputs,
    });
    for (const key of res.sentOutputs) {
      this.pendingOutputs.delete(key);
      this.sentOutputs.add(key);
    }
    const remote = res.state?.result ?? Result.UNSPECIFIED;
    if (
      (remote === Result.CANCELLED || remote === Result.FAILURE) &&
      this.result === Result.UNSPECIFIED &&
      !this.stopSignalled
    ) {
      this.stopSignalled = true;
      this.options.onRemoteStop(remote);
    }
    if (this.pendingOutputs.size > 0 && this.result !== Result.UNSPECIFIED)
      throw new Error(`${this.pendingOutputs.size} outputs are not acknowledged yet`);
  }

  private async report(final: boolean): Promise<void> {
    try {
      await this.sendLog(final);
      await this.sendState();
    } catch (error) {
      if (final) throw error;
      this.options.warn(
        `task ${this.taskId}: report failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }

  /**
   * Final report: steps that never finished become cancelled (forgejo-runner's
   * setStepCancel), `lastWords` ends the log, then lines with no_more and the
   * final state, retried with backoff until they went through or the deadline.
   */
  async close(result: Result, lastWords?: string): Promise<boolean> {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    for (const step of this.steps) {
      if (step.result !== Result.UNSPECIFIED) continue;
      step.result = step.startedAt === undefined && result === Result.SKIPPED ? Result.SKIPPED : Result.CANCELLED;
      if (step.logLength === 0) step.logIndex = this.logOffset + this.rows.length;
    }
    if (lastWords !== undefined && lastWords !== '') this.jobLog(lastWords);
    this.result = result;
    this.stoppedAt = timestampNow();
    const deadline = Date.now() + this.options.closeDeadlineMs;
    let delay = 200;
    for (;;) {
      try {
        await this.serialised(() => this.report(true));
        return true;
      } catch (error) {
        if (Date.now() + delay > deadline) {
          this.options.warn(
            `task ${this.taskId}: giving up reporting the result: ${error instanceof Error ? error.message : String(error)}`,
          );
          return false;
        }
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 5000);
      }
    }
  }
}
