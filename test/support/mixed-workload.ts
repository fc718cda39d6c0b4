// A mixed CI workload against one Gantry URL (in scale-out tests: nginx in
// front of several processes), driven only through the public interfaces:
// git pushes that start runs, workflow dispatches, organization and
// repository secret and variable writes (in concurrent pairs on one name),
// organization webhooks to a local receiver, and runner clients that fetch
// tasks, stream a log and report success the way act_runner does. Every
// answer's status is counted; answers that break a documented guarantee are
// collected as violations rather than thrown, so a long run reports them all.
import { setMaxListeners } from 'node:events';
import { Code, ConnectError } from '@connectrpc/connect';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { decodeTask, registerRunner } from './runner-client.ts';
import type { RunnerClient } from './runner-client.ts';
import { createWorkDir, remoteUrl } from './workdir.ts';
import type { WorkDir } from './workdir.ts';

export const RUNNER_LABEL = 'scale-out';
export const WORKFLOW_FILE = 'ci.yml';
/** Log lines each task sends, in two UpdateLog calls. */
export const LOG_LINES_PER_TASK = 6;
export const HOOK_SECRET = 'scale-out-hook-secret';
/** Events the organization hooks subscribe to (the workflow ones only if the server accepts them). */
const HOOK_EVENTS = ['push', 'workflow_run', 'workflow_job'];
/** The runners' FetchTask deadline (act_runner's fetch_timeout; see runnerLoop). */
const FETCH_TIMEOUT_MS = 30_000;

/**
 * Two jobs, the second needing the first: a run's progress is settled across
 * requests to either process. Every run must run, so a new push must not
 * cancel the one before (Forgejo's default for push runs): a push run gets a
 * group of its own commit, a dispatch none (an empty group), and with
 * `cancel-in-progress: false` none cancels or waits for another.
 */
export const WORKFLOW = `on:
  push:
    branches: [main]
  workflow_dispatch:
concurrency:
  group: \${{ github.event_name == 'push' && github.sha || '' }}
  cancel-in-progress: false
jobs:
  build:
    runs-on: ${RUNNER_LABEL}
    steps:
      - run: echo "\${{ secrets.ORG_SECRET }} \${{ secrets.REPO_SECRET }}"
  test:
    needs: build
    runs-on: ${RUNNER_LABEL}
    steps:
      - run: echo test
`;

export interface WorkloadShape {
  orgs: number;
  reposPerOrg: number;
  runners: number;
}

/** Statuses by request kind ("POST dispatches 201", "git push ok", "rpc FetchTask deadline"). */
export class StatusTally {
  readonly counts = new Map<string, number>();
  /** Every 5xx (and transport failure), described. */
  readonly serverErrors: string[] = [];

