// Scale-out throughput: the mixed workload of test/scale-out.test.ts (git
// pushes, workflow dispatches, secret and variable writes, 50 runner clients
// running every job, organization webhooks to a local receiver) through nginx
// for a fixed time, once with one Gantry process behind it and once with two
// sharing one PostgreSQL database and data folder. The figure is completed
// operations per second (a push, a dispatch, a secret or variable write, a job
// run to success: one each) during the measurement, after a warm-up; the
// ratio is 2 processes / 1, each the mean of two measurements taken in the
// order 1, 2, 2, 1 (each on a fresh database). Always on PostgreSQL (a throwaway cluster when
// GANTRY_BENCH_DB is sqlite): SQLite is one file for one machine.
//
// Everything shares the machine: with 2 cores, PostgreSQL, nginx, the load
// generator (50 runners, git) and the Gantry processes compete for them, so a
// second process can add little.
import { startGantryFleet, FLEET_ADMIN } from '../../test/support/gantry-fleet.ts';
import { setUpMixedWorkload } from '../../test/support/mixed-workload.ts';
import type { OperationKind } from '../../test/support/mixed-workload.ts';
import { nginxMissingReason } from '../../test/support/nginx.ts';
import { startPgCluster } from '../../test/support/pg-cluster.ts';
import { createScratchPgDatabase } from '../../test/support/pg-database.ts';
import { startWebhookReceiver } from '../../test/support/webhook-receiver.ts';
import type { Metric, Scenario, ScenarioContext } from '../lib/scenario.ts';

const SHAPE = { orgs: 2, reposPerOrg: 2, runners: 50 };

interface Throughput {
  opsPerSec: number;
  byKind: Map<OperationKind, number>;
}

/** A scratch PostgreSQL database: the run's own cluster, or one started for this scenario. */
async function postgresUrl(ctx: ScenarioContext, cluster: { url: string } | null): Promise<string> {
  const given = await ctx.databaseUrl();
  if (given !== null) return given;
  if (cluster === null) throw new Error('no PostgreSQL cluster');
  const scratch = await createScratchPgDatabase(cluster.url);
  ctx.defer(() => scratch.drop());
  return scratch.url;
}

/**
 * At least 10 s: a job needs a FetchTask round (up to 3 s held) and three
 * reports before it counts, so jobs finish at their steady rate only after
 * several rounds; a shorter warm-up would measure mostly API writes.
 */
function warmupSec(ctx: ScenarioContext): number {
  return Math.max(ctx.warmupSec, 10);
}

/** Repeats `step` until `stopAt` (performance.now() milliseconds). */
async function until(stopAt: number, step: () => Promise<void>): Promise<void> {
  while (performance.now() < stopAt) await step();
}

