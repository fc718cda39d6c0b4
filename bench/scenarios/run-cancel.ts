// Cancel → the runner sees `cancelled`: how long after a user cancels a run
// its running task's runner learns of it. A runner learns of a cancel only
// from the answer to its next UpdateTask (Forgejo: routers/api/actions/runner/runner.go),
// so two figures, each over 50 runs of a one-job workflow held by one runner:
// 1. "next UpdateTask": the runner sends UpdateTask right after the cancel's
//    204; measured from sending POST …/cancel to the UpdateTask answer that
//    carries RESULT_CANCELLED (the cancel's round trip plus one UpdateTask
//    round trip). Baseline: the same two calls without a cancel (a heartbeat
//    after a GET of the run), so the ratio is what cancelling costs.
// 2. "1 s polling": the runner reports every second as forgejo-runner does
//    (report.go's ticker), independently of the user; measured from the
//    cancel's 204 to the first answer carrying RESULT_CANCELLED. Bounded by
//    the poll interval plus one round trip; about half the interval on average.
// Targets (set here, the issue gave none): p99 of (1) ≤ 250 ms, p99 of (2) ≤ 1,250 ms.
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { User } from '../../src/models/users.ts';
import { createRunnerClient } from '../../test/support/runner-client.ts';
import type { RunnerClient } from '../../test/support/runner-client.ts';
import { createWorkDir, remoteUrl } from '../../test/support/workdir.ts';
import { startGantryServer } from '../lib/gantry-server.ts';
import type { GantryServer } from '../lib/gantry-server.ts';
import type { Metric, Scenario, ScenarioContext } from '../lib/scenario.ts';
import { createBenchOwner } from '../lib/bench-owner.ts';

const RUNS = 50;
const WARMUP_RUNS = 5;
const POLL_INTERVAL_MS = 1_000;

const WORKFLOW = `on: workflow_dispatch
jobs:
  work:
    runs-on: cancel-bench
    steps:
      - run: sleep 600
`;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}

interface Setup {
  gantry: GantryServer;
  owner: User;
  token: string;
  runner: RunnerClient;
}

async function setUp(ctx: ScenarioContext): Promise<Setup> {
  const gantry = await startGantryServer({ databaseUrl: await ctx.databaseUrl() });
  ctx.defer(() => gantry.stop());
  const { accounts, accessTokens, repos, runners } = gantry.deps.services;
  const { owner, token } = await createBenchOwner({ accounts, accessTokens });
  const repo = await repos.create(owner, owner, { name: 'cancel' });
  const work = await createWorkDir(remoteUrl(gantry.url, owner.name, repo.name, { user: owner.name, password: token }));
  ctx.defer(() => work.remove());
  await work.commit({ '.forgejo/workflows/long.yml': WORKFLOW }, 'Add a long job');
  const pushed = await work.push('main');
  if (pushed.code !== 0) throw new Error(`git push failed: ${pushed.stderr}`);
  const registrationToken = await runners.registrationToken({ ownerId: 0, repoId: repo.id });
  const runner = createRunnerClient(gantry.url);
  const registered = await runner.runner.register({
    name: 'cancel-bench',
    token: registrationToken,
    version: 'v12.0.0',
    labels: ['cancel-bench'],
  });
  if (registered.runner === undefined) throw new Error('Register answered without a runner');
  runner.credentials = {
    id: Number(registered.runner.id),
    uuid: registered.runner.uuid,
    token: registered.runner.token,
  };
  return { gantry, owner, token, runner };
}

