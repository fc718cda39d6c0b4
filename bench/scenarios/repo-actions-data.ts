// Issue 3's figures: reading one repository variable when 100,000 variables are
// stored across 1,000 repositories, and replacing a repository secret (encrypt
// + upsert in a transaction), against a minimal JSON API on bare node:http
// (bench/lib/bare-api.ts: it parses the URL, checks the Authorization header
// against a constant and answers a small JSON, or reads and parses the PUT's
// body and answers 204). Issue 18's target: the GET at ≥ 0.5 of the baseline's
// requests per second.
//
// Both servers are child processes (`gantry web` and the bare API), the load
// generator a third, and the windows alternate between them in the same
// minutes (bench/lib/paired-windows.ts): the GET's figure is the median ratio
// of GANTRY_BENCH_READ_PAIRS pairs (default 3), printed with each side's CPU
// per request; the PUT's is one pair. `gantry web` logs at its default level
// (info), as users run it. One more pair puts the same API as a minimal
// Fastify route (bench/lib/bare-api.ts) against the bare one: the ratio no
// Fastify server can pass on this machine, printed beside the target.
import type { Db } from '../../src/models/database.ts';
import type { User } from '../../src/models/users.ts';
import { startBareApiChild } from '../lib/bare-api.ts';
import { startGantryChild } from '../lib/gantry-child-server.ts';
import { median, pairedWindows } from '../lib/paired-windows.ts';
import type { Window } from '../lib/paired-windows.ts';
import type { Metric, Scenario, ScenarioContext } from '../lib/scenario.ts';
import { createBenchOwner } from '../lib/bench-owner.ts';

const REPOS = 1_000;
const VARIABLES_PER_REPO = 100;
const CHUNK = 500;

function repoName(i: number): string {
  return `repo-${String(i).padStart(4, '0')}`;
}

function variableName(i: number): string {
  return `VAR_${String(i).padStart(3, '0')}`;
}

/** Repository rows (no git directory: these routes never open one) and their variables, in bulk. */
async function seed(db: Db, owner: User, ctx: ScenarioContext): Promise<void> {
  const nowSec = Math.floor(Date.now() / 1000);
  await db.transaction().execute(async (tx) => {
    for (let start = 0; start < REPOS; start += CHUNK) {
      const rows = Array.from({ length: Math.min(CHUNK, REPOS - start) }, (_, k) => {
        const name = repoName(start + k + 1);
        return {
          owner_id: owner.id,
          owner_name: owner.name,
          name,
          lower_name: name,
          default_branch: 'main',
          created_unix: nowSec,
          updated_unix: nowSec,
        };
      });
      const repos = await tx.insertInto('repository').values(rows).returning('id').execute();
      for (const repo of repos) {
        const variables = Array.from({ length: VARIABLES_PER_REPO }, (_, v) => ({
          owner_id: 0,
          repo_id: repo.id,
          name: variableName(v + 1),
          data: `value ${v + 1} of repository ${repo.id}`,
          created_unix: nowSec,
          updated_unix: nowSec,
        }));
        for (let i = 0; i < variables.length; i += CHUNK)
          await tx
            .insertInto('action_variable')
            .values(variables.slice(i, i + CHUNK))
            .execute();
      }
      ctx.log(`seeding ${REPOS} repositories × ${VARIABLES_PER_REPO} variables… ${start + rows.length}/${REPOS}`);
    }
  });
}

const READ_PAIRS = Number(process.env.GANTRY_BENCH_READ_PAIRS?.trim() || '3');

interface Seeded {
  ownerName: string;
  ownerId: number;
  repoId: number;
  token: string;
}