  record(kind: string, status: number | string): void {
    const key = `${kind} ${status}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    if (typeof status === 'number' && status >= 500) this.serverErrors.push(key);
  }

  total(): number {
    let n = 0;
    for (const count of this.counts.values()) n += count;
    return n;
  }

  summary(): string {
    return [...this.counts.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([key, count]) => `${key}: ${count}`)
      .join(', ');
  }
}

export interface WorkloadRepo {
  org: string;
  name: string;
  fullName: string;
  work: WorkDir;
  /** Commit ids pushed to main, in order (each a push event and a push run). */
  pushedShas: string[];
  /** Run numbers the dispatch answers named. */
  dispatchedRunNumbers: number[];
}

export type OperationKind = 'push' | 'dispatch' | 'secret' | 'variable' | 'task';

export interface HandledTask {
  taskId: number;
  runnerId: number;
  repository: string;
}

export interface RunnerSwarm {
  /** Stops fetching (in-flight fetches are abandoned) and waits for the loops to end. */
  stop(): Promise<void>;
}

export interface MixedWorkload {
  url: string;
  orgs: string[];
  repos: WorkloadRepo[];
  runners: RunnerClient[];
  tally: StatusTally;
  /** Broken guarantees seen so far (empty when all is well). */
  violations: string[];
  /** Tasks the runners received, in order. */
  handledTasks: HandledTask[];
  /** How long each answered FetchTask took (ms). */
  fetchMs: number[];
  /** The events each organization's hook subscribed to (what the server accepted). */
  hookEvents: string[];
  /** Names written per scope path (`orgs/x` or `repos/x/y`) → the secret and variable names created there. */
  createdNames: Map<string, { secrets: Set<string>; variables: Set<string> }>;
  /** Called with every completed operation (for throughput). */
  onOperation: (kind: OperationKind) => void;
  push(repo: WorkloadRepo): Promise<void>;
  dispatch(repo: WorkloadRepo): Promise<void>;
  /** One round of secret and variable writes on an organization or repository scope path. */
  writeSettings(scopePath: string): Promise<void>;
  startRunners(): RunnerSwarm;
  remove(): Promise<void>;
}

interface Answer {
  status: number;
  json: unknown;
  text: string;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });

/** Log line `i` of a task, as the runner sends it and the stored log must hold it. */
export function logLine(taskId: number, i: number): string {
  return `task ${taskId} line ${i}`;
}

export async function setUpMixedWorkload(options: {
  url: string;
  adminToken: string;
  adminName: string;
  shape: WorkloadShape;
  hookUrl: string;
  prefix?: string;
}): Promise<MixedWorkload> {
  const { url, adminToken, shape } = options;
  const tally = new StatusTally();
  const violations: string[] = [];
  const prefix = options.prefix ?? 'scale';
  let sequence = 0;

  const api = async (
    method: string,
    path: string,
    body?: unknown,
    kind = `${method} ${path.replace(/\/[A-Z0-9_]+$/, '/:name')}`,
  ): Promise<Answer> => {
    let response: Response;
    try {
      response = await fetch(`${url}/api/v1${path}`, {
        method,
        headers: {
          authorization: `token ${adminToken}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      tally.record(kind, 'transport error');
      throw new Error(`${method} ${path}: ${String(error)}`, { cause: error });
    }
    const text = await response.text();
    tally.record(kind, response.status);
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    return { status: response.status, json, text };
  };
  const expect = async (
    method: string,
    path: string,
    status: number,
    body?: unknown,
    kind?: string,
  ): Promise<Answer> => {
    const answer = await api(method, path, body, kind);
    if (answer.status !== status)
      throw new Error(`${method} ${path} answered ${answer.status}, expected ${status}: ${answer.text.slice(0, 300)}`);
    return answer;
  };

  const orgs = Array.from({ length: shape.orgs }, (_, i) => `${prefix}-org-${i}`);
  const repos: WorkloadRepo[] = [];
  const registrationTokens: string[] = [];
  let hookEvents = HOOK_EVENTS;
  const createdNames = new Map<string, { secrets: Set<string>; variables: Set<string> }>();
  const namesOf = (scopePath: string) => {
    let entry = createdNames.get(scopePath);
    if (!entry) createdNames.set(scopePath, (entry = { secrets: new Set(), variables: new Set() }));
    return entry;
  };

  for (const org of orgs) {
    await expect('POST', '/orgs', 201, { username: org });
    const hook = {
      type: 'forgejo',
      config: { url: `${options.hookUrl}/${org}`, content_type: 'json', secret: HOOK_SECRET },
      active: true,
    };
    let created = await api('POST', `/orgs/${org}/hooks`, { ...hook, events: hookEvents });
    if (created.status === 422) {
      hookEvents = ['push'];
      created = await api('POST', `/orgs/${org}/hooks`, { ...hook, events: hookEvents });
    }
    if (created.status !== 201) throw new Error(`POST /orgs/${org}/hooks answered ${created.status}: ${created.text}`);
    // The values jobs read; the workload keeps rewriting them.
    await expect('PUT', `/orgs/${org}/actions/secrets/ORG_SECRET`, 201, { data: 'org-secret-0' });
    namesOf(`orgs/${org}`).secrets.add('ORG_SECRET');
    const token = await expect('GET', `/orgs/${org}/actions/runners/registration-token`, 200);
    registrationTokens.push((token.json as { token: string }).token);
    for (let r = 0; r < shape.reposPerOrg; r += 1) {
      const name = `app-${r}`;
      await expect('POST', `/orgs/${org}/repos`, 201, { name, default_branch: 'main' });
      await expect('PUT', `/repos/${org}/${name}/actions/secrets/REPO_SECRET`, 201, { data: 'repo-secret-0' });
      namesOf(`repos/${org}/${name}`).secrets.add('REPO_SECRET');
      const work = await createWorkDir(remoteUrl(url, org, name, { user: options.adminName, password: adminToken }));
      repos.push({ org, name, fullName: `${org}/${name}`, work, pushedShas: [], dispatchedRunNumbers: [] });
    }
  }

  // Registered through the proxy too; each runner serves one organization.
  const runners: RunnerClient[] = [];
  for (let start = 0; start < shape.runners; start += 10) {
    const batch = Array.from({ length: Math.min(10, shape.runners - start) }, (_, k) => {
      const token = registrationTokens[(start + k) % registrationTokens.length] as string;
      return registerRunner(url, token, { labels: [RUNNER_LABEL] });
    });
    runners.push(...(await Promise.all(batch)));
  }

  const handledTasks: HandledTask[] = [];
  const fetchMs: number[] = [];
  const workload: MixedWorkload = {
    url,
    orgs,
    repos,
    runners,
    tally,
    violations,
    handledTasks,
    fetchMs,
    hookEvents,
    createdNames,
    onOperation: () => {},

    async push(repo) {
      sequence += 1;
      const files: Record<string, string> = { 'counter.txt': `${sequence}\n` };
      if (repo.pushedShas.length === 0) files[`.forgejo/workflows/${WORKFLOW_FILE}`] = WORKFLOW;
      const sha = await repo.work.commit(files, `change ${sequence}`);
      const pushed = await repo.work.push('main');
      tally.record('git push', pushed.code === 0 ? 'ok' : 'failed');
      if (pushed.code !== 0) {
        violations.push(`git push to ${repo.fullName} failed: ${pushed.stderr.trim()}`);
        return;
      }
      repo.pushedShas.push(sha);
      workload.onOperation('push');
    },

    async dispatch(repo) {
      const answer = await api(
        'POST',
        `/repos/${repo.fullName}/actions/workflows/${WORKFLOW_FILE}/dispatches`,
        { ref: 'main', return_run_info: true },
        'POST dispatches',
      );
      if (answer.status !== 201) {
        violations.push(`dispatch on ${repo.fullName} answered ${answer.status}: ${answer.text.slice(0, 300)}`);
        return;
      }
      repo.dispatchedRunNumbers.push((answer.json as { run_number: number }).run_number);
      workload.onOperation('dispatch');
    },

    async writeSettings(scopePath) {
      sequence += 1;
      const n = sequence;
      const names = namesOf(scopePath);
      const base = `/${scopePath}/actions`;
      // Two writers of one new name at once (round robin: one per process): exactly one creates it.
      const secret = `S_${n}`;
      const secretWrites = await Promise.all(
        ['a', 'b'].map((v) => api('PUT', `${base}/secrets/${secret}`, { data: `${v}-${n}` }, 'PUT secrets')),
      );
      const secretStatuses = secretWrites.map((a) => a.status).sort();
      if (secretStatuses.join() !== '201,204')
        violations.push(
          `two PUTs of new secret ${secret} on ${scopePath} answered ${secretStatuses.join(', ')} (want one 201, one 204)`,
        );
      names.secrets.add(secret);
      workload.onOperation('secret');
      // The values jobs receive change while jobs run.
      const used = scopePath.startsWith('orgs/') ? 'ORG_SECRET' : 'REPO_SECRET';
      const rewritten = await api(
        'PUT',
        `${base}/secrets/${used}`,
        { data: `${used.toLowerCase()}-${n}` },
        'PUT secrets',
      );
      if (rewritten.status !== 204)
        violations.push(`rewriting ${used} on ${scopePath} answered ${rewritten.status} (want 204)`);
      else workload.onOperation('secret');

      const variable = `V_${n}`;
      const creations = await Promise.all(
        ['x', 'y'].map((v) => api('POST', `${base}/variables/${variable}`, { value: `${v}-${n}` }, 'POST variables')),
      );
      const creationStatuses = creations.map((a) => a.status).sort();
      // Forgejo answers a created variable 204 (not 201); the loser of the race 409.
      if (creationStatuses.join() !== '204,409')
        violations.push(
          `two POSTs of new variable ${variable} on ${scopePath} answered ${creationStatuses.join(', ')} (want one 204, one 409)`,
        );
      names.variables.add(variable);
      workload.onOperation('variable');
      const updated = await api('PUT', `${base}/variables/${variable}`, { value: `z-${n}` }, 'PUT variables');
      if (updated.status !== 204)
        violations.push(`updating variable ${variable} on ${scopePath} answered ${updated.status} (want 204)`);
      else workload.onOperation('variable');
    },

    startRunners() {
      const controller = new AbortController();
      // One signal for every runner's calls.
      setMaxListeners(0, controller.signal);
      const loops = runners.map((client) => runnerLoop(client, controller.signal));
      return {
        async stop() {
          controller.abort();
          await Promise.all(loops);
        },
      };
    },

    async remove() {
      await Promise.all(repos.map((repo) => repo.work.remove()));
    },
  };

  const rpcFailure = (call: string, error: unknown): void => {
    const code = error instanceof ConnectError ? Code[error.code] : 'transport error';
    tally.record(`rpc ${call}`, code);
    violations.push(`${call} failed: ${String(error)}`);
  };

  /** Streams the log in two calls and reports the job's one step and the task successful. */
  const runTask = async (client: RunnerClient, task: Task): Promise<void> => {
    const decoded = decodeTask(task);
    const runnerId = client.credentials?.id ?? 0;
    handledTasks.push({ taskId: decoded.id, runnerId, repository: String(decoded.context.repository) });
    // Encrypted by whichever process took the write, decrypted by whichever built the task.
    for (const name of ['ORG_SECRET', 'REPO_SECRET']) {
      if (!decoded.secrets[name])
        violations.push(`task ${decoded.id} (${String(decoded.context.repository)}) came without secret ${name}`);
    }
    const id = BigInt(decoded.id);
    const rows = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, k) => ({ time: now(), content: logLine(decoded.id, from + k) }));
    const half = LOG_LINES_PER_TASK / 2;
    try {
      await client.runner.updateTask({
        state: {
          id,
          result: Result.UNSPECIFIED,
          startedAt: now(),
          steps: [{ id: 0n, result: Result.UNSPECIFIED, startedAt: now() }],
        },
      });
      tally.record('rpc UpdateTask', 200);
      await client.runner.updateLog({ taskId: id, index: 0n, rows: rows(0, half), noMore: false });
      tally.record('rpc UpdateLog', 200);
      await client.runner.updateLog({
        taskId: id,
        index: BigInt(half),
        rows: rows(half, LOG_LINES_PER_TASK),
        noMore: true,
      });
      tally.record('rpc UpdateLog', 200);
      const done = await client.runner.updateTask({
        state: {
          id,
          result: Result.SUCCESS,
          startedAt: now(),
          stoppedAt: now(),
          steps: [
            {
              id: 0n,
              result: Result.SUCCESS,
              startedAt: now(),
              stoppedAt: now(),
              logIndex: 0n,
              logLength: BigInt(LOG_LINES_PER_TASK),
            },
          ],
        },
      });
      tally.record('rpc UpdateTask', 200);
      if (done.state?.result !== Result.SUCCESS)
        violations.push(`task ${decoded.id}: UpdateTask answered result ${done.state?.result}`);
      workload.onOperation('task');
    } catch (error) {
      rpcFailure('task report', error);
    }
  };

  /**
   * act_runner's loop: FetchTask with a deadline (its fetch_timeout), a call
   * that runs out of time counts as "no task". Gantry holds a poll 3 s at most
   * and answers before the deadline, so an answer that comes later means a
   * server too busy to answer in time — and a task it claimed for a runner
   * that gave up is lost until the zombie cleanup (as in Forgejo). The
   * deadline is 30 s (act_runner's default is 5 s) so that a heavily loaded
   * 2-core test machine does not produce such losses.
   */
  const runnerLoop = async (client: RunnerClient, signal: AbortSignal): Promise<void> => {
    let version = 0n;
    while (!signal.aborted) {
      let res;
      const started = performance.now();
      try {
        res = await client.runner.fetchTask({ tasksVersion: version }, { timeoutMs: FETCH_TIMEOUT_MS, signal });
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof ConnectError && error.code === Code.DeadlineExceeded) {
          tally.record('rpc FetchTask', 'client deadline');
          continue;
        }
        rpcFailure('FetchTask', error);
        await sleep(250);
        continue;
      }
      tally.record('rpc FetchTask', 200);
      fetchMs.push(performance.now() - started);
      if (res.task !== undefined) {
        await runTask(client, res.task);
        version = 0n;
      } else {
        version = res.tasksVersion;
      }
    }
  };

  return workload;
}
