// Actions runs at scale, three figures:
// 1. The runs list, filtered and paged, and the workflows API's runs list of
//    one workflow, in a repository of 1,000,000 runs against one of 10,000
//    with the same mix (target: mean latency ≤ 1.5× the 10k one, so neither
//    the page nor total_count grows with the table).
// 2. Workflow dispatch throughput (POST …/dispatches answering 204) against
//    Gantry's own GET /api/v1/version (target ≥ 300 dispatches/s).
// 3. A 50 MB incompressible push over smart HTTP: peak growth of this
//    process's RSS (the server runs here) while git pushes (target ≤ 64 MB),
//    so the pack is streamed to git, never buffered.
//
// GANTRY_BENCH_RUNS scales the big repository down (default 1,000,000).
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { sql } from 'kysely';
import type { Repository } from '../../src/models/repos.ts';
import type { User } from '../../src/models/users.ts';
import { createWorkDir, remoteUrl } from '../../test/support/workdir.ts';
import type { WorkDir } from '../../test/support/workdir.ts';
import { measureWithWarmup } from '../lib/autocannon.ts';
import { startGantryServer } from '../lib/gantry-server.ts';
import type { GantryServer } from '../lib/gantry-server.ts';
import type { Metric, Scenario, ScenarioContext } from '../lib/scenario.ts';
import { bigRuns, DEFAULT_BIG_RUNS, seedRuns, SMALL_RUNS } from '../lib/seed-runs.ts';
import type { SeededCounts } from '../lib/seed-runs.ts';
import { createBenchOwner } from '../lib/bench-owner.ts';

const CONNECTIONS = 10;
const PAGE_LIMIT = 30;
const PUSH_BYTES = 50 * 1024 * 1024;
const RSS_SAMPLE_MS = 50;
const MB = 1024 * 1024;

/** The filters measured: one on counted columns the status and event indexes serve, one on workflow and ref. */
const FILTERS = [
  { label: 'status+event', query: { status: 'success', event: 'push' } },
  { label: 'workflow+ref', query: { workflow_id: 'deploy.yml', ref: 'refs/heads/feature-07' } },
] as const;

/** The workflow whose runs the workflows API lists (12% of the seeded runs). */
const WORKFLOW_LISTED = 'deploy.yml';

/**
 * A GET, sent once more on a network error: seeding a million rows through
 * SQLite blocks this process's event loop for long stretches, so the server
 * may close an idle keep-alive socket just as the client reuses it.
 */
async function fetchOnceMore(url: string, headers: Record<string, string>): Promise<Response> {
  try {
    return await fetch(url, { headers });
  } catch {
    return fetch(url, { headers });
  }
}

/** Mean latency from throughput: a closed loop of CONNECTIONS connections (Little's law). */
function meanLatencyMs(rps: number): number {
  return (CONNECTIONS * 1000) / rps;
}

