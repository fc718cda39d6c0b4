// Downloading a 100 MB job log (GET …/actions/jobs/{job_id}/logs) from a
// `gantry web` child process: throughput (MB/s) and how much the server's
// resident set grows while it serves the log (target: peak growth ≤ 32 MB),
// for the archived log (gunzipped as it is sent, the usual case) and for a
// running job's plain log. The log is written before the server starts,
// through the same log store the runner protocol uses, so its bytes are what
// UpdateLog would have stored. The client streams the body and only counts
// it, in this process, so its memory is not in the figure.
//
// Peak growth: the kernel's high-water mark of the child's RSS is reset
// (/proc/<pid>/clear_refs, "5") just before the download and read after it,
// minus the RSS just before. Where the reset is refused, RSS is sampled
// every 20 ms instead. Each download runs in a fresh process. The growth is
// bounded, not proportional to the log: it is buffers allocated per chunk
// and not yet collected. Both logs are served through buffers reused for the
// whole download (services/actions/log-body.ts; the archive is inflated into
// them by modules/archive/gunzip-into.ts): growth about 0–3 MB. Before, every
// read or inflated chunk was a fresh buffer, and --trace-gc showed V8
// collecting them ("external memory pressure") only once about 32 MB had
// piled up: growth 31–36 MB. GANTRY_BENCH_LOG_MB changes the log size
// (default 100).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { createDeps } from '../../src/deps.ts';
import { ActionStatus } from '../../src/modules/actions-status.ts';
import { plainLogName } from '../../src/services/actions/task-logs.ts';
import type { LogRow } from '../../src/services/actions/task-logs.ts';
import { freePort } from '../../test/support/free-port.ts';
import { GantryChild } from '../../test/support/gantry-child.ts';
import { readProcessMemory, resetPeakMemory } from '../lib/process-memory.ts';
import { insertRunningTask } from '../lib/running-task.ts';
import type { Metric, Scenario, ScenarioContext } from '../lib/scenario.ts';

const MB = 1024 * 1024;
const OWNER = 'log-owner';
const REPO = 'logs';
const ROWS_PER_APPEND = 20_000;
const TARGET_GROWTH_MB = 32;

function logMegabytes(): number {
  const raw = process.env.GANTRY_BENCH_LOG_MB?.trim();
  if (!raw) return 100;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`GANTRY_BENCH_LOG_MB must be a whole number ≥ 1, got "${raw}"`);
  return value;
}

/** Build-output-like lines: varied enough that gzip compresses them about as much as real logs (~5×). */
function* rows(startMs: number): Generator<LogRow> {
  let seed = 0x2545f491;
  const words = [
    'compiling',
    'linking',
    'test',
    'ok',
    'PASS',
    'warning:',
    'src/modules/archive/zip-stream.ts',
    'node_modules/.bin/tsc',
    'downloaded',
    'layer',
  ];
  for (let i = 0; ; i += 1) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    const ms = startMs + i * 3;
    const content = `[${String(i).padStart(8, '0')}] ${words[seed % words.length]} ${(seed >>> 3).toString(16)} ${words[(seed >>> 8) % words.length]} ${(seed * 2654435761) >>> 0} ${'.'.repeat(seed % 23)}done`;
    yield { time: Math.floor(ms / 1000), nanos: (ms % 1000) * 1_000_000 + (seed % 1000), content };
  }
}

interface Seeded {
  url: string;
  token: string;
  env: NodeJS.ProcessEnv;
  archivedJobId: number;
  plainJobId: number;
  size: number;
}

