// Idle fleets for the bench: runners registered straight into a server's
// database, and one measuring window of a server process holding their long
// polls. Used by the 1,000-runner idle part of the runners scenario and by
// the 5,000-runner idle-fleet scenario, for `gantry web` and for the floors
// (bare-fetch-task.ts, raw-fetch-task.ts), each a child process of its own.
//
// What a window measures: the server process's CPU (utime + stime from
// /proc, all its threads) against wall time, while every client loops
// FetchTask as forgejo-runner does, with its default fetch_timeout of 5 s as
// the call's deadline (Connect-Timeout-Ms); the server holds each call until
// shortly before it. The clients live in the bench's process, over plain
// sockets (runner-wire.ts), so their own CPU is not in the figure; on the same
// 2 cores they still take time from the server, the same for every server
// measured with them.
import type { Deps } from '../../src/deps.ts';
import type { RunnerCredentials } from '../../test/support/runner-client.ts';
import type { ListeningChild } from './listening-child.ts';
import { processCpuSeconds } from './process-cpu.ts';
import { readProcessMemory } from './process-memory.ts';
import { WireFleet, wireRunner } from './runner-wire.ts';
import type { FetchOutcome, WireRunner } from './runner-wire.ts';
import type { ScenarioContext } from './scenario.ts';

/** forgejo-runner's default fetch_timeout. */
export const FETCH_TIMEOUT_MS = 5_000;
/** forgejo-runner's default fetch_interval. */
const FETCH_INTERVAL_MS = 2_000;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * A user and repository named `name`, and `count` runners registered to the
 * repository with the label `idle-no-work` (no job ever asks for it), made
 * through the services of a server that is not running yet.
 */
export async function registerIdleRunners(
  deps: Deps,
  name: string,
  count: number,
  ctx: ScenarioContext,
): Promise<RunnerCredentials[]> {
  const owner = await deps.services.accounts.createUser({
    username: `${name}-owner`,
    email: `${name}-owner@bench.invalid`,
    password: 'bench-password',
    mustChangePassword: false,
  });
  const repo = await deps.services.repos.create(owner, owner, { name });
  const scope = { ownerId: 0, repoId: repo.id };
  const credentials: RunnerCredentials[] = [];
  for (let i = 0; i < count; i += 1) {
    const { runner, token } = await deps.services.runners.registerRunner(scope, {
      name: `idle-${i}`,
      version: 'bench',
      labels: ['idle-no-work'],
      ephemeral: false,
    });
    credentials.push({ id: runner.id, uuid: runner.uuid, token });
    if ((i + 1) % 1000 === 0) ctx.log(`registered ${i + 1}/${count} runners`);
  }
  return credentials;
}

export interface PollStats {
  polls: number;
  timeouts: number;
  /** Calls whose connection was closed under them. */
  dropped: number;
  tasks: number;
  errors: number;
  firstError: unknown;
}

export interface IdleWindowOptions {
  /** GANTRY_BENCH_REQUEST_KEYS=1: a fresh x-runner-request-key with every fetch, as forgejo-runner releases of 2026 send. */
  requestKeys: boolean;
  /** The clients start spread over this long… */
  rampMs: number;
  /** …then poll this long more before the window opens (default: one fetch deadline). */
  settleMs?: number;
  /** Called with the window still open (the polls held), e.g. for a heap snapshot. */
  beforeClose?: () => Promise<void>;
}

export interface IdleWindow {
  /** CPU share of one core (utime + stime from /proc against wall time). */
  cpuShare: number;
  pollsPerSec: number;
  /** CPU per answered (or timed-out) poll, µs. */
  cpuPerPollUs: number;
  rss: number;
  stats: PollStats;
}