export const repoActionsData: Scenario = {
  name: 'repo-actions-data',
  description: `GET one repository variable with ${(REPOS * VARIABLES_PER_REPO).toLocaleString('en-US')} variables in ${REPOS.toLocaleString('en-US')} repositories; PUT (replace) a repository secret`,
  async run(ctx) {
    if (!Number.isInteger(READ_PAIRS) || READ_PAIRS < 1)
      throw new Error(`GANTRY_BENCH_READ_PAIRS must be a whole number ≥ 1`);
    const repo = repoName(REPOS / 2);
    const gantry = await startGantryChild<Seeded>(
      ctx,
      async (deps) => {
        const { accounts, accessTokens } = deps.services;
        const { owner, token } = await createBenchOwner({ accounts, accessTokens });
        await seed(deps.database.db, owner, ctx);
        const row = await deps.database.db
          .selectFrom('repository')
          .select('id')
          .where('owner_id', '=', owner.id)
          .where('lower_name', '=', repo)
          .executeTakeFirstOrThrow();
        return { ownerName: owner.name, ownerId: owner.id, repoId: row.id, token };
      },
      // The default log level, as users run it: the request lines are part of the cost.
      { GANTRY_LOG_LEVEL: 'info' },
    );
    ctx.defer(() => gantry.stop());
    const { ownerName, token } = gantry.seeded;
    const headers = { authorization: `token ${token}` };
    const variablePath = `/api/v1/repos/${ownerName}/${repo}/actions/variables/${variableName(50)}`;
    const response = await fetch(`${gantry.url}${variablePath}`, { headers });
    const body = await response.text();
    if (response.status !== 200) throw new Error(`GET variable answered ${response.status}: ${body.slice(0, 200)}`);
    const variable = JSON.parse(body) as { data: string };
    const bare = await startBareApiChild({
      token,
      data: variable.data,
      ownerId: 0,
      repoId: gantry.seeded.repoId,
    });
    ctx.defer(() => bare.stop());
    const bareBody = await (await fetch(`${bare.url}${variablePath}`, { headers })).text();
    if (bareBody !== body) throw new Error(`the bare API answers ${bareBody}, Gantry ${body}`);

    const get = await pairedWindows(
      ctx,
      { label: 'bare GET', pid: bare.pid, request: { url: `${bare.url}${variablePath}`, headers } },
      { label: 'Gantry GET variable', pid: gantry.pid, request: { url: `${gantry.url}${variablePath}`, headers } },
      READ_PAIRS,
    );
    ctx.log(
      `GET variable: median ratio ${get.medianRatio.toFixed(2)} of pairs ${get.ratios.map((r) => r.toFixed(2)).join(', ')} ` +
        `(target ≥ 0.5); load average ${get.loadAverage.map((l) => l.toFixed(1)).join(' → ')}`,
    );

    // The framework's own floor: the same API as one Fastify route, against the bare one.
    const floorServer = await startBareApiChild({
      token,
      data: variable.data,
      ownerId: 0,
      repoId: gantry.seeded.repoId,
      framework: 'fastify',
    });
    ctx.defer(() => floorServer.stop());
    const floorBody = await (await fetch(`${floorServer.url}${variablePath}`, { headers })).text();
    if (floorBody !== body) throw new Error(`the minimal Fastify API answers ${floorBody}, Gantry ${body}`);
    const floor = await pairedWindows(
      ctx,
      { label: 'bare GET', pid: bare.pid, request: { url: `${bare.url}${variablePath}`, headers } },
      {
        label: 'minimal Fastify GET',
        pid: floorServer.pid,
        request: { url: `${floorServer.url}${variablePath}`, headers },
      },
      1,
    );
    await floorServer.stop();
    ctx.log(
      `GET through a minimal Fastify route: ratio ${floor.medianRatio.toFixed(2)} of the bare API (the framework's floor)`,
    );

    const secretPath = `/api/v1/repos/${ownerName}/${repo}/actions/secrets/BENCH_SECRET`;
    const put = {
      method: 'PUT' as const,
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ data: 'a secret value of moderate length, 48 characters' }),
    };
    const first = await fetch(`${gantry.url}${secretPath}`, put);
    if (first.status !== 201) throw new Error(`first PUT secret answered ${first.status}`);
    const putResult = await pairedWindows(
      ctx,
      { label: 'bare PUT', pid: bare.pid, request: { url: `${bare.url}${secretPath}`, ...put } },
      { label: 'Gantry PUT secret', pid: gantry.pid, request: { url: `${gantry.url}${secretPath}`, ...put } },
      1,
    );

    const medianOf = (windows: readonly Window[], key: 'rps' | 'p99' | 'cpuUsPerRequest') =>
      median(windows.map((w) => w[key]));
    const metrics: Metric[] = [
      {
        metric: `GET variable rps (median of ${READ_PAIRS} alternating pairs)`,
        value: medianOf(get.measured, 'rps'),
        baseline: medianOf(get.baseline, 'rps'),
        ratio: get.medianRatio,
        target: { of: 'ratio', kind: 'atLeast', threshold: 0.5 },
        decimals: 0,
      },
      {
        metric: 'GET variable server CPU per request (µs)',
        value: medianOf(get.measured, 'cpuUsPerRequest'),
        baseline: medianOf(get.baseline, 'cpuUsPerRequest'),
        ratio: medianOf(get.measured, 'cpuUsPerRequest') / medianOf(get.baseline, 'cpuUsPerRequest'),
        target: null,
        decimals: 0,
      },
      {
        metric: 'GET, a minimal Fastify route doing the same, rps (1 pair; the framework floor)',
        value: medianOf(floor.measured, 'rps'),
        baseline: medianOf(floor.baseline, 'rps'),
        ratio: floor.medianRatio,
        target: null,
        decimals: 0,
      },
      {
        metric: 'GET, a minimal Fastify route: server CPU per request (µs)',
        value: medianOf(floor.measured, 'cpuUsPerRequest'),
        baseline: medianOf(floor.baseline, 'cpuUsPerRequest'),
        ratio: medianOf(floor.measured, 'cpuUsPerRequest') / medianOf(floor.baseline, 'cpuUsPerRequest'),
        target: null,
        decimals: 0,
      },
      {
        metric: 'GET variable p99 (ms)',
        value: medianOf(get.measured, 'p99'),
        baseline: medianOf(get.baseline, 'p99'),
        ratio: null,
        target: null,
        decimals: 0,
      },
      {
        metric: 'PUT secret rps',
        value: medianOf(putResult.measured, 'rps'),
        baseline: medianOf(putResult.baseline, 'rps'),
        ratio: putResult.medianRatio,
        target: null,
        decimals: 0,
      },
      {
        metric: 'PUT secret p99 (ms)',
        value: medianOf(putResult.measured, 'p99'),
        baseline: medianOf(putResult.baseline, 'p99'),
        ratio: null,
        target: null,
        decimals: 0,
      },
    ];
    return metrics;
  },
};
