// The load of the crash test: clients that keep writing to a Gantry process
// while it is killed, and a ledger of every write that was acknowledged (a
// 2xx answer, a git push that exited 0, a runner call that answered). A
// request that dies with the process is "lost": it may or may not have been
// applied, and the clients retry what a real client would retry (idempotent
// PUTs, a repository creation) once the server is back.
//
// Clients: repository creation, repository variables and secrets (PUT), workflow
// dispatches, git pushes, and runners that claim tasks, stream log lines,
// heartbeat and finish. One runner ("doomed") keeps its first task running and
// is abandoned at a kill, as a runner machine that dies with its job.
//
// Between kills the test pauses the load (every client parked, nothing in
// flight) to check the ledger against what the server answers.
import { Code, ConnectError } from '@connectrpc/connect';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { GantryChild } from './gantry-child.ts';
import type { RunnerClient } from './runner-client.ts';
import type { WorkDir } from './workdir.ts';

/** mulberry32: a small seeded PRNG, so a failing kill schedule can be replayed (GANTRY_CRASH_SEED). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface ValueLedger {
  /** The value of the last acknowledged write; null before the first. */
  acked: string | null;
  /** A write sent but not (yet) acknowledged: it may have been applied. */
  pending: string | null;
}

export interface RunnerTaskState {
  id: number;
  /** Log lines the server acknowledged (UpdateLog's ack index). */
  logAcked: number;
  /** Heartbeats left before the runner finishes the task (Infinity: never). */
  stepsLeft: number;
}

/** Every acknowledged write, by kind. */
export class Ledger {
  readonly repos = new Set<string>();
  readonly variables = new Map<string, ValueLedger>();
  readonly secrets = new Map<string, ValueLedger>();
  readonly dispatches: Array<{ id: number; runNumber: number }> = [];
  readonly pushes: string[] = [];
  /** Tasks whose final UpdateTask (success) was answered. */
  readonly finishedTasks = new Set<number>();
  /** Tasks a runner held when it was abandoned. */
  readonly abandonedTasks: number[] = [];
  /** Acknowledged writes of every kind, for pacing the kills. */
  acks = 0;
  /** Answered FetchTask calls, and those that brought a task. */
  fetches = 0;
  tasksFetched = 0;
  /** Requests that died with a process, by client. */
  readonly lost: Record<string, number> = {};

  countLost(client: string): void {
    this.lost[client] = (this.lost[client] ?? 0) + 1;
  }

  /** One line for the test's output. */
  summary(): string {
    return (
      `acknowledged: ${this.repos.size} repositories, ${this.dispatches.length} dispatches, ${this.pushes.length} pushes, ` +
      `${this.tasksFetched} tasks fetched in ${this.fetches} polls, ${this.finishedTasks.size} finished; lost in flight: ${JSON.stringify(this.lost)}`
    );
  }
}

export interface ApiAnswer {
  status: number;
  text: string;
  json: unknown;
}

export interface CrashLoadOptions {
  server: GantryChild;
  token: string;
  org: string;
  /** The repository the variables, secrets, dispatches and pushes go to. */
  repo: string;
  workflowFile: string;
  variableNames: readonly string[];
  secretNames: readonly string[];
  work: WorkDir;
  runners: RunnerClient[];
  random: () => number;
}

/** act_runner's poll deadline is 5 s; a loaded 2-core machine needs more to answer in time. */
const FETCH_DEADLINE_MS = 10_000;

const LOST = Symbol('lost');
type Lost = typeof LOST;

/** Opens and closes: clients pass it before every request. */
class Gate {
  private opened: Promise<void> = Promise.resolve();
  private release: (() => void) | null = null;

  get isOpen(): boolean {
    return this.release === null;
  }

  close(): void {
    if (this.release !== null) return;
    this.opened = new Promise<void>((resolve) => (this.release = resolve));
  }

  open(): void {
    this.release?.();
    this.release = null;
  }

