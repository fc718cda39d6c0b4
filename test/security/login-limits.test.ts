// Password sign-in hardening (issue 13, item 10): an unknown user name costs
// the same hashing as a known one; failed sign-ins lock an account's password
// sign-in (429 with Retry-After) on every route that takes basic auth; stored
// hashes below the configured cost are replaced at the next successful
// sign-in; nothing caches a password. On every database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, scryptSync } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { TEST_PASSWORD_HASH_COST, basicAuth, startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { errorBody } from '../support/actions.ts';
import { storePasswordHash } from '../support/white-box.ts';

/** The harness's cost (14 unless set): even that hash clearly outweighs a request. */
const COST = Number(TEST_PASSWORD_HASH_COST);

/** A stored hash in Gantry's format, `scrypt$N$r$p$salt$key`, at N=2^cost. */
function hashAt(cost: number, password: string): string {
  const n = 2 ** cost;
  const salt = randomBytes(16);
  const key = scryptSync(password, salt, 32, { N: n, r: 8, p: 1, maxmem: 256 * n * 8 });
  return `scrypt$${n}$8$1$${salt.toString('base64')}$${key.toString('base64')}`;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

for (const dialect of testDialects()) {
  describe(`password sign-in hardening [${dialect}]`, () => {
    let s: TestServer;
    let bob: TestUser;
    const db = () => s.server.deps.database.db;
    const storedHash = async (id: number) =>
      (await db().selectFrom('user').select('passwd').where('id', '=', id).executeTakeFirstOrThrow()).passwd;

    before(async () => {
      s = await startTestServer(dialect);
      bob = await s.createUser('bob');
    });
    after(async () => {
      await s.stop();
    });

    test('an unknown user name takes as long as a wrong password of a real one (a dummy hash at the same cost)', async () => {
      const tim = await s.createUser('tim');
      const timed = async (name: string) => {
        const started = performance.now();
        const res = await s.api('GET', '/user', { authorization: basicAuth(name, 'not-the-password') });
        assert.equal(res.status, 401);
        assert.equal(
          (res.json as { message: string }).message,
          'invalid username, password or token',
          'the same answer for both',
        );
        return performance.now() - started;
      };
      await timed('warm-up-unknown'); // the first unknown name also makes the dummy hash
      const known: number[] = [];
      const unknown: number[] = [];
      // Interleaved, so a burst of load on the machine hits both sides alike; 7 stays under the lock.
      for (let i = 0; i < 7; i += 1) {
        known.push(await timed(tim.name));
        unknown.push(await timed(`nobody-${i}`));
      }
      const ratio = median(unknown) / median(known);
      // Without the dummy hash an unknown name answers in about 1 ms against tens of ms.
      assert.ok(
        ratio > 0.5,
        `median unknown ${median(unknown).toFixed(1)} ms vs known ${median(known).toFixed(1)} ms (ratio ${ratio.toFixed(2)})`,
      );
    });

    test('10 failed sign-ins lock the account: 429 with Retry-After even for the right password, on the API and on git; tokens still work', async () => {
      const carol = await s.createUser('carol');
      const dave = await s.createUser('dave');
      assert.equal(
        (await s.api('GET', '/user', { authorization: basicAuth('carol', carol.password) })).status,
        200,
        'signed in once: nothing is cached',
      );
      for (let i = 0; i < 10; i += 1) {
        assert.equal(
          (await s.api('GET', '/user', { authorization: basicAuth('carol', `wrong-${i}`) })).status,
          401,
          `failure ${i + 1}`,
        );
      }
      const locked = await s.api('GET', '/user', { authorization: basicAuth('carol', carol.password) });
      assert.equal(locked.status, 429);
      const retryAfter = Number(locked.headers.get('retry-after'));
      assert.ok(retryAfter > 800 && retryAfter <= 900, `Retry-After ${retryAfter}`);
      assert.deepEqual(
        locked.json,
        errorBody(s.rootUrl, `too many failed sign-ins for this account; try again in ${retryAfter} s`),
      );
      // Every route that takes basic auth: the token routes, git over HTTP (any case of the name).
      assert.equal(
        (
          await s.api('POST', '/users/carol/tokens', {
            authorization: basicAuth('Carol', carol.password),
            body: { name: 'x', scopes: ['all'] },
          })
        ).status,
        429,
      );
      const git = await fetch(`${s.url}/carol/anything.git/info/refs?service=git-upload-pack`, {
        headers: { authorization: basicAuth('carol', carol.password) },
      });
      assert.equal(git.status, 429);
      assert.ok(Number(git.headers.get('retry-after')) > 0);
      // Tokens are not passwords: they keep working, sent any way.
      assert.equal((await s.api('GET', '/user', { token: carol.token })).status, 200);
      assert.equal((await s.api('GET', '/user', { authorization: basicAuth('carol', carol.token) })).status, 200);
      // Other accounts are not affected.
      assert.equal((await s.api('GET', '/user', { authorization: basicAuth('dave', dave.password) })).status, 200);
    });

    test('unknown names lock the same way (a lock does not reveal whether an account exists); a success clears the count', async () => {
      for (let i = 0; i < 10; i += 1)
        assert.equal((await s.api('GET', '/user', { authorization: basicAuth('ghost', 'x') })).status, 401);
      assert.equal((await s.api('GET', '/user', { authorization: basicAuth('ghost', 'x') })).status, 429);
      const erin = await s.createUser('erin');
      for (let i = 0; i < 9; i += 1) await s.api('GET', '/user', { authorization: basicAuth('erin', 'x') });
      assert.equal((await s.api('GET', '/user', { authorization: basicAuth('erin', erin.password) })).status, 200);
      for (let i = 0; i < 9; i += 1)
        assert.equal((await s.api('GET', '/user', { authorization: basicAuth('erin', 'x') })).status, 401);
      assert.equal(
        (await s.api('GET', '/user', { authorization: basicAuth('erin', erin.password) })).status,
        200,
        'nine again: not locked',
      );
    });

    test('a hash below the configured cost is replaced at the next successful sign-in; a wrong password changes nothing', async () => {
      const old = hashAt(COST - 1, bob.password); // as an older, cheaper setting stored it
      await storePasswordHash(db(), bob.user.id, old);
      assert.equal((await s.api('GET', '/user', { authorization: basicAuth('bob', 'wrong') })).status, 401);
      assert.equal(await storedHash(bob.user.id), old, 'a failed sign-in does not rehash');
      assert.equal((await s.api('GET', '/user', { authorization: basicAuth('bob', bob.password) })).status, 200);
      const rehashed = await storedHash(bob.user.id);
      assert.match(rehashed, new RegExp(`^scrypt\\$${2 ** COST}\\$8\\$1\\$`));
      assert.equal(
        (await s.api('GET', '/user', { authorization: basicAuth('bob', bob.password) })).status,
        200,
        'the new hash verifies',
      );
      assert.equal(await storedHash(bob.user.id), rehashed, 'and is not replaced again');
    });

    test('a changed password applies to the very next request (no password is cached)', async () => {
      const frank = await s.createUser('frank');
      assert.equal((await s.api('GET', '/user', { authorization: basicAuth('frank', frank.password) })).status, 200);
      // As another server process sharing the database would store a change.
      await storePasswordHash(db(), frank.user.id, hashAt(COST, 'a-new-password'));
      assert.equal((await s.api('GET', '/user', { authorization: basicAuth('frank', frank.password) })).status, 401);
      assert.equal((await s.api('GET', '/user', { authorization: basicAuth('frank', 'a-new-password') })).status, 200);
    });
  });
}
