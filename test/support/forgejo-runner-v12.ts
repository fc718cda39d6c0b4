// An emulation of forgejo-runner v12's client side, line by line from its
// published behaviour (code.forgejo.org/forgejo/runner: internal/pkg/client,
// internal/app/poll, internal/pkg/report), so the tests drive Gantry the way
// the real binary does without a Go toolchain or Docker. act-runner.ts
// derives Gitea's act_runner from it (its differences are the Flavour).
//
// What it does, and where the real client does it:
// - transport: connect-go, binary codec, uncompressed requests, gzip answers,
//   HTTP/1.1 keep-alive (connect-go-wire.ts); headers x-runner-uuid and
//   x-runner-token once registered, no version header (client/http.go);
// - `register`: Ping until it answers, then Register with label NAMES only
//   (the `:docker://image` part stays local), in `labels` and `agent_labels`
//   (cmd/register.go);
// - `daemon`: Declare, then one poller per capacity slot; all slots share one
//   rate limiter of one FetchTask per fetch_interval (2 s) and one tasks
//   version; each FetchTask carries only tasks_version, under a fetch_timeout
//   (5 s) deadline sent as Connect-Timeout-Ms, and an x-runner-request-key that
//   is kept across failed calls and replaced after a successful one
//   (poll/poller.go);
// - `job --handle`: FetchSingleTask for one job, what autoscalers start;
// - the reporter: every report_interval (1 s) UpdateLog with every row not
//   acknowledged yet, from its offset, then UpdateTask with the whole state
//   and the outputs not acknowledged yet; on the end, UpdateLog with no_more
//   and a final UpdateTask, retried (10 attempts) until both succeed, the logs
//   are all acknowledged and no output is left unacknowledged
//   (report/reporter.go Close, ReportLog, ReportState);
// - a remote result of CANCELLED or FAILURE that differs from the local one
//   stops the job (ReportState).
//
// The "executor" runs nothing: each step's `run:` lines are logged, and
// `echo "k=v" >> $GITHUB_OUTPUT` sets a step output, enough for job outputs
// and `needs.<job>.outputs.<k>` to travel end to end.
import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import { parse as parseYaml } from 'yaml';
import { callUnary, createAgent, WireError } from './connect-go-wire.ts';
import {
  decodeFetchSingleTask,
  decodeFetchTask,
  decodePing,
  decodeRunnerResponse,
  decodeUpdateLog,
  decodeUpdateTask,
  encodeDeclare,
  encodeFetchSingleTask,
  encodeFetchTask,
  encodePing,
  encodeRegister,
  encodeUpdateLog,
  encodeUpdateTask,
  Result,
  timestampOf,
} from './runner-wire.ts';
import type { LogRow, TaskState, WireRunner, WireTask } from './runner-wire.ts';

/** What differs between the runners this file emulates. */
export interface Flavour {
  name: string;
  userAgent: string;
  /** Register #8 and Declare #3 (newest act_runner only). */
  capabilities: string[];
  /** forgejo-runner 2026 builds send x-runner-request-key on FetchTask. */
  sendsRequestKey: boolean;
  /**
   * act_runner hands the job's outputs to the reporter (SetOutputs) before the
   * job result, so one UpdateTask carries them with RESULT_UNSPECIFIED;
   * forgejo-runner sets them with the success result.
   */
  outputsBeforeResult: boolean;
  /**
   * The last log row, sent with no_more: forgejo-runner's closing line, or
   * act_runner's empty row (its closing words are empty for a job that ended
   * normally).
   */
  closingRow: (result: number) => string;
  /** The remote results that make the reporter stop the job. */
  stopsOn: number[];
}

export const FORGEJO_RUNNER_V12: Flavour = {
  name: 'forgejo-runner',
  userAgent: 'connect-go/1.18.1 (go1.24.4)',
  capabilities: [],
  sendsRequestKey: true,
  outputsBeforeResult: false,
  closingRow: (result) => (result === Result.success ? 'Job succeeded' : 'Job failed'),
  stopsOn: [Result.cancelled, Result.failure],
};

