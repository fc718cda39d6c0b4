// Access tokens are verified through a short-lived cache in each process
// (src/services/credential-cache.ts). A deleted token stops working at once
// in the process that deleted it and within CREDENTIAL_CACHE_TTL_MS (README
// "Security model") in every other one; a token whose account is prohibited
// from signing in is refused within the same bound everywhere. Two
// `gantry web` processes on one PostgreSQL database, each asked directly,
// both having just verified the token.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { openDatabase } from '../../src/models/database.ts';
import { CREDENTIAL_CACHE_TTL_MS } from '../../src/services/credential-cache.ts';
import { startGantryFleet } from '../support/gantry-fleet.ts';
import type { GantryFleet } from '../support/gantry-fleet.ts';
import { nginxSkipReason } from '../support/nginx.ts';
import { createScratchPgDatabase } from '../support/pg-database.ts';
import type { ScratchPgDatabase } from '../support/pg-database.ts';
import { basicAuth, testDialects } from '../support/server.ts';
import { prohibitSignIn } from '../support/white-box.ts';

/** Scheduling slack on a busy machine, on top of the documented bound. */
const SLACK_MS = 1500;

function skipReason(): string | false {
  if (!testDialects().includes('postgres') || !process.env.GANTRY_TEST_PG_URL)
    return 'needs PostgreSQL (run through scripts/run-tests.ts without --sqlite-only)';
  return nginxSkipReason();
}

async function status(url: string, token: string): Promise<number> {
  return (await fetch(`${url}/api/v1/user`, { headers: { authorization: `token ${token}` } })).status;
}

/** Asks `url` until the token is refused; returns how long that took. */
async function msUntilRefused(url: string, token: string, sinceMs: number): Promise<number> {
  const deadline = sinceMs + CREDENTIAL_CACHE_TTL_MS + SLACK_MS * 4;
  for (;;) {
    if ((await status(url, token)) === 401) return Date.now() - sinceMs;
    if (Date.now() > deadline) return Infinity;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('credentials revoked across processes [postgres]', { skip: skipReason() }, () => {
  let scratch: ScratchPgDatabase;
  let fleet: GantryFleet;

  before(async () => {
    scratch = await createScratchPgDatabase(process.env.GANTRY_TEST_PG_URL as string);
    fleet = await startGantryFleet({ processes: 2, databaseUrl: scratch.url });
  });

  after(async () => {
    await fleet?.stop();
    await scratch?.drop();
  });

  async function createUserWithToken(name: string): Promise<{ token: string; id: number }> {
    const created = await fetch(`${fleet.url}/api/v1/admin/users`, {
      method: 'POST',
      headers: { authorization: `token ${fleet.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        username: name,
        email: `${name}@example.com`,
        password: 'revoke-p4ssword',
        must_change_password: false,
      }),
    });
    assert.equal(created.status, 201, await created.text());
    const minted = await fetch(`${fleet.url}/api/v1/users/${name}/tokens`, {
      method: 'POST',
      headers: { authorization: basicAuth(name, 'revoke-p4ssword'), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'revoked', scopes: ['all'] }),
    });
    const body = await minted.text();
    assert.equal(minted.status, 201, body);
    const token = JSON.parse(body) as { sha1: string; id: number };
    return { token: token.sha1, id: token.id };
  }

  test('a deleted token: refused at once by the process that deleted it, within the bound by the other', async () => {
    const [a, b] = fleet.processes as [(typeof fleet.processes)[0], (typeof fleet.processes)[0]];
    const { token, id } = await createUserWithToken('revoke-token');
    // Both processes have just verified (and cached) the token.
    assert.equal(await status(a.url, token), 200);
    assert.equal(await status(b.url, token), 200);
    const deleted = await fetch(`${a.url}/api/v1/users/revoke-token/tokens/${id}`, {
      method: 'DELETE',
      headers: { authorization: basicAuth('revoke-token', 'revoke-p4ssword') },
    });
    assert.equal(deleted.status, 204);
    const deletedAt = Date.now();
    assert.equal(await status(a.url, token), 401, 'the deleting process refuses it at once');
    const took = await msUntilRefused(b.url, token, deletedAt);
    assert.ok(took <= CREDENTIAL_CACHE_TTL_MS + SLACK_MS, `the other process refused it after ${took} ms`);
  });

  test("a user prohibited from signing in: the token's requests refused within the bound by both", async () => {
    const [a, b] = fleet.processes as [(typeof fleet.processes)[0], (typeof fleet.processes)[0]];
    const { token } = await createUserWithToken('revoke-user');
    assert.equal(await status(a.url, token), 200);
    assert.equal(await status(b.url, token), 200);
    const database = openDatabase({ databaseUrl: scratch.url, dataDir: fleet.dataDir, maxConnections: 1 });
    try {
      await prohibitSignIn(database.db, 'revoke-user');
    } finally {
      await database.destroy();
    }
    const editedAt = Date.now();
    for (const p of [a, b]) {
      let took = Infinity;
      for (;;) {
        const answer = await status(p.url, token);
        if (answer === 403) {
          took = Date.now() - editedAt;
          break;
        }
        if (Date.now() > editedAt + CREDENTIAL_CACHE_TTL_MS + SLACK_MS * 4) break;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      assert.ok(took <= CREDENTIAL_CACHE_TTL_MS + SLACK_MS, `${p.address} refused it after ${took} ms`);
    }
  });
});
