// Authentication methods, account checks, scopes and the token API.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import {
  adminCreateUser,
  userCreateToken,
  userDeleteAccessToken,
  userGetCurrent,
  userGetTokens,
} from '@llamaduck/forgejo-ts';
import { basicAuth, startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';

for (const dialect of testDialects()) {
  describe(`authentication and tokens [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let bob: TestUser;
    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      bob = await s.createUser('bob');
    });
    after(async () => {
      await s.stop();
    });

    test('token, Bearer, basic password, basic token and token-as-username all authenticate', async () => {
      for (const authorization of [
        `token ${alice.token}`,
        `Bearer ${alice.token}`,
        `bearer ${alice.token}`,
        basicAuth('alice', alice.password),
        basicAuth('anything', alice.token),
        basicAuth(alice.token, ''),
        basicAuth(alice.token, 'x-oauth-basic'),
      ]) {
        const res = await userGetCurrent({ client: s.clientWith(authorization) });
        assert.equal(res.status, 200, authorization.split(' ')[0]);
        assert.equal(res.data?.login, 'alice');
        assert.equal(res.data?.email, 'alice@example.com');
      }
    });

    test('a credential that does not verify is 401 on every route, anonymous ones included', async () => {
      for (const authorization of [
        `token ${'0'.repeat(40)}`,
        'token not-a-token',
        basicAuth('alice', 'wrong-password'),
        basicAuth('nobody', 'whatever1'),
      ]) {
        for (const path of ['/user', '/version']) {
          const res = await s.api('GET', path, { authorization });
          assert.equal(res.status, 401, `${authorization} ${path}`);
          assert.deepEqual(res.json, {
            message: 'invalid username, password or token',
            url: `${s.rootUrl}api/swagger`,
          });
        }
      }
    });

    test('a token seen a moment ago (held by the credential cache) answers alike, whatever the spacing', async () => {
      for (let round = 0; round < 2; round += 1) {
        for (const authorization of [`token ${bob.token}`, `  Bearer\t ${bob.token}  `, `TOKEN ${bob.token}`]) {
          const res = await s.api('GET', '/user', { authorization });
          assert.equal(res.status, 200, `${JSON.stringify(authorization)}, round ${round}`);
          assert.equal((res.json as { login: string }).login, 'bob');
        }
        // Three words are no credential at all, cached token or not.
        const three = await s.api('GET', '/user', { authorization: `token ${bob.token} more` });
        assert.equal(three.status, 401);
        assert.deepEqual(three.json, { message: 'token is required', url: `${s.rootUrl}api/swagger` });
      }
      const sudo = await s.api('GET', '/user', { token: bob.token, headers: { sudo: 'alice' } });
      assert.equal(sudo.status, 403, 'a cached token still goes through the sudo check');
    });

    test('on one kept-alive connection each request is whom its own token names; a deleted token is refused at once', async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      const get = (authorization: string) =>
        new Promise<{ status: number; login: string | null; port: number | undefined }>((resolve, reject) => {
          const req = http.get(`${s.apiUrl}/user`, { agent, headers: { authorization } }, (res) => {
            let body = '';
            res.on('data', (chunk: Buffer) => (body += chunk.toString()));
            res.on('end', () =>
              resolve({
                status: res.statusCode ?? 0,
                login: res.statusCode === 200 ? (JSON.parse(body) as { login: string }).login : null,
                port: req.socket?.localPort,
              }),
            );
          });
          req.on('error', reject);
        });
      try {
        const minted = await s.api('POST', '/users/alice/tokens', {
          authorization: basicAuth('alice', alice.password),
          body: { name: 'one-connection', scopes: ['all'] },
        });
        assert.equal(minted.status, 201);
        const fresh = minted.json as { sha1: string; id: number };
        const seen: { status: number; login: string | null; port: number | undefined }[] = [];
        for (const authorization of [
          `token ${fresh.sha1}`,
          `token ${fresh.sha1}`,
          `token ${bob.token}`,
          `token ${fresh.sha1}`,
          'token',
          `token ${fresh.sha1}`,
        ])
          seen.push(await get(authorization));
        assert.deepEqual(
          seen.map(({ status, login }) => [status, login]),
          [
            [200, 'alice'],
            [200, 'alice'],
            [200, 'bob'],
            [200, 'alice'],
            [401, null],
            [200, 'alice'],
          ],
        );
        assert.equal(new Set(seen.map(({ port }) => port)).size, 1, 'all on one connection');
        const deleted = await s.api('DELETE', `/users/alice/tokens/${fresh.id}`, {
          authorization: basicAuth('alice', alice.password),
        });
        assert.equal(deleted.status, 204);
        const after = await get(`token ${fresh.sha1}`);
        assert.equal(after.status, 401);
        assert.equal(after.port, seen[0]?.port, 'still the same connection');
      } finally {
        agent.destroy();
      }
    });

    test('no credential or an unknown scheme is anonymous: reqToken answers 401', async () => {
      for (const authorization of [undefined, 'Digest abc', 'token']) {
        const res = await s.api('GET', '/user', authorization ? { authorization } : {});
        assert.equal(res.status, 401);
        assert.deepEqual(res.json, { message: 'token is required', url: `${s.rootUrl}api/swagger` });
      }
    });

    test('a token without the scope gets 403 naming the scope; read scope does not allow writes', async () => {
      const readRepo = await s.tokenFor(alice, ['read:repository']);
      const res = await s.api('GET', '/user', { token: readRepo });
      assert.equal(res.status, 403);
      assert.equal(
        (res.json as { message: string }).message,
        'token does not have at least one of required scope(s): [read:user]',
      );
      const readUser = await s.tokenFor(alice, ['read:user']);
      assert.equal((await s.api('GET', '/user', { token: readUser })).status, 200);
      const create = await s.api('POST', '/user/repos', { token: readUser, body: { name: 'nope' } });
      assert.equal(create.status, 403);
      assert.equal(
        (create.json as { message: string }).message,
        'token does not have at least one of required scope(s): [write:user write:repository]',
      );
      const writeUser = await s.tokenFor(alice, ['write:user']);
      assert.equal((await s.api('GET', '/user', { token: writeUser })).status, 200, 'write implies read');
    });

    test('an admin-created user must change the password first (403 without url)', async () => {
      const created = await adminCreateUser({
        client: s.admin.client,
        body: { username: 'newbie', email: 'newbie@example.com', password: 'long-enough-1' },
      });
      assert.equal(created.status, 201);
      const res = await s.api('GET', '/user', { authorization: basicAuth('newbie', 'long-enough-1') });
      assert.equal(res.status, 403);
      assert.deepEqual(res.json, {
        message: `You must change your password. Change it at: ${s.rootUrl}user/change_password`,
      });
    });

    test('sudo: admins act as another user, others are refused', async () => {
      const asAlice = await s.api('GET', '/user', { token: s.admin.token, headers: { sudo: 'alice' } });
      assert.equal(asAlice.status, 200);
      assert.equal((asAlice.json as { login: string }).login, 'alice');
      const refused = await s.api('GET', '/user?sudo=root', { token: bob.token });
      assert.equal(refused.status, 403);
      assert.deepEqual(refused.json, { message: 'Only administrators allowed to sudo.' });
    });

    test('token API: created with basic auth, shown once, scopes normalised, listed, deleted by id and name', async () => {
      const basic = s.clientWith(basicAuth('bob', bob.password));
      const created = await userCreateToken({
        client: basic,
        path: { username: 'bob' },
        body: { name: 'ci', scopes: ['read:repository', 'write:repository', 'read:user'] },
      });
      assert.equal(created.status, 201);
      const token = created.data!;
      assert.match(token.sha1 ?? '', /^[0-9a-f]{40}$/);
      assert.equal(token.token_last_eight, token.sha1?.slice(-8));
      assert.deepEqual(token.scopes, ['write:repository', 'read:user']);
      // The new token works, with its scopes.
      assert.equal((await s.api('GET', '/user', { token: token.sha1 })).status, 200);

      const listed = await userGetTokens({ client: basic, path: { username: 'bob' } });
      assert.equal(listed.status, 200);
      const raw = await s.api('GET', '/users/bob/tokens', { authorization: basicAuth('bob', bob.password) });
      assert.equal(raw.headers.get('x-total-count'), String(listed.data?.length));
      const ci = listed.data?.find((t) => t.name === 'ci');
      assert.equal(ci?.sha1, '', 'the token is never shown again');

      const again = await userCreateToken({
        client: basic,
        path: { username: 'bob' },
        body: { name: 'ci', scopes: ['all'] },
      });
      assert.equal(again.status, 400);
      assert.equal((again.error as { message: string }).message, 'access token name has been used already');
      const badScope = await s.api('POST', '/users/bob/tokens', {
        authorization: basicAuth('bob', bob.password),
        body: { name: 'x', scopes: ['write:everything'] },
      });
      assert.equal(badScope.status, 400);
      assert.equal(
        (badScope.json as { message: string }).message,
        'invalid access token scope provided: invalid access token scope: write:everything',
      );
      const noScope = await s.api('POST', '/users/bob/tokens', {
        authorization: basicAuth('bob', bob.password),
        body: { name: 'y' },
      });
      assert.equal(noScope.status, 400);
      assert.equal((noScope.json as { message: string }).message, 'access token must have a scope');
      const noName = await s.api('POST', '/users/bob/tokens', {
        authorization: basicAuth('bob', bob.password),
        body: { scopes: ['all'] },
      });
      assert.equal(noName.status, 422);
      assert.equal((noName.json as { message: string }).message, '[Name]: Required');

      const byId = await userDeleteAccessToken({ client: basic, path: { username: 'bob', token: String(token.id) } });
      assert.equal(byId.status, 204);
      assert.equal((await s.api('GET', '/user', { token: token.sha1 })).status, 401, 'a deleted token stops working');
      await userCreateToken({ client: basic, path: { username: 'bob' }, body: { name: 'named', scopes: ['all'] } });
      assert.equal(
        (await s.api('DELETE', '/users/bob/tokens/named', { authorization: basicAuth('bob', bob.password) })).status,
        204,
      );
      assert.equal(
        (await s.api('DELETE', '/users/bob/tokens/named', { authorization: basicAuth('bob', bob.password) })).status,
        404,
      );
    });

    test('token API guards: password (basic auth) required, self or admin only, unknown user 404', async () => {
      const withToken = await s.api('POST', '/users/bob/tokens', {
        token: bob.token,
        body: { name: 'z', scopes: ['all'] },
      });
      assert.equal(withToken.status, 401);
      assert.equal((withToken.json as { message: string }).message, 'auth method not allowed');
      const anonymous = await s.api('GET', '/users/bob/tokens');
      assert.equal(anonymous.status, 403);
      const other = await s.api('GET', '/users/bob/tokens', { authorization: basicAuth('alice', alice.password) });
      assert.equal(other.status, 403);
      assert.equal(
        (other.json as { message: string }).message,
        'doer should be the site admin or be same as the contextUser',
      );
      const admin = await s.api('GET', '/users/bob/tokens', { authorization: basicAuth('root', s.admin.password) });
      assert.equal(admin.status, 200);
      const missing = await s.api('GET', '/users/ghost-user/tokens', {
        authorization: basicAuth('root', s.admin.password),
      });
      assert.equal(missing.status, 404);
      assert.equal((missing.json as { message: string }).message, 'user does not exist [uid: 0, name: ghost-user]');
    });

    test('tokens are stored hashed: the plaintext is nowhere in the database', async () => {
      const rows = await s.server.deps.database.db.selectFrom('access_token').selectAll().execute();
      assert.ok(rows.length > 0);
      for (const row of rows) {
        assert.match(row.token_hash, /^[0-9a-f]{64}$/);
        assert.notEqual(row.token_hash, alice.token);
        assert.ok(!JSON.stringify(row).includes(alice.token));
      }
    });
  });
}