export interface EmulatedRunnerOptions {
  /** Instance URLs; each procedure's calls go round robin over them, like a proxy in front of several Gantry processes. */
  urls: string[];
  name: string;
  /** Label specs as in the runner's config (`name[:schema[:arg]]`); only the names reach the server. */
  labels: string[];
  version?: string;
  ephemeral?: boolean;
  capacity?: number;
  fetchIntervalMs?: number;
  fetchTimeoutMs?: number;
  reportIntervalMs?: number;
  /** How long each step "runs" (so the 1 s reporter ticks while it does). */
  stepMs?: number;
  closeAttempts?: number;
  closeRetryDelayMs?: number;
  /** Fault injection: true drops this answer as if the network lost it after the server sent it. */
  loseAnswer?: (procedure: string, attempt: number) => boolean;
  /**
   * Called when the job's steps are done, before the reporter learns the
   * result: may change the outputs the job set, or change things server-side
   * (the job cancelled meanwhile) so the closing reports arrive late.
   */
  onJobEnd?: (task: WireTask, outputs: Record<string, string>) => Promise<void> | void;
}

/** What one task looked like from the runner's side, once it ended. */
export interface TaskRecord {
  task: WireTask;
  /** The server's last answer to UpdateTask. */
  remoteResult: number;
  localResult: number;
  /** Attempts of the closing UpdateLog(no_more) + UpdateTask; 1 = done at once. */
  closeAttempts: number;
  closed: boolean;
  /** Output keys never acknowledged by the server. */
  unacknowledgedOutputs: string[];
  /** Lines the server acknowledged. */
  logAck: number;
  /** How the answers came: gzip or identity. */
  encodings: Set<string>;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const ACKED = Symbol('acknowledged');

/** `echo "k=v" >> $GITHUB_OUTPUT` (quotes optional, also $FORGEJO_OUTPUT / $GITEA_OUTPUT). */
const OUTPUT_LINE = /^echo\s+"?([A-Za-z_][A-Za-z0-9_-]*)=(.*?)"?\s*>>\s*"?\$\{?(?:GITHUB|FORGEJO|GITEA)_OUTPUT\}?"?$/;
const EXPRESSION = /\$\{\{\s*([^}]+?)\s*\}\}/g;

export class EmulatedRunner {
  readonly records: TaskRecord[] = [];
  runner: WireRunner | null = null;
  /** Every procedure called, in order, with the Connect-Timeout-Ms it carried. */
  readonly calls: Array<{
    procedure: string;
    timeoutMs?: number;
    requestKey?: string;
    url: string;
    encoding?: string;
  }> = [];
  private readonly agent: http.Agent;
  /** Calls made per procedure: the n-th call of a procedure goes to urls[n % urls.length]. */
  private readonly sent = new Map<string, number>();
  private stopped = false;
  private tasksVersion = 0;
  private nextFetchAt = 0;
  private readonly answerAttempts = new Map<string, number>();

  constructor(
    readonly options: EmulatedRunnerOptions,
    readonly flavour: Flavour = FORGEJO_RUNNER_V12,
  ) {
    this.agent = createAgent();
  }

  private get labelNames(): string[] {
    return this.options.labels.map((spec) => spec.split(':')[0] ?? spec);
  }

  /** One RPC to the next instance URL (round robin). */
  private async call(
    service: string,
    method: string,
    body: Uint8Array,
    extra: { timeoutMs?: number; requestKey?: string } = {},
  ): Promise<{ body: Uint8Array; encoding: string }> {
    const n = this.sent.get(method) ?? 0;
    this.sent.set(method, n + 1);
    const url = `${this.options.urls[n % this.options.urls.length]}/api/actions/${service}/${method}`;
    const headers: Record<string, string> = { 'user-agent': this.flavour.userAgent };
    if (this.runner !== null) {
      headers['x-runner-uuid'] = this.runner.uuid;
      headers['x-runner-token'] = this.runner.token;
    }
    if (extra.requestKey !== undefined) headers['x-runner-request-key'] = extra.requestKey;
    const call: (typeof this.calls)[number] = {
      procedure: method,
      timeoutMs: extra.timeoutMs,
      requestKey: extra.requestKey,
      url,
    };
    this.calls.push(call);
    const answer = await callUnary(this.agent, { url, body, headers, timeoutMs: extra.timeoutMs });
    call.encoding = answer.encoding || 'identity';
    const attempt = (this.answerAttempts.get(method) ?? 0) + 1;
    this.answerAttempts.set(method, attempt);
    if (this.options.loseAnswer?.(method, attempt) === true)
      throw new WireError('unavailable', 'connection reset (answer lost)', 0);
    return answer;
  }

