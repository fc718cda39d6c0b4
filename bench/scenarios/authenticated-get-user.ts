// A token-authenticated GET /api/v1/user on a server holding 10,000 users with
// a token each, against a bare node:http server answering the same bytes.
// Target: Gantry serves at least half the baseline's requests per second.
import { hashToken, generateTokenString } from '../../src/modules/crypto/tokens.ts';
import { parseScopes, serializeScope } from '../../src/modules/scopes.ts';
import type { Db } from '../../src/models/database.ts';
import { measureWithWarmup } from '../lib/autocannon.ts';
import { startBareServer } from '../lib/bare-server.ts';
import { startGantryServer } from '../lib/gantry-server.ts';
import type { Metric, Scenario, ScenarioContext } from '../lib/scenario.ts';

const USERS = 10_000;
const CHUNK = 500;
/** Stored in place of a password hash: no one logs in with a password here. */
const NO_PASSWORD = 'bench-no-login';

interface SeededUser {
  name: string;
  token: string;
}

function userName(i: number): string {
  return `bench-user-${String(i).padStart(5, '0')}`;
}

/**
 * USERS users with an `all` token each, in one transaction of bulk inserts:
 * createUser() would hash a password with scrypt per user (minutes for 10,000).
 */
async function seedUsers(db: Db, ctx: ScenarioContext): Promise<SeededUser[]> {
  const nowSec = Math.floor(Date.now() / 1000);
  const scope = serializeScope(parseScopes(['all']));
  const seeded: SeededUser[] = [];
  await db.transaction().execute(async (tx) => {
    for (let start = 0; start < USERS; start += CHUNK) {
      const count = Math.min(CHUNK, USERS - start);
      const users = Array.from({ length: count }, (_, k) => {
        const name = userName(start + k + 1);
        const email = `${name}@bench.invalid`;
        return {
          name,
          lower_name: name.toLowerCase(),
          email,
          lower_email: email.toLowerCase(),
          passwd: NO_PASSWORD,
          type: 0,
          created_unix: nowSec,
          updated_unix: nowSec,
        };
      });
      const inserted = await tx.insertInto('user').values(users).returning(['id', 'name']).execute();
      if (inserted.length !== count) throw new Error(`inserted ${inserted.length} of ${count} users`);

      const tokens = inserted.map((row) => {
        const token = generateTokenString();
        seeded.push({ name: row.name, token });
        return {
          uid: row.id,
          name: 'bench',
          token_hash: hashToken(token),
          token_last_eight: token.slice(-8),
          scope,
          created_unix: nowSec,
          updated_unix: nowSec,
        };
      });
      await tx.insertInto('access_token').values(tokens).execute();
      const done = start + count;
      if (done % 2000 === 0 || done === USERS) ctx.log(`seeding ${USERS} users and tokens… ${done}/${USERS}`);
    }
  });
  return seeded;
}

export const authenticatedGetUser: Scenario = {
  name: 'authenticated-get-user',
  description: `token-authenticated GET /api/v1/user with ${USERS.toLocaleString('en-US')} users and tokens, against a bare node:http server sending the same bytes`,
  async run(ctx) {
    const gantry = await startGantryServer({ databaseUrl: await ctx.databaseUrl() });
    ctx.defer(() => gantry.stop());
    ctx.log(`Gantry at ${gantry.url} on ${gantry.deps.database.dialect}`);

    const seeded = await seedUsers(gantry.deps.database.db, ctx);
    const chosen = seeded[Math.floor(seeded.length / 2)];
    if (!chosen) throw new Error('no user was seeded');

    const url = `${gantry.url}/api/v1/user`;
    const headers = { authorization: `token ${chosen.token}` };

    // One real request first: the baseline must answer what Gantry answers.
    const response = await fetch(url, { headers });
    const body = Buffer.from(await response.arrayBuffer());
    if (response.status !== 200)
      throw new Error(`GET /api/v1/user answered ${response.status}: ${body.toString('utf8').slice(0, 200)}`);
    const login = (JSON.parse(body.toString('utf8')) as { login?: unknown }).login;
    if (login !== chosen.name)
      throw new Error(`GET /api/v1/user returned login ${JSON.stringify(login)}, expected ${chosen.name}`);
    const contentType = response.headers.get('content-type');
    if (!contentType) throw new Error('GET /api/v1/user sent no content-type');

    const bare = await startBareServer(body, { 'content-type': contentType });
    ctx.defer(() => bare.close());

    const baseline = await measureWithWarmup(ctx, 'bare node:http', { url: `${bare.url}/api/v1/user`, headers });
    const measured = await measureWithWarmup(ctx, 'Gantry', { url, headers });

    const metrics: Metric[] = [
      {
        metric: 'rps',
        value: measured.rps,
        baseline: baseline.rps,
        ratio: measured.rps / baseline.rps,
        target: { of: 'ratio', kind: 'atLeast', threshold: 0.5 },
        decimals: 0,
      },
      // autocannon records latencies in whole milliseconds.
      {
        metric: 'p99 latency (ms)',
        value: measured.p99,
        baseline: baseline.p99,
        ratio: null,
        target: null,
        decimals: 0,
      },
    ];
    return metrics;
  },
};
