// The runner protocol under load, three figures (issue 18's targets, the
// throughput one per database):
// 1. Jobs assigned per second: 100 runner clients loop FetchTask → UpdateTask
//    (success) while 2,000 jobs are queued (20 dispatches of a 100-leg
//    matrix); from the first fetch to the 2,000th reported success, in the
//    second such swarm since the server started (the first swarm's figures
//    are printed too, without a target: while it runs, V8 still compiles the
//    hot paths on background threads, about 40 % of the server's CPU). Gantry
//    runs as a `gantry web` child process here, so the clients (this
//    process) and the server each have their own thread, and the server's
//    CPU per job is read from /proc (GANTRY_BENCH_CPU_PROF=<folder>: the
//    child writes a CPU profile there). On PostgreSQL, the server's CPU per
//    job too (its postmaster and backends, from /proc); with
//    GANTRY_BENCH_PG_WAITS=1 the log says what Gantry's backends did over
//    the swarm (pg_stat_activity sampled every 20 ms: running, waiting for a
//    row lock, waiting for Gantry's next statement in a transaction…).
// 2. Dispatch-to-runner latency: POST …/dispatches (204) of a one-job
//    workflow, one at a time, until one of 10 idle long-polling runners holds
//    the task; p50 and p99, against the dispatch call's own round trip.
// 3. Idle CPU of 1,000 long-polling runners with no work: a `gantry web`
//    child process's CPU (from /proc, its threads included) over a minute,
//    after its runners polled for half a minute, then the same for a bare
//    node:http server in a child process that holds every call as long as
//    Gantry does and answers the same bytes (bench/lib/bare-fetch-task.ts).
//    The target is Gantry's share above that floor: what Gantry costs over
//    any HTTP server holding these polls. Every client fetches as
//    forgejo-runner does, with its default fetch_timeout of 5 s as the
//    call's deadline (Connect-Timeout-Ms), which Gantry holds until 500 ms
//    before it (bench/lib/idle-polls.ts). The clients run in this process,
//    whose CPU is not counted; until 2026-11-28 they shared one process with
//    Gantry and the figure was the difference of two such processes, which
//    moved by several % of a core between runs of the same code. (The busy
//    figures send no deadline: on a loaded machine a fetch that timed out on
//    the client after its job was claimed would strand that job.)
//    PostgreSQL's own processes are not in this figure.
// Latency (2) runs from sending the POST to the runner holding the task, so
// it includes the dispatch call itself, whose own round trip is the baseline.
//
// The runners register with test/support/runner-client.ts (connect-es), then
// call as forgejo-runner does through bench/lib/runner-wire.ts: binary
// Connect over plain sockets, each runner with its own kept-alive
// connections, cheap enough that the clients' own CPU (this process, on the
// same 2 cores as the server) stays small beside the server's (about 0.2 ms
// a job); forgejo-runner runs on other machines. A "long-polling" client sends tasks_version 0 on every FetchTask:
// Gantry (like Forgejo) answers a runner that sends the current version at
// once, and holds only a call whose version is stale (Forgejo: routers/api/actions/runner/runner.go, FetchTask).
// GANTRY_BENCH_RUNNER_JOBS changes the queued job count (default 2,000);
// GANTRY_BENCH_RUNNER_REPORTS=forgejo makes each swarm job send what
// forgejo-runner's reporter sends for a job shorter than its report interval
// (UpdateLog and UpdateTask as the job starts, the closing UpdateLog, then
// the final UpdateTask: five calls with the FetchTask, against two by
// default); its figures carry no target, the targets being set for the
// default;
// GANTRY_BENCH_RUNNERS_PARTS=throughput (or latency, idle, comma-separated)
// runs only those parts; GANTRY_BENCH_REQUEST_KEYS=1: every FetchTask sends a
// request key, as forgejo-runner releases of 2026 do, a fresh one once a call
// is answered and the same one again after a call that got no answer;
// GANTRY_BENCH_FETCH_TIMELINE=<file>: the throughput part writes each call
// of the measured swarm there (tab-separated: the call, FetchTask or
// UpdateTask, its start in ms from the swarm's start, its round trip in ms,
// the runner's index) and logs where the slowest FetchTasks started.
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { writeFileSync } from 'node:fs';
import type { Db } from '../../src/models/database.ts';
import type { User } from '../../src/models/users.ts';
import { ActionStatus } from '../../src/modules/actions-status.ts';
import { registerRunner } from '../../test/support/runner-client.ts';
import type { RunnerCredentials } from '../../test/support/runner-client.ts';
import { createWorkDir, remoteUrl } from '../../test/support/workdir.ts';
import { startBareFetchTaskChild } from '../lib/bare-fetch-task.ts';
import { startGantryChild } from '../lib/gantry-child-server.ts';
import type { GantryChildServer } from '../lib/gantry-child-server.ts';
import { startGantryServer } from '../lib/gantry-server.ts';
import type { GantryServer } from '../lib/gantry-server.ts';
import { describeIdleWindow, measureFloorWindow, measureIdleWindow, registerIdleRunners } from '../lib/idle-polls.ts';
import { pgServerCpu, sampleWaits } from '../lib/pg-server.ts';
import { processCpuSeconds } from '../lib/process-cpu.ts';
import { WireFleet, wireRunner } from '../lib/runner-wire.ts';
import type { WireRunner } from '../lib/runner-wire.ts';
import type { Metric, Scenario, ScenarioContext } from '../lib/scenario.ts';
import { createBenchOwner } from '../lib/bench-owner.ts';

