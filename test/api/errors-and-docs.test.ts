// Bad input answers 4xx with {message, url}, never 500; the API description is served.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer } from '../support/server.ts';

for (const dialect of testDialects()) {
  describe(`errors and API description [${dialect}]`, () => {
    let s: TestServer;
    before(async () => {
      s = await startTestServer(dialect, { GANTRY_BODY_LIMIT: '4096' });
    });
    after(async () => {
      await s.stop();
    });

    const errorUrl = () => `${s.rootUrl}api/swagger`;

    test('malformed JSON and wrong types are 422 with a binding message', async () => {
      const malformed = await s.api('POST', '/orgs', {
        token: s.admin.token,
        rawBody: '{"username": ',
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(malformed.status, 422);
      assert.match((malformed.json as { message: string }).message, /^\[\]: invalid JSON body/);
      assert.equal((malformed.json as { url: string }).url, errorUrl());
      const wrongType = await s.api('POST', '/orgs', { token: s.admin.token, body: { username: ['x'] } });
      assert.equal(wrongType.status, 422);
      assert.match((wrongType.json as { message: string }).message, /^\[Username\]: /);
      const nul = await s.api('POST', '/orgs', {
        token: s.admin.token,
        body: { username: 'nulorg', description: 'a\u0000b' },
      });
      assert.deepEqual(nul.json, { message: '[Description]: must not contain NUL characters', url: errorUrl() });
      const notObject = await s.api('POST', '/orgs', { token: s.admin.token, body: [1, 2] });
      assert.equal(notObject.status, 422);
      const nullField = await s.api('POST', '/admin/users', {
        token: s.admin.token,
        body: { username: 'u1', email: null, password: 'long-enough' },
      });
      assert.equal(nullField.status, 422);
      const missing = await s.api('POST', '/admin/users', {
        token: s.admin.token,
        body: { username: 'u1', password: 'long-enough' },
      });
      assert.deepEqual(missing.json, { message: '[Email]: Required', url: errorUrl() });
    });

    test('admin user creation rules', async () => {
      const short = await s.api('POST', '/admin/users', {
        token: s.admin.token,
        body: { username: 'u2', email: 'u2@example.com', password: 'short' },
      });
      assert.deepEqual(short.json, { message: 'PasswordIsRequired', url: errorUrl() });
      assert.equal(short.status, 400);
      const badName = await s.api('POST', '/admin/users', {
        token: s.admin.token,
        body: { username: 'bad name', email: 'u2@example.com', password: 'long-enough' },
      });
      assert.equal(badName.status, 422);
      const badEmail = await s.api('POST', '/admin/users', {
        token: s.admin.token,
        body: { username: 'u2', email: 'not-an-email', password: 'long-enough' },
      });
      assert.deepEqual(badEmail.json, { message: 'e-mail invalid [email: not-an-email]', url: errorUrl() });
      const ok = await s.api('POST', '/admin/users', {
        token: s.admin.token,
        body: { username: 'u2', email: 'u2@example.com', password: 'long-enough', must_change_password: false },
      });
      assert.equal(ok.status, 201);
      const again = await s.api('POST', '/admin/users', {
        token: s.admin.token,
        body: { username: 'U2', email: 'other@example.com', password: 'long-enough' },
      });
      assert.deepEqual(again.json, { message: 'user already exists [name: U2]', url: errorUrl() });
      const sameEmail = await s.api('POST', '/admin/users', {
        token: s.admin.token,
        body: { username: 'u3', email: 'U2@example.com', password: 'long-enough' },
      });
      assert.deepEqual(sameEmail.json, { message: 'e-mail already in use [email: U2@example.com]', url: errorUrl() });
      const plain = await s.createUser('plain');
      const notAdmin = await s.api('POST', '/admin/users', {
        token: plain.token,
        body: { username: 'u4', email: 'u4@example.com', password: 'long-enough' },
      });
      assert.deepEqual(notAdmin.json, { message: 'user should be the site admin', url: errorUrl() });
    });

    test('oversized bodies are 413, unknown routes 404, unsupported bodies 415, all JSON', async () => {
      const big = await s.api('POST', '/orgs', {
        token: s.admin.token,
        body: { username: 'x', description: 'y'.repeat(10_000) },
      });
      assert.equal(big.status, 413);
      assert.equal((big.json as { url: string }).url, errorUrl());
      const unknown = await s.api('GET', '/no/such/route');
      assert.deepEqual(unknown.json, { message: "The target couldn't be found.", url: errorUrl(), errors: [] });
      const xml = await s.api('POST', '/orgs', {
        token: s.admin.token,
        rawBody: '<org/>',
        headers: { 'content-type': 'application/xml' },
      });
      assert.equal(xml.status, 415);
    });

    test('hostile path segments and ids answer 4xx', async () => {
      for (const p of [
        '/repos/..%2F..%2Fetc/passwd',
        '/repos/a%00b/c',
        '/orgs/%E2%98%83',
        '/teams/99999999999999999999999/members/root',
        '/teams/abc/members/root',
        '/users/%2e%2e/tokens',
      ]) {
        const res = await s.api('GET', p, { token: s.admin.token });
        assert.ok(res.status >= 400 && res.status < 500, `${p} → ${res.status}`);
        const put = await s.api('PUT', p, { token: s.admin.token });
        assert.ok(put.status >= 400 && put.status < 500, `PUT ${p} → ${put.status}`);
      }
    });

    test('JSON responses carry Forgejo headers', async () => {
      const res = await s.api('GET', '/version');
      assert.equal(res.headers.get('content-type'), 'application/json;charset=utf-8');
      assert.equal(res.headers.get('cache-control'), 'max-age=0, private, must-revalidate, no-transform');
    });

    test('the OpenAPI document is generated from the routes and the UI is served', async () => {
      const doc = await fetch(`${s.url}/swagger.v1.json`);
      assert.equal(doc.status, 200);
      const spec = (await doc.json()) as {
        openapi: string;
        paths: Record<string, Record<string, { operationId?: string }>>;
      };
      assert.match(spec.openapi, /^3\./);
      assert.equal(spec.paths['/user']?.get?.operationId, 'userGetCurrent');
      assert.equal(spec.paths['/repos/{owner}/{repo}']?.patch?.operationId, 'repoEdit');
      assert.equal(spec.paths['/users/{username}/tokens']?.post?.operationId, 'userCreateToken');
      const ui = await fetch(`${s.url}/api/swagger`, { redirect: 'follow' });
      assert.equal(ui.status, 200);
      assert.match(await ui.text(), /swagger/i);
    });

    test('health check', async () => {
      const res = await fetch(`${s.url}/api/healthz`);
      assert.equal(res.status, 200);
    });
  });
}
