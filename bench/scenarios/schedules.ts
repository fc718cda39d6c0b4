// Scheduler lag with 10,000 specs registered: how late after its tick a
// scheduled run is created. Ten repositories each push 100 workflows of ten
// `@every 10m` entries (registered as every push registers them); their next
// ticks are then spread evenly over ten minutes (one UPDATE), so about 17
// ticks fall due per second, the 10,000 rows staying registered throughout.
// For the measured seconds a scheduler fires them (the server's own, whose
// pass is the same code, is stopped so that only the measuring one runs),
// and each run it creates reports its lateness: the clock when the run's
// transaction committed minus the tick. Ticks are whole seconds, so each
// second ~17 fall due at once and the last of them waits for the others.
// Baseline: the same ticks per second with only the specs the window needs
// registered, so the ratio is what the other ~10,000 cost (should be ~1).
// Target (set here; the issue asks "fire on time"): p99 ≤ 1,000 ms. Forgejo's
// own pass runs once a minute, so its lag is up to 60 s.
import { sql } from 'kysely';
import { systemClock } from '../../src/modules/clock.ts';
import { Scheduler } from '../../src/services/actions/scheduler.ts';
import { createWorkDir, remoteUrl } from '../../test/support/workdir.ts';
import { startGantryServer } from '../lib/gantry-server.ts';
import type { Metric, Scenario } from '../lib/scenario.ts';
import { createBenchOwner } from '../lib/bench-owner.ts';

const REPOS = 10;
const WORKFLOWS_PER_REPO = 100;
const SPECS_PER_WORKFLOW = 10;
const SPECS_PER_REPO = WORKFLOWS_PER_REPO * SPECS_PER_WORKFLOW;
const SPREAD_SEC = 600;
const TARGET_P99_MS = 1_000;

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}

function workflow(): string {
  const entries = Array.from({ length: SPECS_PER_WORKFLOW }, () => "    - cron: '@every 10m'").join('\n');
  return `name: Nightly\non:\n  schedule:\n${entries}\njobs:\n  night:\n    runs-on: nobody-serves-this\n    steps:\n      - run: echo night\n`;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export const schedules: Scenario = {
  name: 'schedules',
  description: `scheduler lag after the tick with ${REPOS * SPECS_PER_REPO} specs registered (~${Math.round((REPOS * SPECS_PER_REPO) / SPREAD_SEC)} ticks/s)`,
  async run(ctx) {
    const gantry = await startGantryServer({ databaseUrl: await ctx.databaseUrl() });
    ctx.defer(() => gantry.stop());
    const { accounts, accessTokens, repos, scheduler, schedules: scheduleService } = gantry.deps.services;
    const db = gantry.deps.database.db;
    await scheduler.stop();
    const { owner, token } = await createBenchOwner({ accounts, accessTokens });
    ctx.log(`registering ${REPOS * SPECS_PER_REPO} specs in ${REPOS} repositories…`);
    for (let i = 0; i < REPOS; i += 1) {
      const repo = await repos.create(owner, owner, { name: `nightly-${i}` });
      const work = await createWorkDir(
        remoteUrl(gantry.url, owner.name, repo.name, { user: owner.name, password: token }),
      );
      ctx.defer(() => work.remove());
      const files = Object.fromEntries(
        Array.from({ length: WORKFLOWS_PER_REPO }, (_, n) => [`.forgejo/workflows/nightly-${n}.yml`, workflow()]),
      );
      await work.commit(files, 'Add the nightly workflows');
      const pushed = await work.push('main');
      if (pushed.code !== 0) throw new Error(`git push failed: ${pushed.stderr}`);
    }
    const registered = await db
      .selectFrom('action_schedule')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    if (Number(registered.n) !== REPOS * SPECS_PER_REPO)
      throw new Error(`${registered.n} specs registered, expected ${REPOS * SPECS_PER_REPO}`);
    const total = REPOS * SPECS_PER_REPO;
    /** Spreads the ticks of the rows left: the first due in 2 s, then one every SPREAD_SEC / 10,000 s. */
    const spread = async (): Promise<void> => {
      const first = await db
        .selectFrom('action_schedule')
        .select((eb) => eb.fn.min<number>('id').as('id'))
        .executeTakeFirstOrThrow();
      const base = systemClock.nowSec() + 2;
      await db
        .updateTable('action_schedule')
        // Literals, not parameters: a bound number may arrive as a float and make the division exact,
        // giving ticks at fractions of a second, which the whole-second scheduler cannot have.
        .set({
          next: sql<number>`${sql.lit(base)} + ((id - ${sql.lit(Number(first.id))}) * ${sql.lit(SPREAD_SEC)}) / ${sql.lit(total)}`,
        })
        .execute();
    };
    const measure = async (): Promise<number[]> => {
      const lags: number[] = [];
      const measuring = new Scheduler(db, systemClock, (schedule) => scheduleService.fire(schedule), {
        onFired: (lagMs) => lags.push(lagMs),
        onError: (error) => ctx.log(`scheduler pass failed: ${String(error)}`),
      });
      measuring.start();
      await sleep((ctx.durationSec + 2) * 1000);
      await measuring.stop();
      return lags.sort((a, b) => a - b);
    };

    await spread();
    ctx.log(`measuring for ${ctx.durationSec + 2} s with ${total} specs registered…`);
    const lags = await measure();
    // Baseline: the same ticks per second, but only the specs the window needs are registered.
    const kept = Math.ceil(((ctx.durationSec + 4) * total) / SPREAD_SEC);
    const keep = await db.selectFrom('action_schedule').select('id').orderBy('id').limit(kept).execute();
    await db
      .deleteFrom('action_schedule')
      .where(
        'id',
        'not in',
        keep.map((r) => r.id),
      )
      .execute();
    await spread();
    ctx.log(`measuring for ${ctx.durationSec + 2} s with only ${kept} specs registered (baseline)…`);
    const baseLags = await measure();
    ctx.log(`${lags.length} scheduled runs created (baseline: ${baseLags.length})`);
    const row = (metric: string, p: number, target: Metric['target']): Metric => {
      const value = percentile(lags, p);
      const baseline = percentile(baseLags, p);
      return { metric, value, baseline, ratio: baseline > 0 ? value / baseline : null, target, decimals: 1 };
    };
    return [
      row('lag after the tick, p50 (ms)', 50, null),
      row('lag after the tick, p99 (ms)', 99, { of: 'value', kind: 'atMost', threshold: TARGET_P99_MS }),
    ];
  },
};
