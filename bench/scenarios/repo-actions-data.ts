// Issue 3's figures: reading one repository variable when 100,000 variables are
// stored across 1,000 repositories (issue 18's target: ≥ 0.5 of a bare
// node:http server sending the same bytes), and the throughput of replacing a repository secret
// (encrypt + upsert in a transaction) against a bare server answering 204.
import type { Db } from '../../src/models/database.ts';
import type { User } from '../../src/models/users.ts';
import { measureWithWarmup } from '../lib/autocannon.ts';
import { startBareServer } from '../lib/bare-server.ts';
import { startGantryServer } from '../lib/gantry-server.ts';
import type { Metric, Scenario, ScenarioContext } from '../lib/scenario.ts';

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

export const repoActionsData: Scenario = {
  name: 'repo-actions-data',
  description: `GET one repository variable with ${(REPOS * VARIABLES_PER_REPO).toLocaleString('en-US')} variables in ${REPOS.toLocaleString('en-US')} repositories; PUT (replace) a repository secret`,
  async run(ctx) {
    const gantry = await startGantryServer({ databaseUrl: await ctx.databaseUrl() });
    ctx.defer(() => gantry.stop());
    const { accounts, accessTokens } = gantry.deps.services;
    const owner = await accounts.createUser({
      username: 'bench-owner',
      email: 'bench-owner@bench.invalid',
      password: 'bench-password',
      mustChangePassword: false,
    });
    const token = (await accessTokens.create(owner, 'bench', ['all'])).secret;
    await seed(gantry.deps.database.db, owner, ctx);

    const headers = { authorization: `token ${token}` };
    const repo = repoName(REPOS / 2);
    const variableUrl = `${gantry.url}/api/v1/repos/${owner.name}/${repo}/actions/variables/${variableName(50)}`;
    const response = await fetch(variableUrl, { headers });
    const body = Buffer.from(await response.arrayBuffer());
    if (response.status !== 200)
      throw new Error(`GET variable answered ${response.status}: ${body.toString('utf8').slice(0, 200)}`);
    const bareGet = await startBareServer(body, {
      'content-type': response.headers.get('content-type') ?? 'application/json',
    });
    ctx.defer(() => bareGet.close());
    const getBaseline = await measureWithWarmup(ctx, 'bare GET', { url: `${bareGet.url}/x`, headers });
    const getMeasured = await measureWithWarmup(ctx, 'Gantry GET variable', { url: variableUrl, headers });

    const secretUrl = `${gantry.url}/api/v1/repos/${owner.name}/${repo}/actions/secrets/BENCH_SECRET`;
    const put = {
      method: 'PUT' as const,
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ data: 'a secret value of moderate length, 48 characters' }),
    };
    const first = await fetch(secretUrl, put);
    if (first.status !== 201) throw new Error(`first PUT secret answered ${first.status}`);
    const barePut = await startBareServer(Buffer.alloc(0), {}, 204);
    ctx.defer(() => barePut.close());
    const putBaseline = await measureWithWarmup(ctx, 'bare PUT', { url: `${barePut.url}/x`, ...put });
    const putMeasured = await measureWithWarmup(ctx, 'Gantry PUT secret', { url: secretUrl, ...put });

    const metrics: Metric[] = [
      {
        metric: 'GET variable rps',
        value: getMeasured.rps,
        baseline: getBaseline.rps,
        ratio: getMeasured.rps / getBaseline.rps,
        target: { of: 'ratio', kind: 'atLeast', threshold: 0.5 },
        decimals: 0,
      },
      {
        metric: 'GET variable p99 (ms)',
        value: getMeasured.p99,
        baseline: getBaseline.p99,
        ratio: null,
        target: null,
        decimals: 0,
      },
      {
        metric: 'PUT secret rps',
        value: putMeasured.rps,
        baseline: putBaseline.rps,
        ratio: putMeasured.rps / putBaseline.rps,
        target: null,
        decimals: 0,
      },
      {
        metric: 'PUT secret p99 (ms)',
        value: putMeasured.p99,
        baseline: putBaseline.p99,
        ratio: null,
        target: null,
        decimals: 0,
      },
    ];
    return metrics;
  },
};
