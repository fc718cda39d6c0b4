// Regression tests for the 5xx answers and malformed error bodies the fuzz
// test (test/ops/fuzz.test.ts) found: each request here got a 500, or an
// error body in the wrong shape, before its fix.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { create, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { PingRequestSchema } from '../../src/gen/ping/v1/messages_pb.ts';
import { AppError } from '../../src/modules/errors.ts';
import { registerRunner } from '../support/runner-client.ts';
import { basicAuth, startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';

interface Answer {
  status: number;
  contentType: string;
  text: string;
}

async function raw(url: string, init: RequestInit = {}): Promise<Answer> {
  const res = await fetch(url, init);
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', text: await res.text() };
}

for (const dialect of testDialects()) {
  describe(`bad input found by the fuzz test [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    const apiError = (message: string) => ({ message, url: `${s.rootUrl}api/swagger` });

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      const repo = await s.api('POST', '/user/repos', { token: alice.token, body: { name: 'app', auto_init: true } });
      assert.equal(repo.status, 201, repo.text);
    });

    after(async () => {
      await s.stop();
    });

    test('a path that does not percent-decode to UTF-8 is a 400 in the API error shape', async () => {
      for (const path of [
        '/orgs/acme/hooks/%FF%FE',
        '/repos/alice/%C0%AE%C0%AE',
        '/orgs/%zz',
        '/user/actions/variables/%ED%A0%80',
      ]) {
        const res = await s.api('GET', path, { token: alice.token });
        assert.equal(res.status, 400, path);
        assert.deepEqual(
          res.json,
          apiError('the URL path is not valid: a %-escape is malformed or does not decode to UTF-8'),
          path,
        );
      }
    });

    test('a path segment over 500 characters is a 414 in the API error shape', async () => {
      const res = await s.api('GET', `/repos/alice/${'x'.repeat(501)}`, { token: alice.token });
      assert.equal(res.status, 414);
      assert.deepEqual(res.json, apiError('a path segment is longer than 500 characters'));
      const fits = await s.api('GET', `/repos/alice/${'x'.repeat(500)}`, { token: alice.token });
      assert.equal(fits.status, 404);
    });

    test('a JSON body nested far deeper than the call stack is read, not a 500', async () => {
      // Both just under the 1 MiB body limit.
      const arrays = await s.api('POST', '/orgs', {
        token: alice.token,
        rawBody: `${'['.repeat(500_000)}${']'.repeat(500_000)}`,
        headers: { 'content-type': 'application/json' },
      });
      assert.equal(arrays.status, 422, arrays.text);
      const objects = await s.api('POST', '/orgs', {
        token: alice.token,
        rawBody: `${'{"a":'.repeat(150_000)}1${'}'.repeat(150_000)}`,
        headers: { 'content-type': 'application/json' },
      });
      assert.deepEqual([objects.status, objects.json], [422, apiError('[Username]: Required')]);
      // The walk that refuses U+0000 still looks everywhere, at any depth.
      const nul = await s.api('POST', '/orgs', {
        token: alice.token,
        rawBody: `{"username":"deep","description_list":${'['.repeat(1000)}"a\\u0000b"${']'.repeat(1000)}}`,
        headers: { 'content-type': 'application/json' },
      });
      assert.deepEqual([nul.status, nul.json], [422, apiError('[DescriptionList]: must not contain NUL characters')]);
    });

    test('U+0000 in a query value or a form field is refused up front (PostgreSQL cannot take it)', async () => {
      for (const query of ['sudo=%00', 'ref=a%00b', 'event=push&event=%00', 'labels=x%00']) {
        const res = await s.api('GET', `/repos/alice/app/actions/runs?${query}`, { token: s.admin.token });
        const key = query.split('&').pop()?.split('=')[0] ?? '';
        assert.deepEqual(
          [res.status, res.json],
          [400, apiError(`query parameter ${key} must not contain NUL characters`)],
          query,
        );
      }
      const form = await s.api('POST', '/orgs', {
        token: alice.token,
        rawBody: 'username=nul%00org',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
      assert.deepEqual([form.status, form.json], [422, apiError('[Username]: must not contain NUL characters')]);
    });

    test('an id in a body beyond what JavaScript holds exactly is a 422, not a database overflow', async () => {
      for (const sourceId of ['1e308', '9223372036854775808', '-9007199254740993']) {
        const res = await s.api('POST', '/admin/users', {
          token: s.admin.token,
          rawBody: `{"username":"src${sourceId.length}","email":"src@example.com","password":"long-enough-1","source_id":${sourceId}}`,
          headers: { 'content-type': 'application/json' },
        });
        assert.equal(res.status, 422, `${sourceId}: ${res.text}`);
        assert.match((res.json as { message: string }).message, /^\[SourceID\]: must be [<>]= -?9007199254740991$/);
      }
      const fits = await s.api('POST', '/admin/users', {
        token: s.admin.token,
        body: { username: 'srcok', email: 'srcok@example.com', password: 'long-enough-1', source_id: 9007199254740991 },
      });
      assert.equal(fits.status, 201, fits.text);
    });

    test('a token name too long for the index on (user, name) is a 422, not a database error', async () => {
      const auth = basicAuth('alice', alice.password);
      // Random text does not compress: PostgreSQL's btree refuses entries over ~2.7 KB.
      const long = randomBytes(3000).toString('hex');
      const res = await s.api('POST', '/users/alice/tokens', {
        authorization: auth,
        body: { name: long, scopes: ['all'] },
      });
      assert.deepEqual([res.status, res.json], [422, apiError('[Name]: MaxSize')]);
      const fits = await s.api('POST', '/users/alice/tokens', {
        authorization: auth,
        body: { name: long.slice(0, 255), scopes: ['all'] },
      });
      assert.equal(fits.status, 201, fits.text);
    });

    test('an edit of a repository deleted since the request loaded it is a 404, not a 500', async () => {
      // The fuzz test's PATCH and DELETE of one repository in the same batch: the DELETE
      // committed between the PATCH's lookup and its update.
      const created = await s.api('POST', '/user/repos', {
        token: alice.token,
        body: { name: 'raced', auto_init: true },
      });
      assert.equal(created.status, 201, created.text);
      const loaded = await s.server.deps.services.repos.find(alice.user, 'raced');
      assert.ok(loaded);
      assert.equal((await s.api('DELETE', '/repos/alice/raced', { token: alice.token })).status, 204);
      for (const input of [{ description: 'late' }, { name: 'raced-renamed' }, { defaultBranch: 'other' }]) {
        await assert.rejects(
          s.server.deps.services.repos.edit(loaded, alice.user, input),
          (error: unknown) => error instanceof AppError && error.kind === 'not_found',
        );
      }
      assert.equal((await s.api('GET', '/repos/alice/raced-renamed', { token: alice.token })).status, 404);
    });

    test('git: a request git cannot read is a 400 that says why', async () => {
      const auth = { authorization: `token ${alice.token}` };
      const upload = await raw(`${s.url}/alice/app.git/git-upload-pack`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/x-git-upload-pack-request' },
        body: 'zzzz',
      });
      assert.deepEqual(
        [upload.status, upload.text],
        [400, 'git could not read the request: fatal: protocol error: bad line length character: zzzz\n'],
      );
      const receive = await raw(`${s.url}/alice/app.git/git-receive-pack`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/x-git-receive-pack-request' },
        body: '0009done\n',
      });
      assert.deepEqual(
        [receive.status, receive.text],
        [400, "git could not read the request: fatal: protocol error: expected old/new/ref, got 'done'\n"],
      );
      for (const [body, why] of [
        [Buffer.from('#f\xf5('), 'incorrect header check'],
        [gzipSync('0032want 0000000000000000000000000000000000000000\n0000').subarray(0, 20), 'unexpected end of file'],
      ] as const) {
        const gzip = await raw(`${s.url}/alice/app.git/git-upload-pack`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/x-git-upload-pack-request', 'content-encoding': 'gzip' },
          body,
        });
        assert.deepEqual(
          [gzip.status, gzip.text],
          [400, `git could not read the request: the body is not valid gzip (${why})\n`],
        );
      }
      // An empty request is no error: git answers nothing, as it does to any client.
      const empty = await raw(`${s.url}/alice/app.git/git-upload-pack`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/x-git-upload-pack-request' },
        body: '0000',
      });
      assert.equal(empty.status, 200);
    });

    test('git: an owner or repository name with U+0000 is not found, not a database error', async () => {
      const auth = { authorization: `token ${alice.token}` };
      for (const path of [
        '/%00/app.git/info/refs?service=git-upload-pack',
        '/alice/a%00.git/info/refs?service=git-upload-pack',
      ]) {
        assert.equal((await raw(`${s.url}${path}`, { headers: auth })).status, 404, path);
        assert.equal((await raw(`${s.url}${path}`)).status, 401, `${path} anonymous`);
      }
      const push = await raw(`${s.url}/%00/app.git/git-receive-pack`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/x-git-receive-pack-request' },
        body: '0000',
      });
      assert.equal(push.status, 404);
    });

    test('git: a body of another content type is a 415, not a 500', async () => {
      const res = await raw(`${s.url}/alice/app.git/git-upload-pack`, {
        method: 'POST',
        headers: { authorization: `token ${alice.token}`, 'content-type': 'application/vnd.api+json' },
        body: '{"a":1}',
      });
      assert.deepEqual([res.status, res.contentType], [415, 'text/plain; charset=utf-8']);
      assert.match(res.text, /unsupported content type/);
    });

    test('runner protocol: U+0000 in a name, label, version or handle is invalid_argument, not a database error', async () => {
      const registration = await s.api('GET', '/repos/alice/app/actions/runners/registration-token', {
        token: alice.token,
      });
      const token = (registration.json as { token: string }).token;
      const runner = await registerRunner(s.url, token, { labels: ['nul'] });
      const refusedWith = async (call: Promise<unknown>, message: string) => {
        await assert.rejects(call, (error: unknown) => {
          assert.ok(error instanceof ConnectError, String(error));
          assert.deepEqual([error.code, error.rawMessage], [Code.InvalidArgument, message]);
          return true;
        });
      };
      await refusedWith(
        runner.runner.register({ name: 'a\u0000b', token, version: 'v1', labels: ['x'] }),
        'name must not contain NUL characters',
      );
      await refusedWith(
        runner.runner.register({ name: 'ok', token, version: 'v1\u0000', labels: ['x'] }),
        'version must not contain NUL characters',
      );
      await refusedWith(
        runner.runner.declare({ version: 'v1', labels: ['nul', 'x\u0000'] }),
        'labels must not contain NUL characters',
      );
      await refusedWith(
        runner.runner.fetchSingleTask({ tasksVersion: 0n, handle: 'h\u0000' }),
        'handle must not contain NUL characters',
      );
      // Log lines may hold any text, U+0000 included; Ping echoes whatever it gets.
      assert.equal((await runner.ping.ping({ data: 'a\u0000b' })).data, 'Hello, a\u0000b!');
      const declared = await runner.runner.declare({ version: 'v1', labels: ['nul'] });
      assert.deepEqual(declared.runner?.labels, ['nul']);
    });

    test('runner protocol: a second fetch with a request key still being served is aborted (409), not internal (500)', async () => {
      const registration = await s.api('GET', '/repos/alice/app/actions/runners/registration-token', {
        token: alice.token,
      });
      const runner = await registerRunner(s.url, (registration.json as { token: string }).token, {
        labels: ['busy-key'],
      });
      const fetchTask = () =>
        raw(`${s.url}/api/actions/runner.v1.RunnerService/FetchTask`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'connect-protocol-version': '1',
            'x-runner-uuid': runner.credentials?.uuid ?? '',
            'x-runner-token': runner.credentials?.token ?? '',
            'x-runner-request-key': 'one-key',
          },
          body: '{"tasksVersion":"0"}',
        });
      // No job for this runner: whichever call comes first waits out its long poll (3 s) while the other arrives.
      const answers = await Promise.all([fetchTask(), fetchTask()]);
      const refused = answers.filter((a) => a.status === 409);
      assert.equal(refused.length, 1, JSON.stringify(answers));
      assert.deepEqual(JSON.parse(refused[0]?.text ?? ''), {
        code: 'aborted',
        message: 'request key is currently locked; retry soon',
      });
      assert.deepEqual(answers.map((a) => a.status).sort(), [200, 409]);
    });

    test('runner protocol: undecodable bodies are invalid_argument (400), not internal (500)', async () => {
      const ping = `${s.url}/api/actions/ping.v1.PingService/Ping`;
      const call = (body: Uint8Array | string, headers: Record<string, string>) =>
        raw(ping, { method: 'POST', headers: { 'connect-protocol-version': '1', ...headers }, body });
      for (const [body, headers] of [
        [new Uint8Array([0xcc, 0xd1, 0x01, 0xe6]), { 'content-type': 'application/proto' }],
        [new Uint8Array([0x0a, 0x05, 0x61]), { 'content-type': 'application/proto' }],
        [new Uint8Array([0xc7]), { 'content-type': 'application/proto', 'content-encoding': 'gzip' }],
        [
          gzipSync(Buffer.from('{"data":"x"}')).subarray(0, 12),
          { 'content-type': 'application/json', 'content-encoding': 'gzip' },
        ],
      ] as const) {
        const res = await call(body, headers);
        assert.equal(res.status, 400, res.text);
        assert.equal((JSON.parse(res.text) as { code: string }).code, 'invalid_argument', res.text);
      }
      const unknownType = await call('{"data":"x"}', { 'content-type': 'text/json' });
      assert.equal(unknownType.status, 415);
      assert.equal((JSON.parse(unknownType.text) as { code: string }).code, 'invalid_argument', unknownType.text);
      // Well-formed requests, compressed or not, still work.
      const message = toBinary(PingRequestSchema, create(PingRequestSchema, { data: 'x' }));
      for (const [body, headers] of [
        [message, { 'content-type': 'application/proto' }],
        [gzipSync(message), { 'content-type': 'application/proto', 'content-encoding': 'gzip' }],
        [gzipSync(Buffer.from('{"data":"x"}')), { 'content-type': 'application/json', 'content-encoding': 'gzip' }],
      ] as const) {
        const res = await call(body, headers);
        assert.equal(res.status, 200, res.text);
      }
      const json = await call('{"data":"x"}', { 'content-type': 'application/json' });
      assert.deepEqual(JSON.parse(json.text), { data: 'Hello, x!' });
    });
  });
}