  /** `forgejo-runner register`: Ping until the instance answers, then Register. */
  async register(token: string): Promise<WireRunner> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        const pong = decodePing((await this.call('ping.v1.PingService', 'Ping', encodePing(this.options.name))).body);
        if (pong !== '') break;
      } catch (error) {
        if (attempt >= 10) throw error;
        await sleep(200);
      }
    }
    const names = this.labelNames;
    const answer = await this.call(
      'runner.v1.RunnerService',
      'Register',
      encodeRegister({
        name: this.options.name,
        token,
        agentLabels: names,
        labels: names,
        version: this.options.version ?? 'v12.1.2',
        ephemeral: this.options.ephemeral,
        capabilities: this.flavour.capabilities,
      }),
    );
    const runner = decodeRunnerResponse(answer.body);
    if (runner === null || runner.uuid === '' || runner.token === '')
      throw new Error('Register answered without a runner');
    this.runner = runner;
    return runner;
  }

  /** `forgejo-runner daemon` until stop(): Declare, then capacity pollers. */
  async daemon(): Promise<void> {
    const declared = decodeRunnerResponse(
      (
        await this.call(
          'runner.v1.RunnerService',
          'Declare',
          encodeDeclare({
            version: this.options.version ?? 'v12.1.2',
            labels: this.labelNames,
            capabilities: this.flavour.capabilities,
          }),
        )
      ).body,
    );
    if (declared === null) throw new Error('Declare answered without a runner');
    const slots = Array.from({ length: this.options.capacity ?? 1 }, () => this.pollSlot());
    await Promise.all(slots);
  }

  /** Ends the pollers after their current task (the real daemon's graceful shutdown). */
  stop(): void {
    this.stopped = true;
  }

  /** Resolves when `count` tasks have ended (their reporter closed). */
  async waitForTasks(count: number, deadlineMs: number): Promise<TaskRecord[]> {
    const deadline = Date.now() + deadlineMs;
    while (this.records.filter((r) => r.closed).length < count) {
      if (Date.now() > deadline)
        throw new Error(
          `${this.flavour.name}: ${this.records.filter((r) => r.closed).length} of ${count} tasks ended in ${deadlineMs} ms`,
        );
      await sleep(50);
    }
    return this.records;
  }

  /** The shared rate limiter: one FetchTask per fetch interval across all slots. */
  private async waitForFetchSlot(): Promise<void> {
    const interval = this.options.fetchIntervalMs ?? 2000;
    const now = Date.now();
    const at = Math.max(now, this.nextFetchAt);
    this.nextFetchAt = at + interval;
    if (at > now) await sleep(at - now);
  }

  private async pollSlot(): Promise<void> {
    let requestKey = randomUUID();
    while (!this.stopped) {
      await this.waitForFetchSlot();
      if (this.stopped) break;
      const version = this.tasksVersion;
      let answer;
      try {
        const res = await this.call(
          'runner.v1.RunnerService',
          'FetchTask',
          encodeFetchTask({ tasksVersion: version }),
          {
            timeoutMs: this.options.fetchTimeoutMs ?? 5000,
            ...(this.flavour.sendsRequestKey ? { requestKey } : {}),
          },
        );
        answer = decodeFetchTask(res.body);
      } catch (error) {
        // A failed fetch (deadline, lost answer, server error) is retried at the
        // next tick with the same request key, so a claim whose answer got lost
        // is handed out again instead of being claimed twice.
        if (!(error instanceof WireError)) throw error;
        continue;
      }
      requestKey = randomUUID();
      if (answer.tasksVersion > version) this.tasksVersion = answer.tasksVersion;
      if (answer.task === null) continue;
      // A task means the queue moved: ask again next time whatever the version.
      this.tasksVersion = 0;
      await this.runTask(answer.task);
    }
  }

  /** `forgejo-runner job --handle H`: one FetchSingleTask for that job, then run it. */
  async runSingle(handle: string, deadlineMs = 10_000): Promise<TaskRecord> {
    const deadline = Date.now() + deadlineMs;
    const requestKey = randomUUID();
    for (;;) {
      try {
        const res = await this.call(
          'runner.v1.RunnerService',
          'FetchSingleTask',
          encodeFetchSingleTask({ tasksVersion: 0, handle }),
          {
            timeoutMs: this.options.fetchTimeoutMs ?? 5000,
            requestKey,
          },
        );
        const answer = decodeFetchSingleTask(res.body);
        if (answer.task !== null) return this.runTask(answer.task);
      } catch (error) {
        if (!(error instanceof WireError)) throw error;
      }
      if (Date.now() > deadline) throw new Error(`${this.flavour.name} job --handle ${handle}: no task`);
      await sleep(this.options.fetchIntervalMs ?? 2000);
    }
  }

  /** Runs one task: the executor's steps and the reporter around them. */
  async runTask(task: WireTask): Promise<TaskRecord> {
    const record: TaskRecord = {
      task,
      remoteResult: 0,
      localResult: 0,
      closeAttempts: 0,
      closed: false,
      unacknowledgedOutputs: [],
      logAck: 0,
      encodings: new Set(),
    };
    this.records.push(record);
    const reporter = new Reporter(this, task, record);
    const job = singleJobOf(task.workflowPayload);
    reporter.resetSteps(job.steps.length);
    reporter.log(`${this.flavour.name} ${this.options.version ?? 'v12.1.2'} picked task ${task.id}`);
    const daemon = reporter.runDaemon();
    const stepOutputs: Record<string, Record<string, string>> = {};
    let result: number = Result.success;
    for (const [index, step] of job.steps.entries()) {
      if (reporter.stopRequested) {
        result = Result.cancelled;
        break;
      }
      reporter.startStep(index);
      for (const line of String(step.run ?? step.uses ?? '')
        .split('\n')
        .filter((l) => l.trim() !== '')) {
        const text = substitute(line.trim(), task, stepOutputs);
        const output = OUTPUT_LINE.exec(text);
        if (output !== null && step.id !== undefined) (stepOutputs[step.id] ??= {})[output[1] ?? ''] = output[2] ?? '';
        else reporter.stepLog(index, text.replace(/^echo\s+/, ''));
      }
      await sleep(this.options.stepMs ?? 300);
      reporter.endStep(index, Result.success);
    }
    const outputs: Record<string, string> = {};
    for (const [key, expression] of Object.entries(job.outputs ?? {}))
      outputs[key] = substitute(String(expression), task, stepOutputs);
    await this.options.onJobEnd?.(task, outputs);
    await reporter.finish(result, result === Result.success ? outputs : {});
    await daemon;
    await reporter.close();
    return record;
  }

  /** Used by the reporter. */
  rpc(method: string, body: Uint8Array): Promise<{ body: Uint8Array; encoding: string }> {
    return this.call('runner.v1.RunnerService', method, body);
  }
}

