// The server log at trace level, after a session that hands the server every
// kind of credential it knows (password, access tokens in each place a client
// may put them, an Actions secret, a webhook secret and authorization header,
// a runner registration token, a runner token, a task token, a git remote with
// credentials in its URL): none of them is in the log, while every request's
// line carries its request id, the one the client got back in X-Request-Id.
// A runner's FetchTask (its poll) writes no request line at all. At the
// default level (info) every other request writes one line.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { decodeTask, registerRunner } from '../support/runner-client.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { basicAuth, startTestServer, testDialects } from '../support/server.ts';
import { startWebhookReceiver } from '../support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';

const WORKFLOW = `on: push
jobs:
  build:
    runs-on: logging-test
    steps: [ { run: echo build } ]
`;

interface LogLine {
  level: number;
  msg?: string;
  reqId?: string;
  req?: { method: string; url: string };
  res?: { statusCode: number };
}

for (const dialect of testDialects()) {
  describe(`request logs [${dialect}]`, () => {
    test('carry request ids and no password, token, secret or credential of any kind', async () => {
      const logFile = path.join(os.tmpdir(), `gantry-log-${randomBytes(6).toString('hex')}.jsonl`);
      const s = await startTestServer(
        dialect,
        { GANTRY_LOG_LEVEL: 'trace', GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' },
        { logFile },
      );
      const receiver = await startWebhookReceiver();
      const secrets = new Map<string, string>();
      const keep = (what: string, value: string): string => {
        assert.ok(value.length >= 8, `${what} is long enough to search for`);
        secrets.set(what, value);
        return value;
      };
      const returnedIds: string[] = [];
      const call = async (method: string, apiPath: string, options: Parameters<typeof s.api>[2] = {}) => {
        const res = await s.api(method, apiPath, options);
        const id = res.headers.get('x-request-id');
        assert.ok(id, `${method} ${apiPath} answers X-Request-Id`);
        returnedIds.push(id);
        return res;
      };
      try {
        const alice = await s.createUser('alice');
        keep('password', alice.password);
        keep('access token', alice.token);
        const scoped = keep('scoped token', await s.tokenFor(alice, ['write:repository', 'read:user']));

        // Every place a client may put a token or a password.
        assert.equal((await call('GET', '/user', { authorization: basicAuth('alice', alice.password) })).status, 200);
        assert.equal((await call('GET', '/user', { authorization: basicAuth('alice', alice.token) })).status, 200);
        assert.equal((await call('GET', '/user', { authorization: `token ${alice.token}` })).status, 200);
        assert.equal((await call('GET', '/user', { authorization: `Bearer ${scoped}` })).status, 200);
        assert.equal(
          (await call('GET', '/user', { authorization: 'token wrong-token-in-header-0123456789' })).status,
          401,
        );
        keep('wrong token', 'wrong-token-in-header-0123456789');
        for (const parameter of ['token', 'access_token', 'Access_Token']) {
          await call('GET', `/user?${parameter}=${alice.token}&page=1`);
          await call('GET', `/user?page=1&${parameter}=${encodeURIComponent(scoped)}`);
        }
        await call('GET', `/user?%74oken=${alice.token}`);

        // Secrets set through the API.
        assert.equal(
          (
            await call('POST', '/user/repos', {
              token: alice.token,
              body: { name: 'app', auto_init: true, default_branch: 'main' },
            })
          ).status,
          201,
        );
        const secretValue = keep('actions secret', `secret-value-${randomBytes(8).toString('hex')}`);
        assert.equal(
          (
            await call('PUT', '/repos/alice/app/actions/secrets/DEPLOY_KEY', {
              token: alice.token,
              body: { data: secretValue },
            })
          ).status,
          201,
        );
        assert.equal((await call('POST', '/orgs', { token: alice.token, body: { username: 'acme' } })).status, 201);
        const hookSecret = keep('webhook secret', `hook-secret-${randomBytes(8).toString('hex')}`);
        const hookAuthorization = keep(
          'webhook authorization header',
          `Bearer hook-auth-${randomBytes(8).toString('hex')}`,
        );
        const hook = await call('POST', '/orgs/acme/hooks', {
          token: alice.token,
          body: {
            type: 'forgejo',
            config: { url: `${receiver.url}/hook`, content_type: 'json', secret: hookSecret },
            authorization_header: hookAuthorization,
            events: ['push'],
            active: true,
          },
        });
        assert.equal(hook.status, 201, hook.text);
        const hookId = (hook.json as { id: number }).id;
        assert.equal(
          (
            await call('PATCH', `/orgs/acme/hooks/${hookId}`, {
              token: alice.token,
              body: { config: { secret: `${hookSecret}-2` }, authorization_header: hookAuthorization },
            })
          ).status,
          200,
        );
        assert.equal((await call('POST', `/orgs/acme/hooks/${hookId}/pings`, { token: alice.token })).status, 202);
        // Delivered: the worker used the secret (signature) and the authorization header.
        await receiver.waitFor((r) => r.length >= 1, 60_000);
        assert.equal(receiver.received[0]?.headers.authorization, hookAuthorization);

        // git over HTTP with credentials in the remote URL: the password, then a token.
        for (const password of [alice.password, alice.token]) {
          const work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password }));
          try {
            await work.git(['fetch', '-q', 'origin', 'main']);
            await work.git(['reset', '-q', '--hard', 'origin/main']);
            if (password === alice.token) {
              await work.commit({ '.forgejo/workflows/ci.yml': WORKFLOW }, 'Add CI');
              const pushed = await work.push('main');
              assert.equal(pushed.code, 0, pushed.stderr);
            }
          } finally {
            await work.remove();
          }
        }

        // A runner: registration token, runner token, and the task token it is handed.
        const registration = await call('GET', '/repos/alice/app/actions/runners/registration-token', {
          token: alice.token,
        });
        assert.equal(registration.status, 200);
        const registrationToken = keep('registration token', (registration.json as { token: string }).token);
        const runner = await registerRunner(s.url, registrationToken, { name: 'logger', labels: ['logging-test'] });
        keep('runner token', runner.credentials?.token ?? '');
        await runner.runner.declare({ version: 'v12.0.0-test', labels: ['logging-test'] });
        const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
        assert.ok(fetched.task, 'the pushed workflow gave the runner a task');
        const task = decodeTask(fetched.task as Task);
        assert.equal(task.secrets.DEPLOY_KEY, secretValue);
        const taskToken = keep('task token', String(task.context.token));
        assert.equal((await call('GET', '/repos/alice/app', { authorization: `token ${taskToken}` })).status, 200);

        // Request ids: a plausible one is kept, junk is replaced.
        const kept = await fetch(`${s.apiUrl}/version`, { headers: { 'x-request-id': 'client-chosen.id-42' } });
        assert.equal(kept.headers.get('x-request-id'), 'client-chosen.id-42');
        const junk = `junk ${'x'.repeat(300)} "quoted"`;
        const replaced = await fetch(`${s.apiUrl}/version`, { headers: { 'x-request-id': junk } });
        const replacedId = replaced.headers.get('x-request-id') ?? '';
        assert.match(replacedId, /^[0-9a-f-]{36}$/);
        returnedIds.push('client-chosen.id-42', replacedId);
        const notFound = await fetch(`${s.url}/no/such/route`);
        assert.equal(notFound.status, 404);
        returnedIds.push(notFound.headers.get('x-request-id') ?? 'missing');

        await s.server.stop();
        const log = readFileSync(logFile, 'utf8');
        for (const [what, value] of secrets) {
          assert.ok(!log.includes(value), `the ${what} is not in the log`);
          assert.ok(!log.includes(encodeURIComponent(value)), `the ${what} is not in the log, URL-encoded`);
        }
        assert.ok(!log.includes('xxxxxxxxxx'), 'a junk request id is not logged');

        const lines = log
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as LogLine);
        const requestLines = lines.filter((l) => l.req !== undefined || l.res !== undefined);
        // The log did see the session: API, git, and runner requests, the query tokens redacted.
        const urls = requestLines.map((l) => l.req?.url ?? '');
        assert.ok(urls.includes('/api/v1/user?token=[redacted]&page=1'));
        assert.ok(urls.includes('/api/v1/user?page=1&access_token=[redacted]'));
        assert.ok(urls.some((u) => u.startsWith('/alice/app.git/info/refs')));
        assert.ok(urls.includes('/api/actions/runner.v1.RunnerService/Register'));
        assert.ok(urls.includes('/api/actions/runner.v1.RunnerService/Declare'));
        // A runner's poll, every few seconds per runner: no request lines, whatever the level.
        assert.ok(!urls.includes('/api/actions/runner.v1.RunnerService/FetchTask'), 'FetchTask writes no request line');
        for (const line of requestLines)
          assert.ok(line.reqId, `a request line without its request id: ${JSON.stringify(line)}`);
        const loggedIds = new Set(requestLines.map((l) => l.reqId));
        for (const id of returnedIds) assert.ok(loggedIds.has(id), `request id ${id} is in the log`);
      } finally {
        await receiver.close();
        await s.stop();
        await fs.rm(logFile, { force: true });
      }
    });

    test('at the default level a request writes one line: method, URL, status and time', async () => {
      const logFile = path.join(os.tmpdir(), `gantry-log-${randomBytes(6).toString('hex')}.jsonl`);
      const s = await startTestServer(dialect, { GANTRY_LOG_LEVEL: 'info' }, { logFile });
      try {
        const answered = await fetch(`${s.apiUrl}/version?token=abcdefgh12345678`, {
          headers: { 'x-request-id': 'one-line-ok' },
        });
        assert.equal(answered.status, 200);
        const missing = await fetch(`${s.apiUrl}/repos/nobody/nothing`, {
          headers: { 'x-request-id': 'one-line-404' },
        });
        assert.equal(missing.status, 404);
        await s.server.stop();
        const lines = readFileSync(logFile, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as LogLine & { responseTime?: number });
        for (const [id, url, status] of [
          ['one-line-ok', '/api/v1/version?token=[redacted]', 200],
          ['one-line-404', '/api/v1/repos/nobody/nothing', 404],
        ] as const) {
          const mine = lines.filter((l) => l.reqId === id);
          assert.equal(mine.length, 1, `one line for ${id}: ${JSON.stringify(mine)}`);
          const [line] = mine as [(typeof mine)[number]];
          assert.equal(line.level, 30);
          assert.equal(line.req?.method, 'GET');
          assert.equal(line.req?.url, url);
          assert.equal(line.res?.statusCode, status);
          assert.equal(typeof line.responseTime, 'number');
        }
      } finally {
        await s.stop();
        await fs.rm(logFile, { force: true });
      }
    });
  });
}