async function api(setup: Setup, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${setup.gantry.url}/api/v1/repos/${setup.owner.name}/cancel${path}`, {
    method,
    headers: {
      authorization: `token ${setup.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

/** Dispatches the long job and takes it with the runner; returns the run id and the task id. */
async function startRun(setup: Setup): Promise<{ runId: number; taskId: bigint }> {
  const res = await api(setup, 'POST', '/actions/workflows/long.yml/dispatches', {
    ref: 'main',
    return_run_info: true,
  });
  if (res.status !== 201) throw new Error(`dispatch answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
  const runId = ((await res.json()) as { id: number }).id;
  const fetched = await setup.runner.runner.fetchTask({ tasksVersion: 0n });
  if (fetched.task === undefined) throw new Error('the runner got no task');
  await heartbeat(setup, fetched.task.id);
  return { runId, taskId: fetched.task.id };
}

async function heartbeat(setup: Setup, taskId: bigint): Promise<Result | undefined> {
  const res = await setup.runner.runner.updateTask({ state: { id: taskId, result: Result.UNSPECIFIED, steps: [] } });
  return res.state?.result;
}

async function cancel(setup: Setup, runId: number): Promise<void> {
  const res = await api(setup, 'POST', `/actions/runs/${runId}/cancel`);
  if (res.status !== 204) throw new Error(`cancel answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
}

/** (1) cancel, then at once the next UpdateTask; and the same two round trips without a cancel. */
async function nextUpdateTask(setup: Setup): Promise<{ cancelled: number; baseline: number }> {
  const { runId, taskId } = await startRun(setup);
  const baseStarted = performance.now();
  const got = await api(setup, 'GET', `/actions/runs/${runId}`);
  await got.text();
  if ((await heartbeat(setup, taskId)) !== Result.UNSPECIFIED) throw new Error('a running task answered a result');
  const baseline = performance.now() - baseStarted;
  const started = performance.now();
  await cancel(setup, runId);
  if ((await heartbeat(setup, taskId)) !== Result.CANCELLED)
    throw new Error('the UpdateTask after the cancel did not answer CANCELLED');
  return { cancelled: performance.now() - started, baseline };
}

/** (2) the runner reports every second on its own; the cancel lands at a random point of that cycle. */
async function polling(setup: Setup): Promise<number> {
  const { runId, taskId } = await startRun(setup);
  let cancelledAt = 0;
  let seenAt = 0;
  const loop = (async () => {
    for (;;) {
      const result = await heartbeat(setup, taskId);
      if (result === Result.CANCELLED) {
        seenAt = performance.now();
        return;
      }
      await sleep(POLL_INTERVAL_MS);
    }
  })();
  await sleep(Math.random() * POLL_INTERVAL_MS);
  await cancel(setup, runId);
  cancelledAt = performance.now();
  await loop;
  return seenAt - cancelledAt;
}

export const runCancel: Scenario = {
  name: 'run-cancel',
  description: `cancel → runner sees RESULT_CANCELLED, ${RUNS} runs: UpdateTask sent right after the 204, and a runner reporting every ${POLL_INTERVAL_MS} ms`,
  async run(ctx) {
    const setup = await setUp(ctx);
    for (let i = 0; i < WARMUP_RUNS; i += 1) await nextUpdateTask(setup);
    ctx.log(`measuring: ${RUNS} cancels followed at once by UpdateTask…`);
    const immediate: number[] = [];
    const baseline: number[] = [];
    for (let i = 0; i < RUNS; i += 1) {
      const sample = await nextUpdateTask(setup);
      immediate.push(sample.cancelled);
      baseline.push(sample.baseline);
    }
    ctx.log(
      `measuring: ${RUNS} cancels seen by a runner polling every ${POLL_INTERVAL_MS} ms (about ${Math.round((RUNS * POLL_INTERVAL_MS) / 2000)} s)…`,
    );
    const polled: number[] = [];
    for (let i = 0; i < RUNS; i += 1) polled.push(await polling(setup));
    immediate.sort((a, b) => a - b);
    baseline.sort((a, b) => a - b);
    polled.sort((a, b) => a - b);
    const row = (
      metric: string,
      values: number[],
      base: number[] | null,
      p: number,
      target: Metric['target'],
    ): Metric => {
      const value = percentile(values, p);
      const baseValue = base === null ? null : percentile(base, p);
      return {
        metric,
        value,
        baseline: baseValue,
        ratio: baseValue === null || baseValue === 0 ? null : value / baseValue,
        target,
        decimals: 1,
      };
    };
    return [
      row('cancel → next UpdateTask sees it, p50 (ms)', immediate, baseline, 50, null),
      row('cancel → next UpdateTask sees it, p99 (ms)', immediate, baseline, 99, {
        of: 'value',
        kind: 'atMost',
        threshold: 250,
      }),
      row(`cancel 204 → runner polling every ${POLL_INTERVAL_MS / 1000} s sees it, p50 (ms)`, polled, null, 50, null),
      row(`cancel 204 → runner polling every ${POLL_INTERVAL_MS / 1000} s sees it, p99 (ms)`, polled, null, 99, {
        of: 'value',
        kind: 'atMost',
        threshold: 1_250,
      }),
    ];
  },
};
