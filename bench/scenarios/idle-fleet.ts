// Issue 18's large idle fleet: 5,000 registered runners long-polling a
// `gantry web` child process that has no work for them, for 60 s (or
// GANTRY_BENCH_FLEET_SEC seconds; not GANTRY_BENCH_DURATION, which is
// shorter for the other scenarios and made this window 20 s). Reported: the child's CPU
// share of one core over that window (its utime + stime from /proc, against
// wall time; target ≤ 10 %) and its RSS at the end (target ≤ 300 MB). The
// runner clients live in this process, so their own CPU is not counted; they
// speak FetchTask over plain sockets (bench/lib/runner-wire.ts), cheap
// enough that 5,000 of them do not starve this process into timing out
// calls the server answered in time.
// Every client fetches as forgejo-runner does, with its default fetch_timeout
// of 5 s as the call's deadline (Connect-Timeout-Ms); a fetch that runs out
// of it is asked again, as the runner does. SQLite by default;
// GANTRY_BENCH_DB=postgres for PostgreSQL (its own processes not counted).
// After Gantry's window the same clients poll bare node:http in a child
// process (bench/lib/bare-fetch-task.ts) for as long: the floor, what Node's
// HTTP server costs for these polls by itself. Gantry's figure is also
// printed as a ratio to it and as CPU µs per poll. Then, as long again, a
// plain node:net server answering the same bytes (bench/lib/raw-fetch-task.ts):
// the least any Node server spends on these polls, whatever its HTTP code.
// GANTRY_BENCH_CPU_PROF=<folder>: the gantry web child writes a --cpu-prof
// profile there when it stops. GANTRY_BENCH_HEAP_SNAPSHOT=<folder>: it writes
// a heap snapshot there at the end of its window, the polls still held.
import fs from 'node:fs/promises';
import path from 'node:path';
import { startBareFetchTaskChild } from '../lib/bare-fetch-task.ts';
import { startGantryChild } from '../lib/gantry-child-server.ts';
import { describeIdleWindow, measureFloorWindow, measureIdleWindow, registerIdleRunners } from '../lib/idle-polls.ts';
import { readProcessMemory } from '../lib/process-memory.ts';
import { startRawFetchTaskChild } from '../lib/raw-fetch-task.ts';
import type { Metric, Scenario, ScenarioContext } from '../lib/scenario.ts';

const RUNNERS = 5_000;
const DEFAULT_WINDOW_SEC = 60;
/** Clients start spread over this long, then run this long before the window opens. */
const RAMP_MS = 10_000;
/** GANTRY_BENCH_REQUEST_KEYS=1: every fetch sends a fresh request key, as forgejo-runner releases of 2026 do. */
const REQUEST_KEYS = process.env.GANTRY_BENCH_REQUEST_KEYS?.trim() === '1';
const MB = 1024 * 1024;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function windowSec(): number {
  const raw = process.env.GANTRY_BENCH_FLEET_SEC?.trim();
  return raw ? Number(raw) : DEFAULT_WINDOW_SEC;
}

/** Signals the process to write a heap snapshot into `dir` and waits until the file stops growing. */
async function heapSnapshot(ctx: ScenarioContext, pid: number, dir: string): Promise<void> {
  const before = new Set(await fs.readdir(dir));
  process.kill(pid, 'SIGUSR2');
  let last = -1;
  for (let waited = 0; waited < 300; waited += 1) {
    await sleep(1000);
    const file = (await fs.readdir(dir)).find((name) => name.endsWith('.heapsnapshot') && !before.has(name));
    if (file === undefined) continue;
    const { size } = await fs.stat(path.join(dir, file));
    if (size > 0 && size === last) {
      ctx.log(`heap snapshot written: ${path.join(dir, file)} (${(size / MB).toFixed(0)} MB)`);
      return;
    }
    last = size;
  }
  throw new Error('no heap snapshot after 300 s');
}