async function runsListMetrics(
  gantry: GantryServer,
  owner: User,
  headers: Record<string, string>,
  ctx: ScenarioContext,
): Promise<Metric[]> {
  const { db } = gantry.deps.database;
  const { repos } = gantry.deps.services;
  const big = bigRuns();
  const sizes = [
    { name: 'runs-10k', runs: SMALL_RUNS },
    { name: 'runs-big', runs: big },
  ];
  const seeded: Array<{ repo: Repository; runs: number; counts: SeededCounts }> = [];
  for (const { name, runs } of sizes) {
    const repo = await repos.create(owner, owner, { name });
    const started = performance.now();
    const counts = await seedRuns(db, repo, owner, runs, ctx);
    const seconds = (performance.now() - started) / 1000;
    ctx.log(
      `seeded ${runs.toLocaleString('en-US')} runs (${counts.rows.size} count rows) in ${seconds.toFixed(1)} s (${Math.round(runs / seconds).toLocaleString('en-US')} runs/s) on ${ctx.database}`,
    );
    seeded.push({ repo, runs, counts });
  }
  if (ctx.database === 'postgres') {
    // What autovacuum does within a minute of a bulk load; without it the planner guesses at an empty table.
    await sql`analyze action_run`.execute(db);
    await sql`analyze action_run_count`.execute(db);
  }

  const label = (runs: number): string =>
    runs >= 1_000_000 && runs % 1_000_000 === 0
      ? `${runs / 1_000_000}M`
      : runs >= 1000
        ? `${Math.round(runs / 1000)}k`
        : String(runs);
  const metrics: Metric[] = [];
  // Each list: the URL of a page in one repository and the total_count it must answer.
  const lists = [
    ...FILTERS.map((filter) => ({
      label: `runs list ${filter.label}`,
      url: (repo: Repository) =>
        `${gantry.url}/api/v1/repos/${owner.name}/${repo.name}/actions/runs?${new URLSearchParams({ ...filter.query, limit: String(PAGE_LIMIT), page: '1' }).toString()}`,
      expected: (counts: SeededCounts) => counts.total(filter.query),
    })),
    {
      // Gitea's per-workflow runs list (the workflows API): the workflow_id index and the run counts.
      label: `workflow runs list (GET …/workflows/${WORKFLOW_LISTED}/runs)`,
      url: (repo: Repository) =>
        `${gantry.url}/api/v1/repos/${owner.name}/${repo.name}/actions/workflows/${WORKFLOW_LISTED}/runs?limit=${PAGE_LIMIT}&page=1`,
      expected: (counts: SeededCounts) => counts.total({ workflow_id: WORKFLOW_LISTED }),
    },
  ];
  for (const list of lists) {
    const targets = [];
    for (const { repo, runs, counts } of seeded) {
      const url = list.url(repo);
      const response = await fetchOnceMore(url, headers);
      const text = await response.text();
      if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}: ${text.slice(0, 200)}`);
      const body = JSON.parse(text) as { total_count: number; workflow_runs: unknown[] };
      const expected = list.expected(counts);
      if (body.total_count !== expected) throw new Error(`${url}: total_count ${body.total_count}, seeded ${expected}`);
      if (body.workflow_runs.length !== Math.min(PAGE_LIMIT, expected))
        throw new Error(`${url}: ${body.workflow_runs.length} runs on page 1`);
      targets.push({
        url,
        label: `${list.label} in ${label(runs)} runs (total_count ${expected})`,
        rps: [] as number[],
      });
    }
    const [small, large] = targets as [(typeof targets)[0], (typeof targets)[0]];
    // Small, large, large, small: drift over the run (a checkpoint, a GC of the
    // seeding garbage, a noisy neighbour) weighs on both sizes alike.
    for (const target of [small, large, large, small]) {
      target.rps.push(
        (await measureWithWarmup(ctx, target.label, { url: target.url, headers, connections: CONNECTIONS })).rps,
      );
    }
    const meanRps = (rps: number[]): number => rps.reduce((a, b) => a + b, 0) / rps.length;
    const meanLatency = (rps: number[]): number => rps.reduce((a, b) => a + meanLatencyMs(b), 0) / rps.length;
    const name = `${list.label} ${label(big)} vs ${label(SMALL_RUNS)}`;
    metrics.push(
      {
        metric: `${name}: mean latency (ms)`,
        value: meanLatency(large.rps),
        baseline: meanLatency(small.rps),
        ratio: meanLatency(large.rps) / meanLatency(small.rps),
        target: { of: 'ratio', kind: 'atMost', threshold: 1.5 },
      },
      {
        metric: `${name}: rps`,
        value: meanRps(large.rps),
        baseline: meanRps(small.rps),
        ratio: meanRps(large.rps) / meanRps(small.rps),
        target: null,
        decimals: 0,
      },
    );
  }
  return metrics;
}

const DEPLOY_WORKFLOW = `name: Deploy
on:
  workflow_dispatch:
    inputs:
      target:
        description: Where to deploy
        required: true
jobs:
  build:
    runs-on: docker
    steps:
      - run: echo build
  deploy:
    needs: build
    runs-on: docker
    steps:
      - run: echo deploy to \${{ inputs.target }}
`;

async function pushedWorkDir(
  gantry: GantryServer,
  owner: User,
  token: string,
  repoName: string,
  ctx: ScenarioContext,
): Promise<WorkDir> {
  await gantry.deps.services.repos.create(owner, owner, { name: repoName });
  const work = await createWorkDir(remoteUrl(gantry.url, owner.name, repoName, { user: owner.name, password: token }));
  ctx.defer(() => work.remove());
  return work;
}

async function dispatchMetrics(
  gantry: GantryServer,
  owner: User,
  token: string,
  headers: Record<string, string>,
  ctx: ScenarioContext,
): Promise<Metric[]> {
  const work = await pushedWorkDir(gantry, owner, token, 'deploy-app', ctx);
  await work.commit(
    { 'README.md': '# deploy-app\n', '.forgejo/workflows/deploy.yml': DEPLOY_WORKFLOW },
    'Add the deploy workflow',
  );
  const pushed = await work.push('main');
  if (pushed.code !== 0) throw new Error(`git push failed: ${pushed.stderr}`);

  const url = `${gantry.url}/api/v1/repos/${owner.name}/deploy-app/actions/workflows/deploy.yml/dispatches`;
  const post = {
    method: 'POST' as const,
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ ref: 'main', inputs: { target: 'staging' } }),
  };
  const first = await fetch(url, post);
  if (first.status !== 204)
    throw new Error(`first dispatch answered ${first.status}: ${(await first.text()).slice(0, 200)}`);
  const version = await measureWithWarmup(ctx, 'Gantry GET /api/v1/version', {
    url: `${gantry.url}/api/v1/version`,
    headers,
    connections: CONNECTIONS,
  });
  const dispatch = await measureWithWarmup(ctx, 'Gantry POST dispatches', { url, ...post, connections: CONNECTIONS });
  const repo = await gantry.deps.services.repos.find(owner, 'deploy-app');
  const made = await gantry.deps.database.db
    .selectFrom('action_run_index')
    .select('max_index')
    .where('repo_id', '=', repo?.id ?? 0)
    .executeTakeFirst();
  ctx.log(`dispatch created ${Number(made?.max_index ?? 0).toLocaleString('en-US')} runs`);
  return [
    {
      metric: 'dispatch (204) rps vs GET version',
      value: dispatch.rps,
      baseline: version.rps,
      ratio: dispatch.rps / version.rps,
      target: { of: 'value', kind: 'atLeast', threshold: 300 },
      decimals: 0,
    },
    {
      metric: 'dispatch p99 (ms) vs GET version',
      value: dispatch.p99,
      baseline: version.p99,
      ratio: null,
      target: null,
      decimals: 0,
    },
  ];
}

/** Writes `bytes` of random data a mebibyte at a time, so the bench process never holds the file. */
async function writeRandomFile(file: string, bytes: number): Promise<void> {
  const handle = await fs.open(file, 'w');
  try {
    for (let written = 0; written < bytes; written += MB)
      await handle.write(randomBytes(Math.min(MB, bytes - written)));
  } finally {
    await handle.close();
  }
}

/** Loose and packed object bytes of a work dir: what a first push sends, give or take the pack framing. */
async function objectBytes(work: WorkDir): Promise<number> {
  const { stdout } = await work.git(['count-objects', '-v']);
  const kib = (key: string): number => Number(new RegExp(`^${key}: (\\d+)$`, 'm').exec(stdout)?.[1] ?? 0);
  return (kib('size') + kib('size-pack')) * 1024;
}

async function pushMetrics(gantry: GantryServer, owner: User, token: string, ctx: ScenarioContext): Promise<Metric[]> {
  const work = await pushedWorkDir(gantry, owner, token, 'big-push', ctx);
  ctx.log(`writing and committing ${PUSH_BYTES / MB} MB of random data…`);
  await writeRandomFile(path.join(work.dir, 'random.bin'), PUSH_BYTES);
  const head = await work.commit({ 'README.md': '# big-push\n' }, 'Add 50 MB of random data');
  const packBytes = await objectBytes(work);

  const before = process.memoryUsage().rss;
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, RSS_SAMPLE_MS);
  ctx.log('pushing…');
  const started = performance.now();
  let pushed;
  try {
    pushed = await work.push('main');
  } finally {
    clearInterval(sampler);
  }
  const seconds = (performance.now() - started) / 1000;
  peak = Math.max(peak, process.memoryUsage().rss);
  if (pushed.code !== 0) throw new Error(`git push of ${PUSH_BYTES / MB} MB failed: ${pushed.stderr}`);
  const remote = (await work.git(['ls-remote', 'origin', 'refs/heads/main'])).stdout.split('\t')[0];
  if (remote !== head) throw new Error(`after the push Gantry's main is ${remote}, expected ${head}`);
  const growth = (peak - before) / MB;
  ctx.log(
    `push of ${(packBytes / MB).toFixed(1)} MB took ${seconds.toFixed(2)} s; RSS ${(before / MB).toFixed(0)} → peak ${(peak / MB).toFixed(0)} MB`,
  );
  return [
    {
      metric: '50 MB push: peak RSS growth (MB) vs pack (MB)',
      value: growth,
      baseline: packBytes / MB,
      ratio: growth / (packBytes / MB),
      target: { of: 'value', kind: 'atMost', threshold: 64 },
      decimals: 1,
    },
    { metric: '50 MB push: duration (s)', value: seconds, baseline: null, ratio: null, target: null, decimals: 2 },
  ];
}

export const actionsRuns: Scenario = {
  name: 'actions-runs',
  description:
    `runs list filtered page and one workflow's runs in ${process.env.GANTRY_BENCH_RUNS?.trim() || DEFAULT_BIG_RUNS.toLocaleString('en-US')} vs ${SMALL_RUNS.toLocaleString('en-US')} runs; ` +
    'workflow dispatch throughput; peak RSS of a 50 MB git push',
  async run(ctx) {
    const gantry = await startGantryServer({ databaseUrl: await ctx.databaseUrl() });
    ctx.defer(() => gantry.stop());
    const { accounts, accessTokens } = gantry.deps.services;
    const { owner, token } = await createBenchOwner({ accounts, accessTokens });
    const headers = { authorization: `token ${token}` };

    // The push first, while the process is small and quiet; the million rows last.
    const push = await pushMetrics(gantry, owner, token, ctx);
    const dispatch = await dispatchMetrics(gantry, owner, token, headers, ctx);
    const list = await runsListMetrics(gantry, owner, headers, ctx);
    return [...list, ...dispatch, ...push];
  },
};