const DEFAULT_JOBS = 2_000;
const MATRIX_LEGS = 100;
const SWARM_RUNNERS = 100;
const LATENCY_RUNNERS = 10;
const LATENCY_DISPATCHES = 200;
const LATENCY_WARMUP = 10;
const IDLE_RUNNERS = 1_000;
/** How long Gantry holds a call with forgejo-runner's default fetch_timeout, 5 s (runner-rpc/routes.ts maxWaitOf). */
const HOLD_MS = 4_500;
const REGISTER_CHUNK = 50;
const TASK_WAIT_MS = 15_000;
/** GANTRY_BENCH_REQUEST_KEYS=1: FetchTasks send request keys (see the header). */
const REQUEST_KEYS = process.env.GANTRY_BENCH_REQUEST_KEYS?.trim() === '1';

/** The swarm's reports per job: the final UpdateTask alone, or forgejo-runner's whole sequence. */
function reportsPerJob(): 'final' | 'forgejo' {
  const raw = process.env.GANTRY_BENCH_RUNNER_REPORTS?.trim() ?? '';
  if (raw === '' || raw === 'final') return 'final';
  if (raw === 'forgejo') return 'forgejo';
  throw new Error(`GANTRY_BENCH_RUNNER_REPORTS must be "final" or "forgejo", got "${raw}"`);
}

function queuedJobs(): number {
  const raw = process.env.GANTRY_BENCH_RUNNER_JOBS?.trim();
  if (!raw) return DEFAULT_JOBS;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < MATRIX_LEGS || value % MATRIX_LEGS !== 0) {
    throw new Error(`GANTRY_BENCH_RUNNER_JOBS must be a multiple of ${MATRIX_LEGS}, got "${raw}"`);
  }
  return value;
}

function matrixWorkflow(label: string, legs: number): string {
  const values = Array.from({ length: legs }, (_, i) => i).join(', ');
  return `on: workflow_dispatch
jobs:
  leg:
    runs-on: ${label}
    strategy:
      matrix:
        n: [${values}]
    steps:
      - run: echo \${{ matrix.n }}
`;
}

const PING_WORKFLOW = `on: workflow_dispatch
jobs:
  ping:
    runs-on: latency
    steps:
      - run: echo pong
`;

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}