interface JobDefinition {
  steps: Array<{ id?: string; run?: string; uses?: string; name?: string }>;
  outputs?: Record<string, unknown>;
}

/** The payload holds exactly one job (the runner refuses anything else). */
function singleJobOf(payload: string): JobDefinition {
  const doc = parseYaml(payload) as { jobs?: Record<string, JobDefinition> };
  const jobs = Object.values(doc.jobs ?? {});
  if (jobs.length !== 1 || jobs[0] === undefined)
    throw new Error(`the workflow payload must hold exactly one job, not ${jobs.length}`);
  return { steps: jobs[0].steps ?? [], outputs: jobs[0].outputs };
}

/** `${{ needs.J.outputs.K }}`, `${{ steps.S.outputs.K }}`, `${{ secrets.N }}`, `${{ vars.N }}`. */
function substitute(text: string, task: WireTask, steps: Record<string, Record<string, string>>): string {
  return text.replace(EXPRESSION, (whole, expression: string) => {
    const parts = expression.split('.');
    if (parts[0] === 'needs' && parts[2] === 'outputs')
      return task.needs[parts[1] ?? '']?.outputs[parts[3] ?? ''] ?? '';
    if (parts[0] === 'steps' && parts[2] === 'outputs') return steps[parts[1] ?? '']?.[parts[3] ?? ''] ?? '';
    if (parts[0] === 'secrets') return task.secrets[parts[1] ?? ''] ?? '';
    if (parts[0] === 'vars') return task.vars[parts[1] ?? ''] ?? '';
    return whole;
  });
}

/** report/reporter.go: the state, the unacknowledged rows and outputs, and the calls that send them. */
class Reporter {
  private readonly state: TaskState;
  private logOffset = 0;
  private logRows: LogRow[] = [];
  private readonly outputs = new Map<string, string | typeof ACKED>();
  private closing = false;
  private closingRow = '';
  private busy: Promise<unknown> = Promise.resolve();
  stopRequested = false;

  constructor(
    private readonly runner: EmulatedRunner,
    task: WireTask,
    private readonly record: TaskRecord,
  ) {
    this.state = { id: task.id, result: 0, steps: [], startedAt: timestampOf(new Date()) };
  }

  resetSteps(count: number): void {
    for (let i = 0; i < count; i += 1) this.state.steps.push({ id: i, result: 0, logIndex: 0, logLength: 0 });
  }

  log(content: string): void {
    this.logRows.push({ time: timestampOf(new Date()), content });
  }

  startStep(index: number): void {
    const step = this.state.steps[index];
    if (step !== undefined) step.startedAt = timestampOf(new Date());
  }

