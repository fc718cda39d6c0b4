// Seeds the runs of one repository quickly, as insertRunWithJobs would have
// left them (action_run rows, their action_run_count rows and the run
// counter), with a fixed mix of events, statuses, workflows and refs from a
// seeded generator, so every bench run stores the same rows. Shared by the
// scenarios that need a repository of a million runs.
import type { Db } from '../../src/models/database.ts';
import type { Repository } from '../../src/models/repos.ts';
import type { User } from '../../src/models/users.ts';
import { ActionStatus } from '../../src/modules/actions-status.ts';
import type { ActionStatusValue } from '../../src/modules/actions-status.ts';
import type { ScenarioContext } from './scenario.ts';

export const DEFAULT_BIG_RUNS = 1_000_000;
export const SMALL_RUNS = 10_000;
// 14 columns a row: 28,000 parameters, under SQLite's 32,766 (and PostgreSQL's 65,535).
const ROWS_PER_INSERT = 2_000;
const ROWS_PER_TRANSACTION = 50_000;
const COUNT_ROWS_PER_INSERT = 500;

/** GANTRY_BENCH_RUNS: the size of the big repository (default 1,000,000). */
export function bigRuns(): number {
  const raw = process.env.GANTRY_BENCH_RUNS?.trim();
  if (!raw) return DEFAULT_BIG_RUNS;
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < SMALL_RUNS)
    throw new Error(`GANTRY_BENCH_RUNS must be a whole number ≥ ${SMALL_RUNS}, got "${raw}"`);
  return value;
}

// The mix of both repositories: weights need not sum to 1.
const EVENTS: ReadonlyArray<readonly [string, number]> = [
  ['push', 0.7],
  ['workflow_dispatch', 0.3],
];
const STATUSES: ReadonlyArray<readonly [ActionStatusValue, number]> = [
  [ActionStatus.success, 0.7],
  [ActionStatus.failure, 0.14],
  [ActionStatus.cancelled, 0.05],
  [ActionStatus.skipped, 0.03],
  [ActionStatus.waiting, 0.03],
  [ActionStatus.running, 0.03],
  [ActionStatus.blocked, 0.02],
];
const WORKFLOWS: ReadonlyArray<readonly [string, number]> = [
  ['ci.yml', 0.35],
  ['test.yml', 0.25],
  ['lint.yml', 0.2],
  ['deploy.yml', 0.12],
  ['release.yml', 0.08],
];
// main takes a quarter of the runs, 19 feature branches share the rest.
const REFS: ReadonlyArray<readonly [string, number]> = [
  ['refs/heads/main', 0.24],
  ...Array.from({ length: 19 }, (_, i) => [`refs/heads/feature-${String(i + 1).padStart(2, '0')}`, 0.04] as const),
];

/** mulberry32: a small seeded generator, so every run seeds the same rows. */
function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pick<T>(random: () => number, weighted: ReadonlyArray<readonly [T, number]>): T {
  const total = weighted.reduce((sum, [, w]) => sum + w, 0);
  let x = random() * total;
  for (const [value, weight] of weighted) {
    x -= weight;
    if (x < 0) return value;
  }
  return (weighted[weighted.length - 1] as readonly [T, number])[0];
}

function fakeSha(random: () => number): string {
  let sha = '';
  for (let i = 0; i < 5; i++)
    sha += Math.floor(random() * 4294967296)
      .toString(16)
      .padStart(8, '0');
  return sha;
}

interface CountRow {
  workflowId: string;
  ref: string;
  event: string;
  status: ActionStatusValue;
  count: number;
}

/** What was seeded in one repository: its action_run_count rows, to check total_count against. */
export class SeededCounts {
  readonly rows = new Map<string, CountRow>();

  add(workflowId: string, ref: string, event: string, status: ActionStatusValue): void {
    const key = `${workflowId}\0${ref}\0${event}\0${status}`;
    const row = this.rows.get(key);
    if (row) row.count++;
    else this.rows.set(key, { workflowId, ref, event, status, count: 1 });
  }

  /** The total_count the API should answer for one of FILTERS. */
  total(query: Record<string, string>): number {
    let sum = 0;
    for (const row of this.rows.values()) {
      if (query.status !== undefined && row.status !== ActionStatus[query.status as keyof typeof ActionStatus])
        continue;
      if (query.event !== undefined && row.event !== query.event) continue;
      if (query.workflow_id !== undefined && row.workflowId !== query.workflow_id) continue;
      if (query.ref !== undefined && row.ref !== query.ref) continue;
      sum += row.count;
    }
    return sum;
  }
}

/**
 * `total` runs of one repository in multi-row inserts, a transaction per
 * ROWS_PER_TRANSACTION rows, then the run counts and the run counter that
 * Gantry keeps beside them (as insertRunWithJobs would have left them).
 */
export async function seedRuns(
  db: Db,
  repo: Repository,
  owner: User,
  total: number,
  ctx: ScenarioContext,
): Promise<SeededCounts> {
  const random = generator(repo.id * 7919);
  const counts = new SeededCounts();
  const firstCreated = Math.floor(Date.now() / 1000) - total * 60;
  const started = performance.now();
  let sha = fakeSha(random);
  let index = 0;
  while (index < total) {
    const end = Math.min(total, index + ROWS_PER_TRANSACTION);
    await db.transaction().execute(async (tx) => {
      while (index < end) {
        const rows = [];
        const chunkEnd = Math.min(end, index + ROWS_PER_INSERT);
        while (index < chunkEnd) {
          index++;
          const event = pick(random, EVENTS);
          const status = pick(random, STATUSES);
          const workflowId = pick(random, WORKFLOWS);
          const ref = pick(random, REFS);
          // About half the runs share their commit with the run before (one push, several workflows).
          if (random() < 0.5) sha = fakeSha(random);
          const created = firstCreated + index * 60;
          const done =
            status !== ActionStatus.waiting && status !== ActionStatus.running && status !== ActionStatus.blocked;
          counts.add(workflowId, ref, event, status);
          rows.push({
            repo_id: repo.id,
            owner_id: owner.id,
            index_in_repo: index,
            title: `Change ${index} on ${ref.slice('refs/heads/'.length)}`,
            workflow_id: workflowId,
            trigger_user_id: owner.id,
            ref,
            commit_sha: sha,
            event,
            event_payload: `{"ref":"${ref}","after":"${sha}"}`,
            trigger_event: event,
            status,
            started: status === ActionStatus.waiting || status === ActionStatus.blocked ? 0 : created + 5,
            stopped: done ? created + 65 : 0,
            created,
            updated: done ? created + 65 : created + 5,
          });
        }
        await tx.insertInto('action_run').values(rows).execute();
      }
    });
    const elapsed = (performance.now() - started) / 1000;
    ctx.log(
      `seeding ${repo.name}: ${index.toLocaleString('en-US')}/${total.toLocaleString('en-US')} runs (${elapsed.toFixed(1)} s)`,
    );
  }
  await db.transaction().execute(async (tx) => {
    const rows = [...counts.rows.values()].map((c) => ({
      repo_id: repo.id,
      workflow_id: c.workflowId,
      ref: c.ref,
      event: c.event,
      status: c.status,
      count: c.count,
    }));
    for (let i = 0; i < rows.length; i += COUNT_ROWS_PER_INSERT)
      await tx
        .insertInto('action_run_count')
        .values(rows.slice(i, i + COUNT_ROWS_PER_INSERT))
        .execute();
    await tx.insertInto('action_run_index').values({ repo_id: repo.id, max_index: total }).execute();
  });
  return counts;
}
