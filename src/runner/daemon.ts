// The runner daemon: Declare, then long-poll FetchTask and run up to
// `capacity` jobs at once (forgejo-runner internal/app/poll/poller.go and
// internal/app/cmd/daemon.go). Each FetchTask asks for as many tasks as there
// are free slots (`task_capacity`) and sends the last tasks_version seen, reset
// to 0 after a task arrives so the next call looks again. An unreachable
// server is retried with exponential backoff (1 s doubling to 30 s), both for
// Declare and for polling.
//
// Shutdown (stop()): fetching stops at once (the pending long poll is
// aborted); running jobs get `shutdownTimeoutMs` to finish, then are
// cancelled — their step's process group killed, `if: always()` steps run —
// and each is reported before stop() resolves, so no task is left running
// on the server.
import path from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import type { Task } from '../gen/runner/v1/messages_pb.ts';
import { ActionRunner } from './action-runner.ts';
import { connectToInstance, RUNNER_VERSION } from './connection.ts';
import type { RunnerConnection } from './connection.ts';
import { JobExecution } from './job-executor.ts';
import type { ExecutorSettings, UsesHandler } from './job-executor.ts';
import { labelsOf } from './registration-file.ts';
import type { RunnerRegistration } from './registration-file.ts';

export interface DaemonOptions {
  registration: RunnerRegistration;
  capacity: number;
  workdir: string;
  /** How long running jobs may go on after stop() before they are cancelled. */
  shutdownTimeoutMs: number;
  /** Deadline of one FetchTask long poll. */
  fetchTimeoutMs?: number;
  reportIntervalMs?: number;
  log: (message: string) => void;
  /** Observers of the daemon's work (the bench uses them); none by default. */
  onTaskReceived?: (taskId: bigint) => void;
  onStepStart?: (taskId: bigint, index: number) => void;
  /** Runs `uses:` steps; default: actions fetched into <workdir>/_actions, one folder per commit. */
  uses?: UsesHandler;
}

const BACKOFF_START_MS = 1000;
const BACKOFF_MAX_MS = 30_000;
/** A poll answered at once with nothing: wait this long before the next (act_runner's fetch_interval is 2 s). */
const EMPTY_POLL_PAUSE_MS = 1000;

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

export function describeError(error: unknown): string {
  if (error instanceof ConnectError) return `${Code[error.code] ?? error.code}: ${error.rawMessage}`;
  return error instanceof Error ? error.message : String(error);
}

export class RunnerDaemon {
  readonly connection: RunnerConnection;
  private readonly running = new Map<bigint, { execution: JobExecution; done: Promise<void> }>();
  private readonly stopping = new AbortController();
  private slotFreed: (() => void) | null = null;
  private readonly settings: ExecutorSettings;
  private readonly uses: UsesHandler;

  constructor(private readonly options: DaemonOptions) {
    const { registration } = options;
    this.connection = connectToInstance(registration.address, { uuid: registration.uuid, token: registration.token });
    this.settings = {
      runnerName: registration.name,
      instanceUrl: registration.address,
      labels: labelsOf(registration),
      workdir: options.workdir,
      reportIntervalMs: options.reportIntervalMs ?? 1000,
      closeDeadlineMs: 60_000,
      warn: options.log,
      onStepStart: options.onStepStart,
    };
    this.uses = options.uses ?? new ActionRunner(path.join(options.workdir, '_actions'));
  }

  get activeJobs(): number {
    return this.running.size;
  }