  wait(): Promise<void> {
    return this.opened;
  }
}

interface RunnerSlot {
  name: string;
  client: RunnerClient;
  task: RunnerTaskState | null;
  doomed: boolean;
  abandoned: boolean;
}

export class CrashLoad {
  readonly ledger = new Ledger();
  /** The first unexpected answer or error of any client; the test fails with it. */
  failure: Error | null = null;
  private readonly gate = new Gate();
  private readonly workers: Array<Promise<void>> = [];
  private readonly runnerSlots: RunnerSlot[];
  private active = 0;
  private parked = 0;
  private stopping = false;

  constructor(private readonly options: CrashLoadOptions) {
    for (const name of options.variableNames) this.ledger.variables.set(name, { acked: null, pending: null });
    for (const name of options.secretNames) this.ledger.secrets.set(name, { acked: null, pending: null });
    this.runnerSlots = options.runners.map((client, i) => ({
      name: `runner-${i}`,
      client,
      task: null,
      doomed: i === 0,
      abandoned: false,
    }));
  }

  /** Starts every client. */
  start(): void {
    this.spawn('repositories', this.repositoryClient());
    this.spawn(
      'variables',
      this.valueClient(
        'variables',
        this.ledger.variables,
        (name, value) => this.api('PUT', `${this.repoPath}/actions/variables/${name}`, { value }),
        [204],
      ),
    );
    this.spawn(
      'secrets',
      this.valueClient(
        'secrets',
        this.ledger.secrets,
        (name, value) => this.api('PUT', `${this.repoPath}/actions/secrets/${name}`, { data: value }),
        [201, 204],
      ),
    );
    this.spawn('dispatches', this.dispatchClient());
    this.spawn('pushes', this.pushClient());
    for (const slot of this.runnerSlots) this.spawn(slot.name, this.runnerClient(slot));
  }

  /** Closes the gate and resolves once every client is parked at it (nothing in flight). */
  async pause(): Promise<void> {
    this.gate.close();
    const deadline = Date.now() + 60_000;
    while (this.parked < this.active) {
      if (Date.now() > deadline)
        throw new Error(`the load did not come to rest (${this.parked} of ${this.active} clients parked)`);
      await sleep(10);
    }
  }

  resume(): void {
    this.gate.open();
  }

  /**
   * The doomed runner walks away from the task it holds (its machine died
   * with the server); false when it holds none yet.
   */
  abandonDoomedRunner(): boolean {
    const slot = this.runnerSlots.find((s) => s.doomed && !s.abandoned);
    if (!slot?.task) return false;
    slot.abandoned = true;
    this.ledger.abandonedTasks.push(slot.task.id);
    return true;
  }

  /** Clients finish what they hold (lost writes retried, tasks finished), then end. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.gate.open();
    await Promise.all(this.workers);
  }

  /** Ends every client at its next step, whatever it holds (a failed test's cleanup). */
  async abort(): Promise<void> {
    this.failure ??= new Error('the load was aborted');
    this.gate.open();
    await Promise.all(this.workers);
  }

  private get repoPath(): string {
    return `/repos/${this.options.org}/${this.options.repo}`;
  }

  private spawn(name: string, step: () => Promise<boolean>): void {
    this.active += 1;
    this.workers.push(
      (async () => {
        try {
          while (this.failure === null && (await step()));
        } catch (error) {
          this.failure ??= new Error(`${name}: ${error instanceof Error ? error.message : String(error)}`, {
            cause: error,
          });
        } finally {
          this.active -= 1;
        }
      })(),
    );
  }

  /** Waits while the gate is closed (the server is being killed, restarted or checked). */
  private async pass(): Promise<void> {
    if (this.gate.isOpen) return;
    this.parked += 1;
    try {
      await this.gate.wait();
    } finally {
      this.parked -= 1;
    }
  }