export const idleFleet: Scenario = {
  name: 'idle-fleet',
  description: `CPU share and RSS of a gantry web process holding ${RUNNERS.toLocaleString('en-US')} idle long-polling runners, and of bare node:http and a raw node:net server holding them as long`,
  async run(ctx) {
    const seconds = windowSec();
    if (!Number.isFinite(seconds) || seconds < 1) throw new Error('GANTRY_BENCH_FLEET_SEC must be ≥ 1');
    const snapshotDir = process.env.GANTRY_BENCH_HEAP_SNAPSHOT?.trim() || undefined;
    if (snapshotDir !== undefined) await fs.mkdir(snapshotDir, { recursive: true });
    const server = await startGantryChild(
      ctx,
      (deps) => registerIdleRunners(deps, 'fleet', RUNNERS, ctx),
      // Every runner holds a connection: above the default of 4096, as an operator of such a fleet sets it.
      { GANTRY_HTTP_MAX_CONNECTIONS: String(RUNNERS * 2) },
      snapshotDir ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${path.resolve(snapshotDir)}`] : [],
    );
    const { url, pid, seeded: credentials } = server;
    // The same process before any runner connects: what the fleet adds is the difference.
    const rssAtStart = (await readProcessMemory(pid)).rss;
    const windowOptions = { requestKeys: REQUEST_KEYS, rampMs: RAMP_MS };
    const gantry = await measureIdleWindow(ctx, url, pid, credentials, seconds, 'gantry web', {
      ...windowOptions,
      beforeClose: snapshotDir === undefined ? undefined : () => heapSnapshot(ctx, pid, snapshotDir),
    });
    ctx.log(
      `gantry web: ${describeIdleWindow(gantry)} (${(rssAtStart / MB).toFixed(0)} MB before the runners connected)`,
    );
    await server.stop();

    // The floor, measured after Gantry's window with the same clients: bare node:http holding each poll as long.
    const floor = await measureFloorWindow(
      ctx,
      startBareFetchTaskChild,
      credentials,
      seconds,
      'bare node:http',
      windowOptions,
    );
    ctx.log(
      `gantry web / bare node:http: CPU ${(gantry.cpuShare / floor.cpuShare).toFixed(2)}×, per poll ${(gantry.cpuPerPollUs / floor.cpuPerPollUs).toFixed(2)}× (${Math.round(gantry.cpuPerPollUs - floor.cpuPerPollUs)} µs more)`,
    );
    // The raw floor: no HTTP machinery at all, only the event loop, the sockets and a timer per poll.
    const rawFloor = await measureFloorWindow(
      ctx,
      startRawFetchTaskChild,
      credentials,
      seconds,
      'raw node:net',
      windowOptions,
    );
    const metrics: Metric[] = [
      {
        metric: `gantry web CPU % of a core, ${RUNNERS} idle long-polling runners (${seconds} s)`,
        value: gantry.cpuShare,
        baseline: null,
        ratio: null,
        target: { of: 'value', kind: 'atMost', threshold: 10 },
        decimals: 1,
      },
      {
        metric: 'the same, vs bare node:http holding each poll as long (the floor)',
        value: gantry.cpuShare,
        baseline: floor.cpuShare,
        ratio: gantry.cpuShare / floor.cpuShare,
        target: null,
        decimals: 1,
      },
      {
        metric: 'CPU µs per idle poll, gantry web vs bare node:http',
        value: gantry.cpuPerPollUs,
        baseline: floor.cpuPerPollUs,
        ratio: gantry.cpuPerPollUs / floor.cpuPerPollUs,
        target: null,
        decimals: 0,
      },
      {
        metric: 'bare node:http vs a raw node:net server answering the same bytes (the least any Node server spends)',
        value: floor.cpuShare,
        baseline: rawFloor.cpuShare,
        ratio: floor.cpuShare / rawFloor.cpuShare,
        target: null,
        decimals: 1,
      },
      {
        metric: `gantry web RSS (MB), ${RUNNERS} idle long-polling runners (baseline: before they connect)`,
        value: gantry.rss / MB,
        baseline: rssAtStart / MB,
        ratio: null,
        target: { of: 'value', kind: 'atMost', threshold: 300 },
        decimals: 0,
      },
      {
        metric: 'RSS (MB) of bare node:http holding the same polls',
        value: floor.rss / MB,
        baseline: null,
        ratio: null,
        target: null,
        decimals: 0,
      },
      {
        metric: 'idle polls/s answered (or timed out), gantry web vs bare node:http',
        value: gantry.pollsPerSec,
        baseline: floor.pollsPerSec,
        ratio: gantry.pollsPerSec / floor.pollsPerSec,
        target: null,
        decimals: 0,
      },
      {
        metric: 'idle polls/s answered (or timed out), raw node:net',
        value: rawFloor.pollsPerSec,
        baseline: null,
        ratio: null,
        target: null,
        decimals: 0,
      },
    ];
    return metrics;
  },
};