function sortedCopy(values: readonly number[]): number[] {
  return [...values].sort((a, b) => a - b);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface LoopStats {
  polls: number;
  /** Fetches answered without a task. */
  empty: number;
  /** Fetches that ran out of their deadline (counted as polls too). */
  timeouts: number;
  errors: number;
  firstError: unknown;
}

/**
 * A runner's poll loop: FetchTask with version 0 (held by the server when
 * there is no work), and for each task `onTask`, then at once the next fetch.
 * Ends when `signal` aborts; other failures are counted, and the loop backs
 * off a little so a broken server is not hammered.
 */
async function pollLoop(
  runner: WireRunner,
  signal: AbortSignal,
  stats: LoopStats,
  /** `startedAt`: when the fetch was sent (performance.now()). */
  onTask: (taskId: bigint, fetchMs: number, startedAt: number) => Promise<void>,
  /** The call's deadline, as a runner sends its fetch_timeout (none: the server's own bound). */
  timeoutMs?: number,
): Promise<void> {
  // The key of the call in flight: a call that got no answer is asked again with it.
  let requestKey = REQUEST_KEYS ? randomUUID() : undefined;
  while (!signal.aborted) {
    try {
      const started = performance.now();
      const outcome = await runner.fetchTask({ signal, timeoutMs, requestKey });
      if (signal.aborted) return;
      if (outcome.kind === 'dropped') throw new Error('the server closed the connection under a FetchTask');
      if (outcome.kind === 'answered' && requestKey !== undefined) requestKey = randomUUID();
      stats.polls += 1;
      // A runner whose fetch ran out of time asks again, as forgejo-runner does
      // (on a loaded machine the answer can miss the deadline's margin).
      if (outcome.kind === 'timeout') stats.timeouts += 1;
      else if (outcome.taskId !== null) await onTask(outcome.taskId, performance.now() - started, started);
      else stats.empty += 1;
    } catch (error) {
      if (signal.aborted) return;
      stats.errors += 1;
      stats.firstError ??= error;
      await sleep(100);
    }
  }
}

/**
 * After the clients gave up their fetches: let the server end the ones it had
 * not started yet (each at most one long poll). A fetch whose runner hung up
 * while the request waited in a busy server can still claim a job it then
 * answers into a closed socket; on SQLite every query is synchronous, so the
 * hang-up is not seen before the claim (see runner-protocol.ts claimTasks).
 * Dispatching before they end would hand them jobs nobody runs.
 */
function settleAbandonedFetches(): Promise<void> {
  return sleep(HOLD_MS + 500);
}

function newStats(): LoopStats {
  return { polls: 0, empty: 0, timeouts: 0, errors: 0, firstError: undefined };
}

function checkStats(stats: LoopStats, what: string): void {
  if (stats.errors > 0)
    throw new Error(`${what}: ${stats.errors} failed calls, the first: ${String(stats.firstError)}`);
}

/** Registers `count` runners; returns their credentials. */
async function registerMany(
  url: string,
  registrationToken: string,
  count: number,
  labels: string[],
  ctx: ScenarioContext,
): Promise<RunnerCredentials[]> {
  const clients: RunnerCredentials[] = [];
  for (let start = 0; start < count; start += REGISTER_CHUNK) {
    const chunk = Math.min(REGISTER_CHUNK, count - start);
    const registered = await Promise.all(
      Array.from({ length: chunk }, () => registerRunner(url, registrationToken, { labels })),
    );
    for (const client of registered) {
      if (client.credentials === null) throw new Error('a registered runner has no credentials');
      clients.push(client.credentials);
    }
    if (count >= 500 && (start + chunk) % 250 === 0)
      ctx.log(`registered ${start + chunk}/${count} runners (${labels.join(',')})`);
  }
  return clients;
}

/** Runners that call `url` as forgejo-runner does, one kept-alive connection each (closed by the scenario's end). */
function wireRunners(url: string, credentials: readonly RunnerCredentials[], ctx: ScenarioContext): WireRunner[] {
  const fleet = new WireFleet();
  ctx.defer(() => fleet.destroy());
  return credentials.map((c) => wireRunner(url, c, fleet));
}

interface Setup {
  gantry: GantryServer;
  owner: User;
  token: string;
  registrationToken: string;
}

async function setUp(ctx: ScenarioContext): Promise<Setup> {
  const gantry = await startGantryServer({ databaseUrl: await ctx.databaseUrl() });
  ctx.defer(() => gantry.stop());
  const { accounts, accessTokens, repos, runners } = gantry.deps.services;
  const { owner, token } = await createBenchOwner({ accounts, accessTokens });
  const repo = await repos.create(owner, owner, { name: 'runners' });
  const work = await createWorkDir(remoteUrl(gantry.url, owner.name, repo.name, { user: owner.name, password: token }));
  ctx.defer(() => work.remove());
  await work.commit(
    {
      '.forgejo/workflows/ping.yml': PING_WORKFLOW,
    },
    'Add runner workflows',
  );
  const pushed = await work.push('main');
  if (pushed.code !== 0) throw new Error(`git push failed: ${pushed.stderr}`);
  const registrationToken = await runners.registrationToken({ ownerId: 0, repoId: repo.id });
  return { gantry, owner, token, registrationToken };
}

interface DispatchTarget {
  url: string;
  ownerName: string;
  repoName: string;
  token: string;
}

function dispatchTargetOf(setup: Setup): DispatchTarget {
  return { url: setup.gantry.url, ownerName: setup.owner.name, repoName: 'runners', token: setup.token };
}

async function dispatch(target: DispatchTarget, file: string): Promise<number> {
  const started = performance.now();
  const res = await fetch(
    `${target.url}/api/v1/repos/${target.ownerName}/${target.repoName}/actions/workflows/${file}/dispatches`,
    {
      method: 'POST',
      headers: { authorization: `token ${target.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ref: 'main' }),
    },
  );
  const elapsed = performance.now() - started;
  if (res.status !== 204)
    throw new Error(`dispatch of ${file} answered ${res.status}: ${(await res.text()).slice(0, 200)}`);
  return elapsed;
}

interface TimelineCall {
  call: 'FetchTask' | 'UpdateTask';
  /** ms from the swarm's start. */
  at: number;
  ms: number;
  runner: number;
}

/** GANTRY_BENCH_FETCH_TIMELINE: the file the swarm's calls are written to, or null. */
function timelineFile(): string | null {
  return process.env.GANTRY_BENCH_FETCH_TIMELINE?.trim() || null;
}

/**
 * Writes the timeline and logs where the FetchTasks at or above the p99
 * started: by 250 ms window of the swarm, the slow ones against all.
 */
function writeTimeline(
  file: string,
  timeline: readonly TimelineCall[],
  /** The swarm's start (performance.now()). */
  origin: number,
  p99: number,
  ctx: ScenarioContext,
): void {
  const lines = timeline.map((c) => `${c.call}\t${c.at.toFixed(2)}\t${c.ms.toFixed(2)}\t${c.runner}`);
  writeFileSync(file, `call\tat_ms\tms\trunner\n${lines.join('\n')}\n`);
  const windows = new Map<number, { all: number; slow: number }>();
  for (const c of timeline) {
    if (c.call !== 'FetchTask') continue;
    const w = Math.floor(c.at / 250);
    const entry = windows.get(w) ?? { all: 0, slow: 0 };
    entry.all += 1;
    if (c.ms >= p99) entry.slow += 1;
    windows.set(w, entry);
  }
  const slow = [...windows.entries()]
    .filter(([, e]) => e.slow > 0)
    .sort((a, b) => a[0] - b[0])
    .map(([w, e]) => `${(w * 0.25).toFixed(2)} s: ${e.slow}/${e.all}`);
  ctx.log(
    `timeline in ${file} (the swarm's start: ${Math.round(performance.timeOrigin + origin)} ms since the epoch); FetchTasks ≥ p99 (${p99.toFixed(1)} ms) by start: ${slow.join(', ')}`,
  );
}

/** Runs the swarm until `jobs` tasks are reported done; returns the seconds it took and the fetches' round trips. */
async function drain(
  clients: readonly WireRunner[],
  jobs: number,
  /** The server's process, whose CPU is read from /proc. */
  serverPid: number,
  reports: 'final' | 'forgejo' = 'final',
  /** PostgreSQL's server CPU so far (seconds), or null on SQLite. */
  pgCpu: (() => Promise<number>) | null = null,
): Promise<{
  seconds: number;
  /** When the swarm started (performance.now()). */
  started: number;
  fetchMs: number[];
  /** Each call's kind, start (ms from the swarm's start), round trip (ms) and runner, when a timeline is kept. */
  timeline: TimelineCall[];
  taskIds: Set<bigint>;
  emptyWhileQueued: number;
  /** This process's CPU (the clients) per job. */
  cpuMsPerJob: number;
  /** The server's CPU per job. */
  serverCpuMsPerJob: number;
  /** PostgreSQL's CPU per job (NaN on SQLite). */
  pgCpuMsPerJob: number;
}> {
  // Runners that were polling hold open connections: open them now, so the
  // first fetches do not measure a hundred TCP handshakes at once.
  await Promise.all(clients.map((client) => client.ping()));
  const serverCpuBefore = await processCpuSeconds(serverPid);
  const pgCpuBefore = pgCpu ? await pgCpu() : Number.NaN;
  const controller = new AbortController();
  // One signal for every client loop.
  setMaxListeners(0, controller.signal);
  const stats = newStats();
  const taskIds = new Set<bigint>();
  const fetchMs: number[] = [];
  const timeline: TimelineCall[] = [];
  const keepTimeline = timelineFile() !== null;
  let done = 0;
  let finished: () => void = () => {};
  const allDone = new Promise<void>((resolve) => (finished = resolve));
  const started = performance.now();
  let ended = started;
  let emptyWhileQueued = 0;
  let cpuMsPerJob = 0;
  let serverCpuAtEnd: Promise<number> = Promise.resolve(0);
  let pgCpuAtEnd: Promise<number> = Promise.resolve(Number.NaN);
  const loops = clients.map((client, runner) => {
    return pollLoop(client, controller.signal, stats, async (taskId, ms, fetchStarted) => {
      fetchMs.push(ms);
      if (taskIds.has(taskId)) throw new Error(`task ${taskId} handed out twice`);
      taskIds.add(taskId);
      if (keepTimeline) timeline.push({ call: 'FetchTask', at: fetchStarted - started, ms, runner });
      if (reports === 'forgejo') await client.reportTask(taskId);
      const reportStarted = performance.now();
      await client.finishTask(taskId);
      if (keepTimeline)
        timeline.push({
          call: 'UpdateTask',
          at: reportStarted - started,
          ms: performance.now() - reportStarted,
          runner,
        });
      done += 1;
      if (done === jobs) {
        const cpu = process.cpuUsage(cpuBefore);
        cpuMsPerJob = (cpu.user + cpu.system) / 1000 / jobs;
        serverCpuAtEnd = processCpuSeconds(serverPid);
        if (pgCpu) pgCpuAtEnd = pgCpu();
        emptyWhileQueued = stats.empty;
        ended = performance.now();
        finished();
      }
    });
  });
  const cpuBefore = process.cpuUsage();
  const timeout = setTimeout(() => controller.abort(), 10 * 60_000);
  try {
    await Promise.race([allDone, Promise.all(loops)]);
  } finally {
    clearTimeout(timeout);
    controller.abort();
    await Promise.all(loops);
    await settleAbandonedFetches();
  }
  checkStats(stats, 'swarm runners');
  if (done < jobs) throw new Error(`only ${done} of ${jobs} jobs were handed out and reported`);
  const serverCpuMsPerJob = (((await serverCpuAtEnd) - serverCpuBefore) * 1000) / jobs;
  const pgCpuMsPerJob = (((await pgCpuAtEnd) - pgCpuBefore) * 1000) / jobs;
  return {
    seconds: (ended - started) / 1000,
    started,
    fetchMs,
    timeline,
    taskIds,
    emptyWhileQueued,
    cpuMsPerJob,
    serverCpuMsPerJob,
    pgCpuMsPerJob,
  };
}

interface SwarmSeed {
  ownerName: string;
  token: string;
  repoName: string;
  registrationToken: string;
}

/** The swarm's Gantry: a `gantry web` child process, so its CPU is its own (the clients' is this process's). */
async function startSwarmServer(ctx: ScenarioContext): Promise<GantryChildServer<SwarmSeed>> {
  const server = await startGantryChild(ctx, async (deps): Promise<SwarmSeed> => {
    const { accounts, accessTokens, repos, runners } = deps.services;
    const { owner, token } = await createBenchOwner({ accounts, accessTokens });
    const repo = await repos.create(owner, owner, { name: 'runners' });
    const registrationToken = await runners.registrationToken({ ownerId: 0, repoId: repo.id });
    return { ownerName: owner.name, token, repoName: repo.name, registrationToken };
  });
  const { ownerName, repoName, token } = server.seeded;
  const work = await createWorkDir(remoteUrl(server.url, ownerName, repoName, { user: ownerName, password: token }));
  ctx.defer(() => work.remove());
  await work.commit(
    {
      '.forgejo/workflows/warm.yml': matrixWorkflow('swarm', MATRIX_LEGS),
      '.forgejo/workflows/swarm.yml': matrixWorkflow('swarm', MATRIX_LEGS),
    },
    'Add runner workflows',
  );
  const pushed = await work.push('main');
  if (pushed.code !== 0) throw new Error(`git push failed: ${pushed.stderr}`);
  return server;
}

async function countJobs(db: Db, status: 'waiting' | 'not successful'): Promise<number> {
  const query = db.selectFrom('action_run_job').select(db.fn.countAll<number>().as('n'));
  const row = await (
    status === 'waiting'
      ? query.where('status', '=', ActionStatus.waiting)
      : query.where('status', '!=', ActionStatus.success)
  ).executeTakeFirstOrThrow();
  return Number(row.n);
}

async function throughputMetrics(ctx: ScenarioContext): Promise<Metric[]> {
  const jobs = queuedJobs();
  const reports = reportsPerJob();
  /** The figures of forgejo-runner's reports are named apart and carry no target. */
  const named = (metric: string): string => (reports === 'forgejo' ? `${metric}, forgejo-runner's reports` : metric);
  const targetOf = (target: Metric['target']): Metric['target'] => (reports === 'forgejo' ? null : target);
  const server = await startSwarmServer(ctx);
  const target: DispatchTarget = {
    url: server.url,
    ownerName: server.seeded.ownerName,
    repoName: server.seeded.repoName,
    token: server.seeded.token,
  };
  const database = server.openDatabase();
  ctx.defer(() => database.destroy());
  const clients = wireRunners(
    server.url,
    await registerMany(server.url, server.seeded.registrationToken, SWARM_RUNNERS, ['swarm'], ctx),
    ctx,
  );

  const pgCpu = ctx.database === 'postgres' ? await pgServerCpu(database.db) : null;

  ctx.log(`warming up: ${MATRIX_LEGS} jobs through ${SWARM_RUNNERS} runners…`);
  await dispatch(target, 'warm.yml');
  await drain(clients, MATRIX_LEGS, server.pid, reports);

  /** Queues `jobs` jobs (dispatches of the matrix) and checks they all wait. */
  const queue = async (): Promise<void> => {
    ctx.log(
      `queueing ${jobs.toLocaleString('en-US')} jobs (${jobs / MATRIX_LEGS} dispatches of a ${MATRIX_LEGS}-leg matrix)…`,
    );
    for (let i = 0; i < jobs / MATRIX_LEGS; i += 1) await dispatch(target, 'swarm.yml');
    const waiting = await countJobs(database.db, 'waiting');
    if (waiting !== jobs) throw new Error(`${waiting} jobs waiting, expected ${jobs}`);
  };
  const checkAllSucceeded = async (): Promise<void> => {
    const left = await countJobs(database.db, 'not successful');
    if (left !== 0) throw new Error(`${left} jobs are not successful after the swarm`);
  };

  // The first swarm after the server starts: V8 is still compiling the hot
  // paths' code on background threads (about 40 % of gantry web's CPU in this
  // swarm on a 2-core machine), competing for the cores with the server and
  // the clients. Its figures are printed without a target: a fleet's control
  // plane runs for days, and the targets are for a server past its warm-up.
  await queue();
  ctx.log(
    `first swarm (the server just started, its code still being compiled): ${jobs.toLocaleString('en-US')} jobs…`,
  );
  const first = await drain(clients, jobs, server.pid, reports, pgCpu);
  await checkAllSucceeded();
  const firstFetches = sortedCopy(first.fetchMs);
  const firstRate = jobs / first.seconds;
  ctx.log(
    `first swarm: ${Math.round(firstRate)} jobs/s; FetchTask with a task p99 ${percentile(firstFetches, 99).toFixed(1)} ms; ` +
      `CPU per job: gantry web ${first.serverCpuMsPerJob.toFixed(2)} ms` +
      (pgCpu ? `, PostgreSQL ${first.pgCpuMsPerJob.toFixed(2)} ms` : ''),
  );

  await queue();
  ctx.log(
    `measuring: ${SWARM_RUNNERS} runners take ${jobs.toLocaleString('en-US')} jobs` +
      (reports === 'forgejo' ? ', reporting each as forgejo-runner does…' : '…'),
  );
  const waits = pgCpu && process.env.GANTRY_BENCH_PG_WAITS === '1' ? sampleWaits(database.db, 20) : null;
  const result = await drain(clients, jobs, server.pid, reports, pgCpu);
  if (waits) logWaits(await waits.stop(), ctx);
  await checkAllSucceeded();
  await server.stop();
  const rate = jobs / result.seconds;
  const fetches = sortedCopy(result.fetchMs);
  const file = timelineFile();
  if (file !== null) writeTimeline(file, result.timeline, result.started, percentile(fetches, 99), ctx);
  ctx.log(
    `${jobs} jobs in ${result.seconds.toFixed(2)} s: ${Math.round(rate)} jobs/s; FetchTask with a task p50 ${percentile(fetches, 50).toFixed(1)} ms, ` +
      `p99 ${percentile(fetches, 99).toFixed(1)} ms, max ${(fetches[fetches.length - 1] ?? 0).toFixed(0)} ms; ${result.emptyWhileQueued} empty answers before the last job was taken; ` +
      `CPU per job: gantry web ${result.serverCpuMsPerJob.toFixed(2)} ms, the clients ${result.cpuMsPerJob.toFixed(2)} ms` +
      (pgCpu ? `, PostgreSQL ${result.pgCpuMsPerJob.toFixed(2)} ms` : ''),
  );
  const pgMetrics: Metric[] = pgCpu
    ? [
        {
          metric: named("PostgreSQL's CPU per job (ms, its server processes)"),
          value: result.pgCpuMsPerJob,
          baseline: null,
          ratio: null,
          target: null,
          decimals: 2,
        },
      ]
    : [];
  return [
    {
      metric: named(`jobs assigned+finished/s (${SWARM_RUNNERS} runners, ${jobs} queued)`),
      value: rate,
      baseline: null,
      ratio: null,
      target: targetOf({ of: 'value', kind: 'atLeast', threshold: ctx.database === 'postgres' ? 600 : 1000 }),
      decimals: 0,
    },
    {
      metric: named('the same, the first swarm after the server started (no target: its code still compiling)'),
      value: firstRate,
      baseline: null,
      ratio: null,
      target: null,
      decimals: 0,
    },
    {
      metric: named('FetchTask answering a task: p50 (ms)'),
      value: percentile(fetches, 50),
      baseline: null,
      ratio: null,
      target: null,
      decimals: 1,
    },
    {
      metric: named('FetchTask answering a task: p99 (ms)'),
      value: percentile(fetches, 99),
      baseline: null,
      ratio: null,
      target: targetOf({ of: 'value', kind: 'atMost', threshold: 100 }),
      decimals: 1,
    },
    {
      metric: named('the same, the first swarm after the server started (no target)'),
      value: percentile(firstFetches, 99),
      baseline: null,
      ratio: null,
      target: null,
      decimals: 1,
    },
    {
      metric: named('FetchTask answered empty while jobs were queued'),
      value: result.emptyWhileQueued,
      baseline: null,
      ratio: null,
      target: null,
      decimals: 0,
    },
    {
      metric: named("gantry web's CPU per job (ms, its own process)"),
      value: result.serverCpuMsPerJob,
      baseline: null,
      ratio: null,
      target: null,
      decimals: 2,
    },
    ...pgMetrics,
  ];
}

/** GANTRY_BENCH_PG_WAITS=1: what Gantry's backends did during the swarm, as shares of every sample. */
function logWaits(counts: Map<string, number>, ctx: ScenarioContext): void {
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  const shares = [...counts.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([key, n]) => `${key} ${((n / total) * 100).toFixed(1)} %`);
  ctx.log(`PostgreSQL backends over ${total} samples: ${shares.join('; ')}`);
}

async function latencyMetrics(setup: Setup, ctx: ScenarioContext): Promise<Metric[]> {
  const clients = wireRunners(
    setup.gantry.url,
    await registerMany(setup.gantry.url, setup.registrationToken, LATENCY_RUNNERS, ['latency'], ctx),
    ctx,
  );
  const controller = new AbortController();
  // One signal for every client loop.
  setMaxListeners(0, controller.signal);
  const stats = newStats();
  let onTask: ((at: number) => void) | null = null;
  let stray = 0;
  const loops = clients.map((client) =>
    pollLoop(client, controller.signal, stats, async (taskId) => {
      const at = performance.now();
      if (onTask === null) stray += 1;
      else onTask(at);
      onTask = null;
      await client.finishTask(taskId);
    }),
  );
  const latencies: number[] = [];
  const dispatchMs: number[] = [];
  try {
    // Let every runner settle into its long poll.
    await sleep(500);
    ctx.log(`measuring: ${LATENCY_DISPATCHES} dispatches, one at a time, to ${LATENCY_RUNNERS} long-polling runners…`);
    for (let i = 0; i < LATENCY_WARMUP + LATENCY_DISPATCHES; i += 1) {
      const received = new Promise<number>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no runner received dispatch ${i} within ${TASK_WAIT_MS} ms`)),
          TASK_WAIT_MS,
        );
        onTask = (at) => {
          clearTimeout(timer);
          resolve(at);
        };
      });
      const started = performance.now();
      const answered = await dispatch(dispatchTargetOf(setup), 'ping.yml');
      const at = await received;
      if (i >= LATENCY_WARMUP) {
        latencies.push(at - started);
        dispatchMs.push(answered);
      }
      // The runner reports success right after; let it get back into its poll.
      await sleep(20);
    }
  } finally {
    controller.abort();
    await Promise.all(loops);
    await settleAbandonedFetches();
  }
  checkStats(stats, 'latency runners');
  if (stray > 0) throw new Error(`${stray} tasks arrived with no dispatch outstanding`);
  const lat = sortedCopy(latencies);
  const disp = sortedCopy(dispatchMs);
  ctx.log(
    `dispatch → task p50 ${percentile(lat, 50).toFixed(1)} ms, p99 ${percentile(lat, 99).toFixed(1)} ms; the dispatch call alone p50 ${percentile(disp, 50).toFixed(1)} ms`,
  );
  return [
    {
      metric: 'dispatch → runner has task: p50 (ms) vs dispatch 204 alone',
      value: percentile(lat, 50),
      baseline: percentile(disp, 50),
      ratio: percentile(lat, 50) / percentile(disp, 50),
      target: { of: 'ratio', kind: 'atMost', threshold: 5 },
      decimals: 1,
    },
    {
      metric: 'dispatch → runner has task: p99 (ms) vs dispatch 204 alone',
      value: percentile(lat, 99),
      baseline: percentile(disp, 99),
      ratio: percentile(lat, 99) / percentile(disp, 99),
      target: null,
      decimals: 1,
    },
  ];
}

/**
 * A minute: every runner's identity and nothing-to-claim memo are checked
 * again once in it (runner-identity-cache.ts, runner-protocol.ts), so the
 * window holds each runner's whole cycle.
 */
const IDLE_WINDOW_SEC = 60;
/**
 * How long the runners poll before the window opens. A server's first
 * half-minute with its runners costs more than its later ones (its code
 * still being compiled at 222 polls a second; the connections' first
 * requests), and a fleet keeps its connections for hours.
 */
const IDLE_SETTLE_MS = 30_000;

async function idleMetrics(ctx: ScenarioContext): Promise<Metric[]> {
  const gantry = await startGantryChild(ctx, (deps) => registerIdleRunners(deps, 'idle', IDLE_RUNNERS, ctx));
  const options = { requestKeys: REQUEST_KEYS, rampMs: HOLD_MS, settleMs: IDLE_SETTLE_MS };
  const gantryWindow = await measureIdleWindow(
    ctx,
    gantry.url,
    gantry.pid,
    gantry.seeded,
    IDLE_WINDOW_SEC,
    'gantry web',
    options,
  );
  ctx.log(`gantry web: ${describeIdleWindow(gantryWindow)}`);
  await gantry.stop();
  const floorWindow = await measureFloorWindow(
    ctx,
    startBareFetchTaskChild,
    gantry.seeded,
    IDLE_WINDOW_SEC,
    'bare node:http',
    options,
  );
  return [
    {
      metric: `idle CPU % of a core, ${IDLE_RUNNERS} long-polling runners: gantry web vs bare node:http holding each poll as long`,
      value: gantryWindow.cpuShare,
      baseline: floorWindow.cpuShare,
      ratio: gantryWindow.cpuShare / floorWindow.cpuShare,
      target: null,
      decimals: 1,
    },
    {
      metric: 'idle CPU % of a core: Gantry share (gantry web less the floor)',
      value: gantryWindow.cpuShare - floorWindow.cpuShare,
      baseline: null,
      ratio: null,
      target: { of: 'value', kind: 'atMost', threshold: 3 },
      decimals: 1,
    },
    {
      metric: 'idle polls/s (FetchTask answered), gantry web vs bare node:http',
      value: gantryWindow.pollsPerSec,
      baseline: floorWindow.pollsPerSec,
      ratio: gantryWindow.pollsPerSec / floorWindow.pollsPerSec,
      target: null,
      decimals: 0,
    },
  ];
}

export const runners: Scenario = {
  name: 'runners',
  description:
    `jobs/s with ${SWARM_RUNNERS} runners and ${(Number(process.env.GANTRY_BENCH_RUNNER_JOBS?.trim()) || DEFAULT_JOBS).toLocaleString('en-US')} queued jobs; ` +
    `dispatch → long-polling runner latency; idle CPU of ${IDLE_RUNNERS.toLocaleString('en-US')} long-polling runners`,
  async run(ctx) {
    // GANTRY_BENCH_RUNNERS_PARTS=throughput,latency,idle: only those parts (default all three).
    const parts = process.env.GANTRY_BENCH_RUNNERS_PARTS?.split(',').map((part) => part.trim()) ?? [
      'throughput',
      'latency',
      'idle',
    ];
    const throughput = parts.includes('throughput') ? await throughputMetrics(ctx) : [];
    const latency = parts.includes('latency') ? await latencyMetrics(await setUp(ctx), ctx) : [];
    const idle = parts.includes('idle') ? await idleMetrics(ctx) : [];
    return [...throughput, ...latency, ...idle];
  },
};
