// Memory must not grow with what is stored: the resident set size (VmRSS) of
// a `gantry web` process at idle, with 1,000,000 runs in one repository,
// against the same process with an empty database (target: ratio ≤ 1.5).
// Each process is started the way an operator starts it (a child process on
// its own data folder and database), serves a short session — a git push of
// a workflow, a dispatch, runs list pages with and without filters, a far
// page, one run, the tasks list — then idles for a few seconds before its RSS
// is read from /proc. SQLite by default; GANTRY_BENCH_DB=postgres for
// PostgreSQL. GANTRY_BENCH_RUNS scales the stored runs down.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { createDeps } from '../../src/deps.ts';
import { freePort } from '../../test/support/free-port.ts';
import { GantryChild } from '../../test/support/gantry-child.ts';
import { createWorkDir, remoteUrl } from '../../test/support/workdir.ts';
import { readProcessMemory } from '../lib/process-memory.ts';
import type { ProcessMemory } from '../lib/process-memory.ts';
import type { Metric, Scenario, ScenarioContext } from '../lib/scenario.ts';
import { bigRuns, seedRuns } from '../lib/seed-runs.ts';

/** Idle time before RSS is read: timers and lazy work settle, the allocator returns what it will. */
const SETTLE_MS = 5_000;
const SESSION_ROUNDS = 5;
const MB = 1024 * 1024;
const OWNER = 'idle-owner';
const REPO = 'idle';
const WORKFLOW =
  'on:\n  push:\n  workflow_dispatch:\njobs:\n  build:\n    runs-on: docker\n    steps:\n      - run: echo build\n';

interface Seeded {
  url: string;
  token: string;
  env: NodeJS.ProcessEnv;
}

/** A data folder and database holding one repository with `runs` runs, seeded before any server runs. */
async function seed(ctx: ScenarioContext, runs: number): Promise<Seeded> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-bench-idle-'));
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
    ...(databaseUrl ? { GANTRY_DATABASE_URL: databaseUrl } : {}),
  };
  const deps = await createDeps(loadConfig(settings), { logger: pino({ level: 'silent' }) });
  let token: string;
  try {
    const owner = await deps.services.accounts.createUser({
      username: OWNER,
      email: `${OWNER}@bench.invalid`,
      password: 'bench-password',
      mustChangePassword: false,
    });
    token = (await deps.services.accessTokens.create(owner, 'bench', ['all'])).secret;
    const repo = await deps.services.repos.create(owner, owner, { name: REPO });
    if (runs > 0) {
      const started = performance.now();
      await seedRuns(deps.database.db, repo, owner, runs, ctx);
      ctx.log(`seeded ${runs.toLocaleString('en-US')} runs in ${((performance.now() - started) / 1000).toFixed(1)} s`);
      // What autovacuum does within a minute of a bulk load; without it the planner guesses at an empty table.
      if (deps.database.dialect === 'postgres') await sql`analyze action_run`.execute(deps.database.db);
    }
  } finally {
    await deps.close();
  }
  const env: NodeJS.ProcessEnv = { ...process.env, ...settings };
  if (!databaseUrl) delete env.GANTRY_DATABASE_URL;
  return { url, token, env };
}

async function getJson(url: string, token: string): Promise<unknown> {
  const response = await fetch(url, { headers: { authorization: `token ${token}` } });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}: ${text.slice(0, 200)}`);
  return JSON.parse(text) as unknown;
}

/** What a user and a CI script do in a few seconds; every answer is checked, so a broken server measures nothing. */
async function session(ctx: ScenarioContext, url: string, token: string, storedRuns: number): Promise<void> {
  const work = await createWorkDir(remoteUrl(url, OWNER, REPO, { user: OWNER, password: token }));
  try {
    await work.commit({ '.forgejo/workflows/ci.yml': WORKFLOW }, 'Add CI');
    const pushed = await work.push('main');
    if (pushed.code !== 0) throw new Error(`git push failed: ${pushed.stderr}`);
  } finally {
    await work.remove();
  }
  const api = `${url}/api/v1/repos/${OWNER}/${REPO}/actions`;
  const dispatched = await fetch(`${api}/workflows/ci.yml/dispatches`, {
    method: 'POST',
    headers: { authorization: `token ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ref: 'main', return_run_info: true }),
  });
  if (dispatched.status !== 201)
    throw new Error(`dispatch answered ${dispatched.status}: ${(await dispatched.text()).slice(0, 200)}`);
  const run = (await dispatched.json()) as { id: number };
  const expectedTotal = storedRuns + 2;
  for (let round = 0; round < SESSION_ROUNDS; round += 1) {
    for (const query of [
      'limit=30&page=1',
      'limit=30&page=2',
      'status=success&event=push',
      'workflow_id=ci.yml&ref=refs/heads/main',
      'limit=50&page=200',
    ]) {
      const list = (await getJson(`${api}/runs?${query}`, token)) as { total_count: number; workflow_runs: unknown[] };
      if (query.startsWith('limit=30&page=1') && list.total_count !== expectedTotal)
        throw new Error(`total_count ${list.total_count}, expected ${expectedTotal}`);
    }
    await getJson(`${api}/runs/${run.id}`, token);
    await getJson(`${api}/tasks?limit=30`, token);
    await getJson(`${url}/api/v1/version`, token);
  }
  ctx.log(`session done (${SESSION_ROUNDS} rounds of 8 requests, a push and a dispatch)`);
}

async function idleMemory(ctx: ScenarioContext, runs: number): Promise<ProcessMemory> {
  const { url, token, env } = await seed(ctx, runs);
  const server = new GantryChild(url, env);
  ctx.defer(async () => {
    await server.kill9();
  });
  await server.start();
  await session(ctx, url, token, runs);
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const pid = server.pid;
  if (pid === undefined) throw new Error('gantry web has no pid');
  const memory = await readProcessMemory(pid);
  ctx.log(
    `${runs.toLocaleString('en-US')} runs stored: idle RSS ${(memory.rss / MB).toFixed(1)} MB (peak ${(memory.peakRss / MB).toFixed(1)} MB)`,
  );
  const code = await server.stop();
  if (code !== 0) throw new Error(`gantry web exited with ${code} on SIGTERM:\n${server.tail()}`);
  return memory;
}

function label(runs: number): string {
  return runs >= 1_000_000 && runs % 1_000_000 === 0 ? `${runs / 1_000_000}M` : `${Math.round(runs / 1000)}k`;
}

export const idleRss: Scenario = {
  name: 'idle-rss',
  description: `RSS of an idle gantry web process with ${(process.env.GANTRY_BENCH_RUNS?.trim() || '1000000').replace(/\B(?=(\d{3})+$)/g, ',')} runs stored vs an empty database`,
  async run(ctx) {
    const runs = bigRuns();
    const empty = await idleMemory(ctx, 0);
    const full = await idleMemory(ctx, runs);
    const name = `${label(runs)} runs stored vs empty`;
    const metrics: Metric[] = [
      {
        metric: `idle RSS (MB), ${name}`,
        value: full.rss / MB,
        baseline: empty.rss / MB,
        ratio: full.rss / empty.rss,
        target: { of: 'ratio', kind: 'atMost', threshold: 1.5 },
        decimals: 1,
      },
      {
        metric: `peak RSS (MB) during the session, ${name}`,
        value: full.peakRss / MB,
        baseline: empty.peakRss / MB,
        ratio: full.peakRss / empty.peakRss,
        target: null,
        decimals: 1,
      },
    ];
    return metrics;
  },
};
