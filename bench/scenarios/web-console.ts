// The web console's two busiest pages at scale: the runs list of a repository
// (/{owner}/{repo}/actions, first page and a filtered page) and the run page
// (…/runs/{index}/jobs/0/attempt/1), signed in with a session cookie, in a
// repository of 1,000,000 runs against one of 10,000 (target: p50 latency of
// the big one ≤ 1.5× the small one's: neither the page nor its count grows
// with the table). GANTRY_BENCH_RUNS scales the big repository down.
import { sql } from 'kysely';
import type { Repository } from '../../src/models/repos.ts';
import { measureWithWarmup } from '../lib/autocannon.ts';
import type { Measurement } from '../lib/autocannon.ts';
import { startGantryServer } from '../lib/gantry-server.ts';
import type { Metric, Scenario } from '../lib/scenario.ts';
import { bigRuns, seedRuns, SMALL_RUNS } from '../lib/seed-runs.ts';

const CONNECTIONS = 10;

function label(runs: number): string {
  return runs >= 1_000_000 && runs % 1_000_000 === 0 ? `${runs / 1_000_000}M` : `${Math.round(runs / 1000)}k`;
}

export const webConsole: Scenario = {
  name: 'web-console',
  description: `web console runs list and run page latency (p50/p99) in ${label(bigRuns())} vs ${label(SMALL_RUNS)} runs`,
  async run(ctx) {
    const gantry = await startGantryServer({ databaseUrl: await ctx.databaseUrl() });
    ctx.defer(() => gantry.stop());
    const { db } = gantry.deps.database;
    const { accounts, repos, webSessions } = gantry.deps.services;
    const owner = await accounts.createUser({
      username: 'bench-web',
      email: 'bench-web@bench.invalid',
      password: 'bench-password',
      mustChangePassword: false,
    });
    const { cookie } = await webSessions.start(owner);
    const headers = { cookie: `gantry_session=${cookie}` };

    const sizes = [SMALL_RUNS, bigRuns()];
    const seeded: Array<{ repo: Repository; runs: number }> = [];
    for (const runs of sizes) {
      const repo = await repos.create(owner, owner, { name: `web-${label(runs)}` });
      await seedRuns(db, repo, owner, runs, ctx);
      // The newest run gets a job, so its run page has something to show (seeded runs have none).
      const run = await db
        .selectFrom('action_run')
        .select(['id', 'commit_sha'])
        .where('repo_id', '=', repo.id)
        .where('index_in_repo', '=', runs)
        .executeTakeFirstOrThrow();
      await db
        .insertInto('action_run_job')
        .values({
          run_id: run.id,
          repo_id: repo.id,
          owner_id: owner.id,
          commit_sha: run.commit_sha,
          name: 'build',
          attempt: 1,
          handle: `bench-${repo.id}`,
          workflow_payload: '',
          job_id: 'build',
          needs: '[]',
          runs_on: '["docker"]',
          has_if: 0,
          status: 1,
          created: 1,
          updated: 1,
        })
        .execute();
      seeded.push({ repo, runs });
    }
    if (ctx.database === 'postgres') {
      await sql`analyze action_run`.execute(db);
      await sql`analyze action_run_count`.execute(db);
    }

    const pages = [
      { name: 'runs list page', path: (repo: Repository) => `/${owner.name}/${repo.name}/actions` },
      {
        name: 'runs list page status+event',
        path: (repo: Repository) => `/${owner.name}/${repo.name}/actions?status=1&event=push`,
      },
      {
        name: 'run page',
        path: (repo: Repository, runs: number) => `/${owner.name}/${repo.name}/actions/runs/${runs}/jobs/0/attempt/1`,
      },
    ];
    const metrics: Metric[] = [];
    for (const page of pages) {
      const results: Measurement[] = [];
      for (const { repo, runs } of seeded) {
        const url = `${gantry.url}${page.path(repo, runs)}`;
        const check = await fetch(url, { headers });
        const text = await check.text();
        if (check.status !== 200 || !text.includes('Signed in as'))
          throw new Error(`GET ${url} answered ${check.status}: ${text.slice(0, 200)}`);
        results.push(
          await measureWithWarmup(ctx, `${page.name} in ${label(runs)} runs`, {
            url,
            headers,
            connections: CONNECTIONS,
          }),
        );
      }
      const [small, big] = results as [Measurement, Measurement];
      const name = `${page.name} ${label(sizes[1] as number)} vs ${label(SMALL_RUNS)}`;
      metrics.push(
        {
          metric: `${name}: p50 latency (ms)`,
          value: big.p50,
          baseline: small.p50,
          ratio: small.p50 > 0 ? big.p50 / small.p50 : null,
          target: { of: 'ratio', kind: 'atMost', threshold: 1.5 },
        },
        {
          metric: `${name}: p99 latency (ms)`,
          value: big.p99,
          baseline: small.p99,
          ratio: small.p99 > 0 ? big.p99 / small.p99 : null,
          target: null,
        },
      );
    }
    return metrics;
  },
};