async function measure(processes: number, databaseUrl: string, ctx: ScenarioContext): Promise<Throughput> {
  const receiver = await startWebhookReceiver();
  const fleet = await startGantryFleet({
    processes,
    databaseUrl,
    env: { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' },
  }).catch(async (error: unknown) => {
    await receiver.close();
    throw error;
  });
  try {
    const workload = await setUpMixedWorkload({
      url: fleet.url,
      adminToken: fleet.adminToken,
      adminName: FLEET_ADMIN.name,
      shape: SHAPE,
      hookUrl: receiver.url,
      prefix: `p${processes}`,
    });
    try {
      // The first push adds the workflow that pushes and dispatches run.
      await Promise.all(workload.repos.map((repo) => workload.push(repo)));
      const windowStart = performance.now() + warmupSec(ctx) * 1000;
      const windowEnd = windowStart + ctx.durationSec * 1000;
      const byKind = new Map<OperationKind, number>();
      workload.onOperation = (kind) => {
        const at = performance.now();
        if (at >= windowStart && at < windowEnd) byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
      };
      ctx.log(`${processes} process(es): ${warmupSec(ctx)} s warm-up, then ${ctx.durationSec} s measured…`);
      const swarm = workload.startRunners();
      try {
        const scopes = [
          ...workload.orgs.map((org) => `orgs/${org}`),
          ...workload.repos.map((repo) => `repos/${repo.fullName}`),
        ];
        await Promise.all([
          ...workload.repos.map((repo) => until(windowEnd, () => workload.push(repo))),
          ...workload.repos.flatMap((repo) => [0, 1].map(() => until(windowEnd, () => workload.dispatch(repo)))),
          ...scopes.map((scope) => until(windowEnd, () => workload.writeSettings(scope))),
        ]);
        // Runners keep running jobs until the window has passed.
        const left = windowEnd - performance.now();
        if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
      } finally {
        await swarm.stop();
      }
      if (workload.violations.length > 0)
        throw new Error(
          `${workload.violations.length} broken guarantees with ${processes} process(es), the first: ${workload.violations.slice(0, 3).join('; ')}`,
        );
      if (workload.tally.serverErrors.length > 0)
        throw new Error(
          `${workload.tally.serverErrors.length} answers were 5xx with ${processes} process(es): ${workload.tally.serverErrors.slice(0, 3).join('; ')}`,
        );
      const ops = [...byKind.values()].reduce((a, b) => a + b, 0);
      const throughput = { opsPerSec: ops / ctx.durationSec, byKind };
      const fetches = [...workload.fetchMs].sort((a, b) => a - b);
      ctx.log(
        `${processes} process(es): ${throughput.opsPerSec.toFixed(1)} ops/s (${[...byKind].map(([kind, n]) => `${kind} ${n}`).join(', ')}); ` +
          `FetchTask p50 ${Math.round(fetches[fetches.length >> 1] ?? 0)} ms, max ${Math.round(fetches[fetches.length - 1] ?? 0)} ms`,
      );
      return throughput;
    } finally {
      await workload.remove();
    }
  } finally {
    await fleet.stop();
    await receiver.close();
  }
}

export const scaleOut: Scenario = {
  name: 'scale-out',
  description:
    'mixed workload (pushes, dispatches, secret/variable writes, 50 runners, webhooks) through nginx on PostgreSQL: 2 Gantry processes vs 1',
  async run(ctx) {
    const missing = nginxMissingReason();
    if (missing !== null)
      throw new Error(`${missing}: the scale-out scenario puts nginx in front of the Gantry processes`);
    let cluster: { url: string } | null = null;
    if (ctx.database !== 'postgres') {
      ctx.log('starting a throwaway PostgreSQL cluster (scale-out always runs on PostgreSQL)…');
      const started = await startPgCluster({ log: (line) => ctx.log(`postgres: ${line}`) });
      ctx.defer(() => started.stop());
      cluster = started;
    }
    // A-B-B-A: the machine's other load drifts during a run; this order cancels a steady drift.
    const opsPerSec = new Map<number, number[]>([
      [1, []],
      [2, []],
    ]);
    for (const processes of [1, 2, 2, 1])
      opsPerSec.get(processes)?.push((await measure(processes, await postgresUrl(ctx, cluster), ctx)).opsPerSec);
    const mean = (values: number[] = []) => values.reduce((a, b) => a + b, 0) / values.length;
    const one = { opsPerSec: mean(opsPerSec.get(1)) };
    const two = { opsPerSec: mean(opsPerSec.get(2)) };
    return [
      {
        metric: 'mixed workload ops/s, 1 Gantry process behind nginx (mean of 2)',
        value: one.opsPerSec,
        baseline: null,
        ratio: null,
        target: null,
        decimals: 1,
      },
      {
        metric:
          'mixed workload ops/s, 2 processes vs 1 (mean of 2; 2 cores shared with PostgreSQL, nginx and the load generator: modest by nature)',
        value: two.opsPerSec,
        baseline: one.opsPerSec,
        ratio: two.opsPerSec / one.opsPerSec,
        target: null,
        decimals: 1,
      },
    ] satisfies Metric[];
  },
};
