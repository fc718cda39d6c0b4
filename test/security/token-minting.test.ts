// Access tokens are minted and deleted with the account password only (issue
// 13, item 3): a token sent as the basic-auth password used to count as a
// password, so a `write:user` token could mint an `all` token. Forgejo:
// routers/api/v1/permissions/req_basic_or_rev_proxy_auth.go answers 401 "auth
// method not allowed" unless basic auth verified a password.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { userCreateToken } from '@llamaduck/forgejo-ts';
import { basicAuth, startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { answer, errorBody } from '../support/actions.ts';

for (const dialect of testDialects()) {
  describe(`token minting needs the password [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
    });
    after(async () => {
      await s.stop();
    });

    const tokenNames = async () =>
      (
        await s.server.deps.database.db
          .selectFrom('access_token')
          .select('name')
          .where('uid', '=', alice.user.id)
          .execute()
      )
        .map((r) => r.name)
        .sort();

    test('a write:user token as the basic password cannot mint an `all` token (nor list or delete tokens): 401 auth method not allowed', async () => {
      const writeUser = await s.tokenFor(alice, ['write:user']);
      const before = await tokenNames();
      const refused = errorBody(s.rootUrl, 'auth method not allowed');
      const credentials = [
        basicAuth('alice', writeUser),
        basicAuth('alice', alice.token),
        basicAuth('anyone', alice.token),
        basicAuth(alice.token, 'x-oauth-basic'),
        basicAuth(alice.token, ''),
        `token ${alice.token}`,
        `Bearer ${alice.token}`,
      ];
      for (const authorization of credentials) {
        const minted = await s.api('POST', '/users/alice/tokens', {
          authorization,
          body: { name: 'escalated', scopes: ['all'] },
        });
        assert.deepEqual([minted.status, minted.json], [401, refused], `POST with ${authorization.split(' ')[0]}`);
        const listed = await s.api('GET', '/users/alice/tokens', { authorization });
        assert.deepEqual([listed.status, listed.json], [401, refused]);
        const deleted = await s.api(
          'DELETE',
          `/users/alice/tokens/${encodeURIComponent((await tokenNames())[0] ?? 'x')}`,
          { authorization },
        );
        assert.deepEqual([deleted.status, deleted.json], [401, refused]);
      }
      // Through the client, as `curl -u alice:<token>` would send it.
      const viaClient = await answer(
        userCreateToken({
          client: s.clientWith(basicAuth('alice', writeUser)),
          path: { username: 'alice' },
          body: { name: 'escalated', scopes: ['all'] },
        }),
      );
      assert.equal(viaClient.status, 401);
      assert.deepEqual(await tokenNames(), before, 'no token was created or deleted');
    });

    test('the account password still mints and deletes tokens', async () => {
      const byPassword = await answer(
        userCreateToken({
          client: s.clientWith(basicAuth('alice', alice.password)),
          path: { username: 'alice' },
          body: { name: 'by-password', scopes: ['read:user'] },
        }),
      );
      assert.equal(byPassword.status, 201);
      assert.equal(
        (
          await s.api('DELETE', '/users/alice/tokens/by-password', {
            authorization: basicAuth('alice', alice.password),
          })
        ).status,
        204,
      );
      // A site administrator with a password may manage another user's tokens (Forgejo's reqSelfOrAdmin)…
      assert.equal(
        (await s.api('GET', '/users/alice/tokens', { authorization: basicAuth('root', s.admin.password) })).status,
        200,
      );
      // …but not with an `all` token as the password.
      assert.equal(
        (
          await s.api('POST', '/users/alice/tokens', {
            authorization: basicAuth('root', s.admin.token),
            body: { name: 'admin-made', scopes: ['all'] },
          })
        ).status,
        401,
      );
    });
  });
}