  /** Declares the runner (retrying while the server is unreachable), then polls until stop(). */
  async run(): Promise<void> {
    const signal = this.stopping.signal;
    let backoff = BACKOFF_START_MS;
    while (!signal.aborted) {
      try {
        const res = await this.connection.runner.declare(
          { version: RUNNER_VERSION, labels: this.settings.labels.map((label) => label.name) },
          { signal },
        );
        this.options.log(
          `runner "${res.runner?.name ?? this.settings.runnerName}" declared with labels ${this.settings.labels
            .map((l) => l.name)
            .join(', ')}; polling ${this.options.registration.address} with capacity ${this.options.capacity}`,
        );
        break;
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof ConnectError && (error.code === Code.Unauthenticated || error.code === Code.Unimplemented))
          throw new Error(`the instance refused this runner (${describeError(error)}); register it again`);
        this.options.log(`cannot declare the runner (${describeError(error)}); retrying in ${backoff / 1000} s`);
        await sleep(backoff, signal);
        backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
      }
    }
    await this.poll();
  }

  private async poll(): Promise<void> {
    const signal = this.stopping.signal;
    let tasksVersion = 0n;
    let backoff = BACKOFF_START_MS;
    while (!signal.aborted) {
      if (this.running.size >= this.options.capacity) {
        await new Promise<void>((resolve) => {
          const done = (): void => {
            signal.removeEventListener('abort', done);
            resolve();
          };
          this.slotFreed = done;
          signal.addEventListener('abort', done, { once: true });
        });
        continue;
      }
      const started = Date.now();
      try {
        const res = await this.connection.runner.fetchTask(
          { tasksVersion, taskCapacity: BigInt(this.options.capacity - this.running.size) },
          { signal, timeoutMs: this.options.fetchTimeoutMs ?? 10_000 },
        );
        backoff = BACKOFF_START_MS;
        const tasks = [res.task, ...res.additionalTasks].filter((task): task is Task => task !== undefined);
        if (tasks.length > 0) {
          tasksVersion = 0n;
          for (const task of tasks) this.startJob(task);
        } else {
          if (res.tasksVersion > tasksVersion) tasksVersion = res.tasksVersion;
          if (Date.now() - started < EMPTY_POLL_PAUSE_MS) await sleep(EMPTY_POLL_PAUSE_MS, signal);
        }
      } catch (error) {
        if (signal.aborted) break;
        // A long poll that reached its deadline is "no task", not an outage.
        if (error instanceof ConnectError && error.code === Code.DeadlineExceeded) continue;
        this.options.log(`cannot fetch tasks (${describeError(error)}); retrying in ${backoff / 1000} s`);
        await sleep(backoff, signal);
        backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
      }
    }
  }

  /**
   * `one-job --handle`: asks for the one job with that handle (Forgejo's FetchSingleTask,
   * for autoscalers that start a runner per job), runs it and resolves once it is reported.
   * False when no waiting job has that handle (within the long poll).
   */
  async runSingle(handle: string): Promise<boolean> {
    const res = await this.connection.runner.fetchSingleTask(
      { tasksVersion: 0n, handle },
      { signal: this.stopping.signal, timeoutMs: this.options.fetchTimeoutMs ?? 10_000 },
    );
    if (res.task === undefined) return false;
    await this.startJob(res.task);
    return true;
  }

  /** Runs one task; it reports itself. */
  startJob(task: Task): Promise<void> {
    this.options.onTaskReceived?.(task.id);
    const execution = new JobExecution(task, this.connection, this.settings, this.uses);
    this.options.log(`task ${task.id}: started`);
    const done = execution
      .run()
      .then(
        (result) => this.options.log(`task ${task.id}: finished (${result})`),
        (error: unknown) => this.options.log(`task ${task.id}: ${describeError(error)}`),
      )
      .finally(() => {
        this.running.delete(task.id);
        this.slotFreed?.();
        this.slotFreed = null;
      });
    this.running.set(task.id, { execution, done });
    return done;
  }

  /** Stops fetching, lets jobs run for the grace period, then cancels and reports them. */
  async stop(): Promise<void> {
    this.stopping.abort();
    const all = (): Promise<unknown> => Promise.all([...this.running.values()].map((job) => job.done));
    if (this.running.size === 0) return;
    this.options.log(
      `stopping: ${this.running.size} running job(s) get ${this.options.shutdownTimeoutMs / 1000} s to finish`,
    );
    const grace = new AbortController();
    await Promise.race([all(), sleep(this.options.shutdownTimeoutMs, grace.signal)]);
    grace.abort();
    this.cancelAll('The runner was stopped before the job finished');
    await all();
  }

  /** Cancels every running job now (a second signal during stop()). */
  cancelAll(reason: string): void {
    for (const { execution } of this.running.values()) execution.cancel(reason);
  }
}