  /** A step's raw output line: the step's log range grows with it. */
  stepLog(index: number, content: string): void {
    const step = this.state.steps[index];
    if (step === undefined) return;
    if (step.logLength === 0) step.logIndex = this.logOffset + this.logRows.length;
    step.logLength += 1;
    this.log(content);
  }

  endStep(index: number, result: number): void {
    const step = this.state.steps[index];
    if (step === undefined) return;
    if (step.logLength === 0) step.logIndex = this.logOffset + this.logRows.length;
    step.result = result;
    step.stoppedAt = timestampOf(new Date());
  }

  /** The job's end as the executor reports it (jobResult and jobOutputs). */
  async finish(result: number, outputs: Record<string, string>): Promise<void> {
    const setOutputs = () => {
      for (const [key, value] of Object.entries(outputs)) {
        // Both runners refuse what the server would refuse, and never overwrite a key.
        if (Buffer.byteLength(key) > 255 || Buffer.byteLength(value) > 1024 * 1024 || this.outputs.has(key)) continue;
        this.outputs.set(key, value);
      }
    };
    if (this.runner.flavour.outputsBeforeResult) {
      setOutputs();
      // The daemon's next tick sends them while the result is still unspecified.
      await this.serialised(() => this.reportState());
    }
    for (const step of this.state.steps)
      if (step.result === 0) step.result = result === Result.skipped ? Result.skipped : Result.cancelled;
    this.state.result = result;
    this.state.stoppedAt = timestampOf(new Date());
    this.record.localResult = result;
    if (!this.runner.flavour.outputsBeforeResult) setOutputs();
    this.closingRow = this.runner.flavour.closingRow(result);
  }

  /** RunDaemon: every report interval, UpdateLog then UpdateTask; errors only logged. */
  async runDaemon(): Promise<void> {
    const interval = this.runner.options.reportIntervalMs ?? 1000;
    while (!this.closing && this.state.result === 0) {
      await sleep(interval);
      if (this.closing || this.state.result !== 0) break;
      await this.serialised(async () => {
        await this.reportLog(false).catch(() => undefined);
        await this.reportState().catch(() => undefined);
      });
    }
  }

  /** Close: the closing row, then UpdateLog(no_more) and UpdateTask, retried until both are done. */
  async close(): Promise<void> {
    this.closing = true;
    this.log(this.closingRow);
    const attempts = this.runner.options.closeAttempts ?? 10;
    for (let attempt = 1; attempt <= attempts; attempt += 1) {
      this.record.closeAttempts = attempt;
      try {
        await this.serialised(async () => {
          await this.reportLog(true);
          await this.reportState();
        });
        break;
      } catch {
        if (attempt < attempts) await sleep(this.runner.options.closeRetryDelayMs ?? 100);
      }
    }
    this.record.unacknowledgedOutputs = [...this.outputs].filter(([, v]) => v !== ACKED).map(([k]) => k);
    this.record.logAck = this.logOffset;
    this.record.closed = true;
  }

  /** One report at a time (the reporter's client mutex). */
  private serialised<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.busy.then(fn, fn);
    this.busy = run.catch(() => undefined);
    return run;
  }

  private async reportLog(noMore: boolean): Promise<void> {
    const rows = this.logRows;
    const answer = await this.runner.rpc(
      'UpdateLog',
      encodeUpdateLog({ taskId: this.state.id, index: this.logOffset, rows, noMore }),
    );
    this.record.encodings.add(answer.encoding || 'identity');
    const { ackIndex } = decodeUpdateLog(answer.body);
    if (ackIndex < this.logOffset) throw new Error(`submitted logs are lost ${ackIndex} < ${this.logOffset}`);
    this.logRows = this.logRows.slice(ackIndex - this.logOffset);
    this.logOffset = ackIndex;
    if (noMore && this.logRows.length > 0) throw new Error(`not all logs are submitted ${this.logRows.length} remain`);
  }

  private async reportState(): Promise<void> {
    const outputs: Record<string, string> = {};
    for (const [key, value] of this.outputs) if (value !== ACKED) outputs[key] = value;
    const answer = await this.runner.rpc('UpdateTask', encodeUpdateTask({ state: this.state, outputs }));
    this.record.encodings.add(answer.encoding || 'identity');
    const { result, sentOutputs } = decodeUpdateTask(answer.body);
    for (const key of sentOutputs) this.outputs.set(key, ACKED);
    this.record.remoteResult = result;
    if (this.runner.flavour.stopsOn.includes(result) && result !== this.state.result) this.stopRequested = true;
    const unsent = [...this.outputs.values()].filter((v) => v !== ACKED).length;
    if (unsent > 0) throw new Error(`not all outputs are submitted ${unsent} remain`);
  }
}