async function seed(ctx: ScenarioContext, megabytes: number): Promise<Seeded> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-bench-logs-'));
  ctx.defer(() => fs.rm(dataDir, { recursive: true, force: true }));
  const databaseUrl = await ctx.databaseUrl();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const settings: Record<string, string> = {
    GANTRY_DATA_DIR: dataDir,
    GANTRY_HTTP_ADDR: '127.0.0.1',
    GANTRY_HTTP_PORT: String(port),
    GANTRY_ROOT_URL: `${url}/`,
    GANTRY_LOG_LEVEL: 'warn',
    // The default cap (if any) must not cut the log the scenario measures.
    GANTRY_ACTIONS_LOG_MAX_SIZE: String((megabytes + 16) * MB),
    ...(databaseUrl ? { GANTRY_DATABASE_URL: databaseUrl } : {}),
  };
  const deps = await createDeps(loadConfig(settings), { logger: pino({ level: 'silent' }) });
  try {
    const { services } = deps;
    const db = deps.database.db;
    const owner = await services.accounts.createUser({
      username: OWNER,
      email: `${OWNER}@bench.invalid`,
      password: 'bench-password',
      mustChangePassword: false,
    });
    const token = (await services.accessTokens.create(owner, 'bench', ['all'])).secret;
    const repo = await services.repos.create(owner, owner, { name: REPO });
    const now = Math.floor(Date.now() / 1000);
    const store = services.taskReports.logs;

    const task = async (archived: boolean): Promise<{ jobId: number; size: number }> => {
      const { job, taskId } = await insertRunningTask(
        db,
        { repoId: repo.id, ownerId: owner.id, title: 'big log', workflowId: 'log.yml', commitSha: 'b'.repeat(40) },
        now,
      );
      const plainName = plainLogName(repo.id, taskId);
      let size = 0;
      let lines = 0;
      const source = rows(now * 1000);
      while (size < megabytes * MB) {
        const batch: LogRow[] = [];
        for (let i = 0; i < ROWS_PER_APPEND; i += 1) batch.push(source.next().value as LogRow);
        size += await store.append(plainName, size, batch);
        lines += batch.length;
      }
      let filename = plainName;
      if (archived) {
        filename = await store.archive(plainName, size);
        await store.removePlain(plainName);
      }
      const status = archived ? ActionStatus.success : ActionStatus.running;
      await db
        .updateTable('action_task')
        .set({
          log_filename: filename,
          log_in_storage: archived ? 1 : 0,
          log_length: lines,
          log_size: size,
          status,
          stopped: archived ? now : 0,
        })
        .where('id', '=', taskId)
        .execute();
      await db.updateTable('action_run_job').set({ status }).where('id', '=', job.id).execute();
      return { jobId: job.id, size };
    };

    const started = performance.now();
    const archived = await task(true);
    const plain = await task(false);
    ctx.log(
      `wrote two ${(archived.size / MB).toFixed(1)} MB logs (one archived) in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    const env: NodeJS.ProcessEnv = { ...process.env, ...settings };
    if (!databaseUrl) delete env.GANTRY_DATABASE_URL;
    return { url, token, env, archivedJobId: archived.jobId, plainJobId: plain.jobId, size: archived.size };
  } finally {
    await deps.close();
  }
}

interface Download {
  mbPerSec: number;
  growthMb: number;
}

async function download(
  ctx: ScenarioContext,
  server: GantryChild,
  seeded: Seeded,
  jobId: number,
  what: string,
): Promise<Download> {
  const pid = server.pid;
  if (pid === undefined) throw new Error('gantry web has no pid');
  const url = `${seeded.url}/api/v1/repos/${OWNER}/${REPO}/actions/jobs/${jobId}/logs`;
  // A short warm-up request, so the first-request costs (route compilation, pools) are not in the figure.
  const warm = await fetch(url, { headers: { authorization: `token ${seeded.token}`, range: 'bytes=0-1023' } });
  if (warm.status !== 206) throw new Error(`warm-up answered ${warm.status}`);
  await warm.arrayBuffer();

  const before = await readProcessMemory(pid);
  const exactPeak = await resetPeakMemory(pid);
  let sampledPeak = before.rss;
  const sampler = exactPeak
    ? null
    : setInterval(() => {
        void readProcessMemory(pid).then((m) => {
          sampledPeak = Math.max(sampledPeak, m.rss);
        });
      }, 20);
  const started = performance.now();
  let received = 0;
  try {
    const response = await fetch(url, { headers: { authorization: `token ${seeded.token}` } });
    if (response.status !== 200 || response.body === null) throw new Error(`GET ${url} answered ${response.status}`);
    for await (const chunk of response.body) received += (chunk as Uint8Array).byteLength;
  } finally {
    if (sampler !== null) clearInterval(sampler);
  }
  const seconds = (performance.now() - started) / 1000;
  if (received !== seeded.size) throw new Error(`received ${received} bytes, expected ${seeded.size}`);
  const after = await readProcessMemory(pid);
  const peak = exactPeak ? after.peakRss : sampledPeak;
  const result = { mbPerSec: received / MB / seconds, growthMb: Math.max(0, peak - before.rss) / MB };
  ctx.log(
    `${what}: ${(received / MB).toFixed(1)} MB in ${seconds.toFixed(2)} s (${result.mbPerSec.toFixed(1)} MB/s); RSS ${(before.rss / MB).toFixed(1)} MB before, peak +${result.growthMb.toFixed(1)} MB (${exactPeak ? 'kernel high-water mark' : 'sampled'})`,
  );
  return result;
}

export const jobLogDownload: Scenario = {
  name: 'job-log-download',
  description: `download of a ${logMegabytes()} MB job log from a gantry web process: MB/s and peak RSS growth (archived and running)`,
  async run(ctx) {
    const megabytes = logMegabytes();
    const seeded = await seed(ctx, megabytes);
    // A fresh process per download: a heap grown by the first would flatter the second.
    const inFreshServer = async (jobId: number, what: string): Promise<Download> => {
      const server = new GantryChild(seeded.url, seeded.env);
      ctx.defer(async () => {
        await server.kill9();
      });
      await server.start();
      const result = await download(ctx, server, seeded, jobId, what);
      const code = await server.stop();
      if (code !== 0) throw new Error(`gantry web exited with ${code} on SIGTERM:\n${server.tail()}`);
      return result;
    };
    const archived = await inFreshServer(seeded.archivedJobId, 'archived (gzip) log');
    const plain = await inFreshServer(seeded.plainJobId, 'running (plain) log');
    const metrics: Metric[] = [
      {
        metric: `throughput (MB/s), ${megabytes} MB archived log`,
        value: archived.mbPerSec,
        baseline: null,
        ratio: null,
        target: null,
        decimals: 1,
      },
      {
        metric: `peak RSS growth (MB), ${megabytes} MB archived log`,
        value: archived.growthMb,
        baseline: null,
        ratio: null,
        target: { of: 'value', kind: 'atMost', threshold: TARGET_GROWTH_MB },
        decimals: 1,
      },
      {
        metric: `throughput (MB/s), ${megabytes} MB running log`,
        value: plain.mbPerSec,
        baseline: null,
        ratio: null,
        target: null,
        decimals: 1,
      },
      {
        metric: `peak RSS growth (MB), ${megabytes} MB running log`,
        value: plain.growthMb,
        baseline: null,
        ratio: null,
        target: { of: 'value', kind: 'atMost', threshold: TARGET_GROWTH_MB },
        decimals: 1,
      },
    ];
    return metrics;
  },
};