  /** Runs a request; LOST when it failed because the process died under it. */
  private async attempt<T>(request: () => Promise<T>): Promise<T | Lost> {
    const generation = this.options.server.generation;
    try {
      return await request();
    } catch (error) {
      if (this.options.server.generation !== generation || !this.options.server.alive) return LOST;
      throw error;
    }
  }

  private async api(method: string, path: string, body?: unknown): Promise<ApiAnswer> {
    const response = await fetch(`${this.options.server.url}/api/v1${path}`, {
      method,
      headers: {
        authorization: `token ${this.options.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    return { status: response.status, text, json };
  }

  private between(minMs: number, maxMs: number): Promise<void> {
    return sleep(minMs + Math.floor(this.options.random() * (maxMs - minMs)));
  }

  private repositoryClient(): () => Promise<boolean> {
    let created = 0;
    let retrying: string | null = null;
    return async () => {
      if (this.stopping && retrying === null) return false;
      await this.pass();
      const name = retrying ?? `r${++created}`;
      const answer = await this.attempt(() => this.api('POST', `/orgs/${this.options.org}/repos`, { name }));
      if (answer === LOST) {
        retrying = name;
        this.ledger.countLost('repositories');
        return true;
      }
      if (answer.status === 409 && retrying === name) {
        // The lost request had created it: then it must be whole.
        const existing = await this.attempt(() => this.api('GET', `/repos/${this.options.org}/${name}`));
        if (existing === LOST) return true;
        if (existing.status !== 200) {
          throw new Error(
            `retrying the interrupted creation of ${name} answered 409 (${answer.text.trim()}) but GET answers ${existing.status}: the name is blocked by a half-made repository`,
          );
        }
      } else if (answer.status !== 201) {
        throw new Error(`POST /orgs/${this.options.org}/repos ${name}: ${answer.status} ${answer.text}`);
      }
      this.ledger.repos.add(name);
      this.ledger.acks += 1;
      retrying = null;
      await this.between(50, 150);
      return true;
    };
  }

  /** PUTs of new values to a fixed set of names; a lost PUT is sent again until answered. */
  private valueClient(
    client: string,
    ledger: Map<string, ValueLedger>,
    put: (name: string, value: string) => Promise<ApiAnswer>,
    okStatuses: readonly number[],
  ): () => Promise<boolean> {
    const names = [...ledger.keys()];
    let written = 0;
    let current: { name: string; value: string } | null = null;
    return async () => {
      if (this.stopping && current === null) return false;
      await this.pass();
      if (current === null) {
        const name = names[Math.floor(this.options.random() * names.length)] as string;
        written += 1;
        current = { name, value: `${client}-${written}-${Math.floor(this.options.random() * 1e9).toString(36)}` };
        (ledger.get(name) as ValueLedger).pending = current.value;
      }
      const { name, value } = current;
      const answer = await this.attempt(() => put(name, value));
      if (answer === LOST) {
        this.ledger.countLost(client);
        return true;
      }
      if (!okStatuses.includes(answer.status))
        throw new Error(`PUT ${client} ${name}: ${answer.status} ${answer.text}`);
      ledger.set(name, { acked: value, pending: null });
      this.ledger.acks += 1;
      current = null;
      await this.between(20, 100);
      return true;
    };
  }

  private dispatchClient(): () => Promise<boolean> {
    return async () => {
      if (this.stopping) return false;
      await this.pass();
      const path = `${this.repoPath}/actions/workflows/${this.options.workflowFile}/dispatches`;
      const answer = await this.attempt(() => this.api('POST', path, { ref: 'main', return_run_info: true }));
      if (answer === LOST) {
        // Not retried: a dispatch is not idempotent, the run may exist.
        this.ledger.countLost('dispatches');
        return true;
      }
      if (answer.status !== 201) throw new Error(`POST ${path}: ${answer.status} ${answer.text}`);
      const run = answer.json as { id: number; run_number: number };
      this.ledger.dispatches.push({ id: run.id, runNumber: run.run_number });
      this.ledger.acks += 1;
      await this.between(150, 400);
      return true;
    };
  }

  private pushClient(): () => Promise<boolean> {
    let commits = 0;
    return async () => {
      if (this.stopping) return false;
      commits += 1;
      // Each push carries a new commit; one whose push was lost rides along with the next.
      const sha = await this.options.work.commit({ 'counter.txt': `${commits}\n` }, `Change ${commits}`);
      await this.pass();
      const pushed = await this.attempt(async () => {
        const result = await this.options.work.push('main');
        if (result.code !== 0) throw new Error(`git push exited ${result.code}: ${result.stderr}`);
        return result;
      });
      if (pushed === LOST) {
        this.ledger.countLost('pushes');
        return true;
      }
      this.ledger.pushes.push(sha);
      this.ledger.acks += 1;
      await this.between(200, 500);
      return true;
    };
  }

  private runnerClient(slot: RunnerSlot): () => Promise<boolean> {
    const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });
    const runner = slot.client.runner;
    return async () => {
      if (slot.abandoned) return false;
      if (this.stopping && (slot.task === null || slot.doomed)) return false;
      await this.pass();
      if (slot.abandoned) return false;
      const task = slot.task;
      if (task === null) {
        const fetched = await this.attempt(async () => {
          try {
            return await runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: FETCH_DEADLINE_MS });
          } catch (error) {
            // act_runner's poll deadline: a call that runs out of time found nothing.
            if (error instanceof ConnectError && error.code === Code.DeadlineExceeded) return { task: undefined };
            throw error;
          }
        });
        if (fetched === LOST) {
          // If the claim committed before the kill, the task runs with no runner
          // that knows it: housekeeping's to fail.
          this.ledger.countLost('runners');
          return true;
        }
        this.ledger.fetches += 1;
        if (fetched.task !== undefined) {
          this.ledger.tasksFetched += 1;
          slot.task = {
            id: Number(fetched.task.id),
            logAcked: 0,
            stepsLeft: slot.doomed ? Infinity : 1 + Math.floor(this.options.random() * 3),
          };
        }
        return true;
      }
      const taskId = BigInt(task.id);
      const last = task.stepsLeft <= 0;
      // Three new lines per step, sent from the acknowledged index (a lost ack resends them).
      const rows = last ? [] : [0, 1, 2].map((k) => ({ time: now(), content: `line ${task.logAcked + k}` }));
      const logged = await this.attempt(() =>
        runner.updateLog({ taskId, index: BigInt(task.logAcked), rows, noMore: last }),
      );
      if (logged === LOST) {
        this.ledger.countLost('runners');
        return true;
      }
      if (Number(logged.ackIndex) < task.logAcked + rows.length) {
        throw new Error(
          `task ${task.id}: UpdateLog acknowledged ${logged.ackIndex} after ${task.logAcked} + ${rows.length} lines`,
        );
      }
      task.logAcked = Number(logged.ackIndex);
      const state = last
        ? { id: taskId, result: Result.SUCCESS, startedAt: now(), stoppedAt: now(), steps: [] }
        : { id: taskId, result: Result.UNSPECIFIED, steps: [] };
      const reported = await this.attempt(() => runner.updateTask({ state }));
      if (reported === LOST) {
        this.ledger.countLost('runners');
        return true;
      }
      if (last) {
        if (reported.state?.result !== Result.SUCCESS)
          throw new Error(`task ${task.id}: the final UpdateTask answered result ${reported.state?.result}`);
        this.ledger.finishedTasks.add(task.id);
        this.ledger.acks += 1;
        slot.task = null;
      } else {
        if (reported.state?.result !== Result.UNSPECIFIED)
          throw new Error(
            `task ${task.id} was stopped server-side (result ${reported.state?.result}) while its runner is alive`,
          );
        task.stepsLeft -= 1;
      }
      await this.between(50, 200);
      return true;
    };
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