async function pollLoop(
  runner: WireRunner,
  signal: AbortSignal,
  stats: PollStats,
  requestKeys: boolean,
): Promise<void> {
  while (!signal.aborted) {
    let outcome: FetchOutcome;
    try {
      outcome = await runner.fetchTask({ timeoutMs: FETCH_TIMEOUT_MS, requestKey: requestKeys });
    } catch (error) {
      stats.errors += 1;
      stats.firstError ??= error;
      await sleep(1000);
      continue;
    }
    if (signal.aborted) return;
    if (outcome.kind === 'answered') {
      stats.polls += 1;
      if (outcome.taskId !== null) stats.tasks += 1;
    } else if (outcome.kind === 'timeout') {
      stats.timeouts += 1;
      // forgejo-runner fetches at most once per fetch_interval (2 s) after a failed fetch.
      await sleep(FETCH_INTERVAL_MS);
    } else {
      // A kept-alive connection the server closed as the client reused it (EPIPE, ECONNRESET):
      // the runner asks again; counted, as a sign of a server shedding connections.
      stats.dropped += 1;
      await sleep(1000);
    }
  }
}

/**
 * Starts one poll loop per runner against `url` (the server's process:
 * `pid`), spread over the ramp, lets them run a while more (settleMs), then
 * reads the server's CPU over `seconds`. The loops are stopped and their
 * connections closed before it returns; a failed fetch or a task handed to
 * an idle runner throws.
 */
export async function measureIdleWindow(
  ctx: ScenarioContext,
  url: string,
  pid: number,
  credentials: readonly RunnerCredentials[],
  seconds: number,
  label: string,
  options: IdleWindowOptions,
): Promise<IdleWindow> {
  const controller = new AbortController();
  const fleet = new WireFleet();
  const stats: PollStats = { polls: 0, timeouts: 0, dropped: 0, tasks: 0, errors: 0, firstError: undefined };
  const spread = options.rampMs / credentials.length;
  const loops = credentials.map((c, i) =>
    sleep(i * spread).then(() => pollLoop(wireRunner(url, c, fleet), controller.signal, stats, options.requestKeys)),
  );
  let window: IdleWindow;
  try {
    await sleep(options.rampMs + (options.settleMs ?? FETCH_TIMEOUT_MS));
    ctx.log(`measuring ${label}'s CPU with ${credentials.length} idle long-polling runners for ${seconds} s…`);
    const polls = stats.polls + stats.timeouts;
    const cpuBefore = await processCpuSeconds(pid);
    const started = performance.now();
    await sleep(seconds * 1000);
    const cpu = (await processCpuSeconds(pid)) - cpuBefore;
    const wall = (performance.now() - started) / 1000;
    const answered = stats.polls + stats.timeouts - polls;
    const rss = (await readProcessMemory(pid)).rss;
    await options.beforeClose?.();
    window = {
      cpuShare: (cpu / wall) * 100,
      pollsPerSec: answered / wall,
      cpuPerPollUs: (cpu / Math.max(1, answered)) * 1e6,
      rss,
      stats,
    };
  } finally {
    controller.abort();
    await Promise.all(loops);
    fleet.destroy();
  }
  if (stats.errors > 0)
    throw new Error(`${label}: ${stats.errors} failed fetches, the first: ${String(stats.firstError)}`);
  if (stats.tasks > 0) throw new Error(`${label}: idle runners received ${stats.tasks} tasks`);
  return window;
}

/** A window in words, for the log. */
export function describeIdleWindow(window: IdleWindow): string {
  return `${window.cpuShare.toFixed(1)} % of one core, ${Math.round(window.cpuPerPollUs)} µs of CPU per poll, RSS ${(window.rss / 1024 / 1024).toFixed(0)} MB, ${Math.round(window.pollsPerSec)} polls/s, ${window.stats.timeouts} fetches past their deadline, ${window.stats.dropped} on a closed connection`;
}

/** A floor server's window: started as a child process, measured with the runners, stopped, logged. */
export async function measureFloorWindow(
  ctx: ScenarioContext,
  start: () => Promise<ListeningChild>,
  credentials: readonly RunnerCredentials[],
  seconds: number,
  label: string,
  options: IdleWindowOptions,
): Promise<IdleWindow> {
  const server = await start();
  ctx.defer(() => server.stop());
  const window = await measureIdleWindow(ctx, server.url, server.pid, credentials, seconds, label, options);
  await server.stop();
  ctx.log(`${label}: ${describeIdleWindow(window)}`);
  return window;
}
