// The limits a client can run into, as it sees them, on every database:
// request body (GANTRY_BODY_LIMIT → 413) and head (GANTRY_HEADER_LIMIT →
// 431) sizes, per-IP and per-token rate limits (429 + Retry-After, in the
// shape each protocol understands), git push size (refused, nothing written)
// and task log size (cut with a notice, the runner's lines still acked).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { createCurrentUserRepo, dispatchWorkflow, repoGetRunnerRegistrationToken } from '@llamaduck/forgejo-ts';
import { loadConfig } from '../../src/config.ts';
import { startServer } from '../../src/main.ts';
import type { RunningServer } from '../../src/main.ts';
import type { Clock } from '../../src/modules/clock.ts';
import { freePort } from '../support/free-port.ts';
import { createScratchPgDatabase } from '../support/pg-database.ts';
import { createRunnerClient, decodeTask, registerRunner } from '../support/runner-client.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { TEST_PASSWORD_HASH_COST, basicAuth, startTestServer, testDialects } from '../support/server.ts';
import type { TestDialect, TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

interface OffsetClock extends Clock {
  advance(ms: number): void;
}

/** Real time plus an offset the test moves forward: everything keeps working, the rate limits see time pass. */
function offsetClock(): OffsetClock {
  let offset = 0;
  return {
    nowMs: () => Date.now() + offset,
    nowSec: () => Math.floor((Date.now() + offset) / 1000),
    advance: (ms) => {
      offset += ms;
    },
  };
}

interface ClockedServer {
  url: string;
  rootUrl: string;
  server: RunningServer;
  /** A user's access token (scope all). */
  tokenOf(name: string): Promise<string>;
  stop(): Promise<void>;
}

/** Like startTestServer, with an injected clock (startTestServer has no such option). */
async function startClockedServer(
  dialect: TestDialect,
  env: Record<string, string>,
  clock: Clock,
): Promise<ClockedServer> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-limits-'));
  const scratch = dialect === 'postgres' ? await createScratchPgDatabase(process.env.GANTRY_TEST_PG_URL ?? '') : null;
  const port = await freePort();
  const config = loadConfig({
    GANTRY_DATA_DIR: dataDir,
    GANTRY_HTTP_ADDR: '127.0.0.1',
    GANTRY_HTTP_PORT: String(port),
    GANTRY_ROOT_URL: `http://127.0.0.1:${port}/`,
    GANTRY_LOG_LEVEL: process.env.GANTRY_TEST_LOG_LEVEL ?? 'silent',
    GANTRY_PASSWORD_HASH_COST: TEST_PASSWORD_HASH_COST,
    ...(scratch ? { GANTRY_DATABASE_URL: scratch.url } : {}),
    ...env,
  });
  const server = await startServer(config, { clock });
  const services = server.deps.services;
  return {
    url: server.url,
    rootUrl: config.rootUrl,
    server,
    async tokenOf(name) {
      const user =
        (await services.accounts.findByName(name)) ??
        (await services.accounts.createUser({
          username: name,
          email: `${name}@example.com`,
          password: `pw-${name}-12345`,
          isAdmin: false,
          mustChangePassword: false,
        }));
      return (await services.accessTokens.create(user, `t-${Math.random().toString(36).slice(2)}`, ['all'])).secret;
    },
    async stop() {
      await server.stop();
      await scratch?.drop();
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}

interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

async function get(url: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(url, { headers });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** One raw request with node:http (fetch cannot send an oversized head and read the answer reliably). */
function rawRequest(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
  });
}

async function expectResourceExhausted(call: Promise<unknown>, setting: string): Promise<void> {
  await assert.rejects(call, (error: unknown) => {
    assert.ok(error instanceof ConnectError, String(error));
    assert.equal(error.code, Code.ResourceExhausted, error.message);
    assert.match(error.rawMessage, new RegExp(setting));
    return true;
  });
}

function assertRateLimited(answer: Answer, rootUrl: string, setting: string, limit: number): number {
  assert.equal(answer.status, 429, answer.text);
  const retryAfter = Number(answer.headers.get('retry-after'));
  assert.ok(
    Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= Math.ceil(60 / limit),
    `Retry-After ${answer.headers.get('retry-after')}`,
  );
  const body = JSON.parse(answer.text) as { message: string; url: string };
  assert.deepEqual(Object.keys(body).sort(), ['message', 'url']);
  assert.equal(body.url, `${rootUrl}api/swagger`);
  assert.match(
    body.message,
    new RegExp(`at most ${limit} requests per minute .*\\(${setting}\\); retry in ${retryAfter} s`),
  );
  assert.equal(answer.headers.get('x-ratelimit-limit'), String(limit));
  assert.equal(answer.headers.get('x-ratelimit-remaining'), '0');
  return retryAfter;
}

const PER_IP = 20;
const PER_TOKEN = 3;

for (const dialect of testDialects()) {
  describe(`rate limits [${dialect}]`, () => {
    const clock = offsetClock();
    let s: ClockedServer;
    let api: string;

    before(async () => {
      s = await startClockedServer(
        dialect,
        { GANTRY_RATE_LIMIT_PER_IP: String(PER_IP), GANTRY_RATE_LIMIT_PER_TOKEN: String(PER_TOKEN) },
        clock,
      );
      api = `${s.url}/api/v1`;
    });
    after(() => s.stop());

    test(`per IP: ${PER_IP} requests a minute, then 429 with Retry-After on the API, git and the runner protocol; healthz exempt; recovery`, async () => {
      clock.advance(120_000);
      for (let i = 0; i < PER_IP; i += 1) {
        const ok = await get(`${api}/version`);
        assert.equal(ok.status, 200, `request ${i + 1}: ${ok.text}`);
        assert.equal(ok.headers.get('x-ratelimit-limit'), String(PER_IP));
        assert.equal(ok.headers.get('x-ratelimit-remaining'), String(PER_IP - 1 - i));
        const reset = Number(ok.headers.get('x-ratelimit-reset'));
        assert.ok(
          reset * 1000 >= clock.nowMs() && reset * 1000 <= clock.nowMs() + 61_000,
          `X-RateLimit-Reset ${reset} is Unix seconds within the window`,
        );
      }
      const refused = await get(`${api}/version`);
      const retryAfter = assertRateLimited(refused, s.rootUrl, 'GANTRY_RATE_LIMIT_PER_IP', PER_IP);
      // X-Forwarded-For is not believed without GANTRY_TRUSTED_PROXIES.
      assert.equal((await get(`${api}/version`, { 'x-forwarded-for': '198.51.100.7' })).status, 429);
      assert.equal((await get(`${s.url}/api/healthz`)).status, 200, 'health checks are never limited');

      const git = await get(`${s.url}/someone/repo.git/info/refs?service=git-upload-pack`);
      assert.equal(git.status, 429);
      assert.match(git.headers.get('content-type') ?? '', /^text\/plain/);
      assert.match(git.text, /^rate limit exceeded: .*GANTRY_RATE_LIMIT_PER_IP.*\n$/);
      await expectResourceExhausted(createRunnerClient(s.url).ping.ping({ data: 'x' }), 'GANTRY_RATE_LIMIT_PER_IP');

      // Waiting as told allows one more request; a whole minute, the whole budget.
      clock.advance(retryAfter * 1000);
      assert.equal((await get(`${api}/version`)).status, 200);
      assert.equal((await get(`${api}/version`)).status, 429);
      clock.advance(60_000);
      for (let i = 0; i < PER_IP; i += 1)
        assert.equal((await get(`${api}/version`)).status, 200, `after the window, request ${i + 1}`);
    });

    test(`per token: ${PER_TOKEN} requests a minute for each token, however it is sent; each token and runner has its own budget`, async () => {
      clock.advance(120_000);
      const alice = await s.tokenOf('alice');
      const bob = await s.tokenOf('bob');
      for (let i = 0; i < PER_TOKEN; i += 1) {
        const ok = await get(`${api}/user`, { authorization: `token ${alice}` });
        assert.equal(ok.status, 200, ok.text);
        assert.equal(ok.headers.get('x-ratelimit-limit'), String(PER_TOKEN), 'the closer limit is the one reported');
      }
      assertRateLimited(
        await get(`${api}/user`, { authorization: `Bearer ${alice}` }),
        s.rootUrl,
        'GANTRY_RATE_LIMIT_PER_TOKEN',
        PER_TOKEN,
      );
      // The same token as a basic-auth password, under any user name, is the same budget.
      assert.equal((await get(`${api}/user`, { authorization: basicAuth('anyone', alice) })).status, 429);
      assert.equal((await get(`${api}/user`, { authorization: basicAuth(alice, 'x-oauth-basic') })).status, 429);

      for (let i = 0; i < PER_TOKEN; i += 1)
        assert.equal(
          (await get(`${api}/user`, { authorization: `token ${bob}` })).status,
          200,
          'another token is not affected',
        );
      assert.equal((await get(`${api}/user`, { authorization: `token ${bob}` })).status, 429);
      assert.equal((await get(`${api}/version`)).status, 200, 'anonymous requests only count per IP');

      // Runners: the budget follows x-runner-token.
      clock.advance(120_000);
      const owner = await s.tokenOf('carol');
      const created = await fetch(`${api}/user/repos`, {
        method: 'POST',
        headers: { authorization: `token ${owner}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'ci' }),
      });
      assert.equal(created.status, 201);
      const registration = await get(`${api}/repos/carol/ci/actions/runners/registration-token`, {
        authorization: `token ${owner}`,
      });
      const token = (JSON.parse(registration.text) as { token: string }).token;
      const first = await registerRunner(s.url, token, { labels: ['limits'] });
      const second = await registerRunner(s.url, token, { labels: ['limits'] });
      for (let i = 0; i < PER_TOKEN; i += 1) await first.runner.declare({ version: 'v12.0.0', labels: ['limits'] });
      await expectResourceExhausted(
        first.runner.declare({ version: 'v12.0.0', labels: ['limits'] }),
        'GANTRY_RATE_LIMIT_PER_TOKEN',
      );
      await second.runner.declare({ version: 'v12.0.0', labels: ['limits'] });
    });
  });

  describe(`rate limits behind a trusted proxy [${dialect}]`, () => {
    const clock = offsetClock();
    let s: ClockedServer;

    before(async () => {
      s = await startClockedServer(
        dialect,
        { GANTRY_RATE_LIMIT_PER_IP: '2', GANTRY_TRUSTED_PROXIES: '127.0.0.1' },
        clock,
      );
    });
    after(() => s.stop());

    test('the client X-Forwarded-For names is counted, not the proxy', async () => {
      const version = `${s.url}/api/v1/version`;
      const from = (ip: string) => get(version, { 'x-forwarded-for': `${ip}, 127.0.0.1` });
      assert.equal((await from('203.0.113.1')).status, 200);
      assert.equal((await from('203.0.113.1')).status, 200);
      assert.equal((await from('203.0.113.1')).status, 429);
      assert.equal((await from('203.0.113.2')).status, 200, 'another client behind the same proxy');
      assert.equal((await from('2001:db8:1:2::1')).status, 200);
      assert.equal((await from('2001:db8:1:2::2')).status, 200);
      assert.equal((await from('2001:db8:1:2::3')).status, 429, 'IPv6 clients count by /64');
    });
  });

  describe(`size limits [${dialect}]`, () => {
    const BODY_LIMIT = 4096;
    const HEADER_LIMIT = 4096;
    const PUSH_LIMIT = 256 * 1024;
    const LOG_LIMIT = 4096;
    let s: TestServer;
    let alice: TestUser;

    before(async () => {
      s = await startTestServer(dialect, {
        GANTRY_BODY_LIMIT: String(BODY_LIMIT),
        GANTRY_HEADER_LIMIT: String(HEADER_LIMIT),
        GANTRY_GIT_MAX_PUSH_SIZE: String(PUSH_LIMIT),
        GANTRY_ACTIONS_LOG_MAX_SIZE: String(LOG_LIMIT),
      });
      alice = await s.createUser('alice');
    });
    after(() => s.stop());

    test('a body over GANTRY_BODY_LIMIT: 413 with the limit and the setting, nothing created', async () => {
      const res = await s.api('POST', '/user/repos', {
        token: alice.token,
        body: { name: 'huge', description: 'x'.repeat(BODY_LIMIT) },
      });
      assert.equal(res.status, 413, res.text);
      assert.deepEqual(res.json, {
        message: `request body is larger than ${BODY_LIMIT} bytes (GANTRY_BODY_LIMIT); send a smaller body`,
        url: `${s.rootUrl}api/swagger`,
      });
      assert.equal((await s.api('GET', '/repos/alice/huge', { token: alice.token })).status, 404);
      assert.equal(
        (
          await s.api('POST', '/user/repos', {
            token: alice.token,
            body: { name: 'huge', description: 'x'.repeat(BODY_LIMIT / 2) },
          })
        ).status,
        201,
      );
    });

    test('a request head over GANTRY_HEADER_LIMIT: 431 from the HTTP parser, before any route, every time', async () => {
      // Repeated: a connection closed before the client's bytes are read resets, and the client then loses the answer.
      for (const padding of [HEADER_LIMIT, HEADER_LIMIT, 64 * 1024, 256 * 1024].flatMap((n) =>
        Array<number>(5).fill(n),
      )) {
        const big = await rawRequest(`${s.apiUrl}/version`, { 'x-padding': 'p'.repeat(padding) });
        assert.equal(big.status, 431);
        assert.deepEqual(JSON.parse(big.body), {
          error: 'Request Header Fields Too Large',
          message: 'Exceeded maximum allowed HTTP header size',
          statusCode: 431,
        });
      }
      assert.equal(
        (await rawRequest(`${s.apiUrl}/version`, { 'x-padding': 'p'.repeat(HEADER_LIMIT - 1024) })).status,
        200,
        'a head within the limit is served',
      );
    });

    describe('git push size', () => {
      let work: WorkDir;
      let gitDir: string;
      let pushed: string;

      const remoteHead = async (): Promise<string> =>
        (await work.git(['ls-remote', 'origin', 'refs/heads/main'])).stdout.split('\t')[0] ?? '';
      /** git removes its quarantine folder as it exits, a moment after the client has its answer. */
      const quarantines = async (): Promise<string[]> => {
        const deadline = Date.now() + 20_000;
        for (;;) {
          const left = (await fs.readdir(path.join(gitDir, 'objects'))).filter((name) => name.includes('incoming'));
          if (left.length === 0 || Date.now() > deadline) return left;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      };
      /** Incompressible content, so the pack is as large as the files. */
      const randomFiles = (count: number, bytes: number, prefix: string): Record<string, string> =>
        Object.fromEntries(
          Array.from({ length: count }, (_, i) => [`${prefix}/${i}.bin`, randomBytes(bytes / 2).toString('hex')]),
        );

      before(async () => {
        assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name: 'pushy' } })).status, 201);
        gitDir = s.server.deps.services.gitRepositories.gitDir({ name: 'pushy', ownerName: 'alice' });
        work = await createWorkDir(remoteUrl(s.url, 'alice', 'pushy', { user: 'alice', password: alice.token }));
        pushed = await work.commit({ 'README.md': 'hello\n' }, 'first');
        const first = await work.push('main');
        assert.equal(first.code, 0, first.stderr);
      });
      after(() => work.remove());

      test('a push with a Content-Length over the limit is refused before git runs: 413, ref unchanged', async () => {
        await work.commit(randomFiles(1, 600 * 1024, 'one'), 'one big file');
        const result = await work.push('main');
        assert.notEqual(result.code, 0);
        assert.match(result.stderr, /HTTP 413/);
        assert.equal(await remoteHead(), pushed);
        assert.deepEqual(await quarantines(), []);
      });

      test('a streamed push (chunked, git index-pack) is cut at the limit: 413, ref unchanged, no object kept', async () => {
        const before = (await fs.readdir(path.join(gitDir, 'objects'))).sort();
        await work.commit(randomFiles(150, 4096, 'many'), '150 files');
        // A post buffer below the pack size makes git stream the push without Content-Length.
        const result = await work.git(['-c', 'http.postBuffer=65536', 'push', '-q', 'origin', 'main'], {
          allowFailure: true,
        });
        assert.notEqual(result.code, 0);
        assert.match(result.stderr, /HTTP 413/);
        assert.equal(await remoteHead(), pushed);
        assert.deepEqual(await quarantines(), []);
        assert.deepEqual(
          (await fs.readdir(path.join(gitDir, 'objects'))).sort(),
          before,
          'no loose object or pack was added',
        );
      });

      test('the 413 says why in plain text, and a push within the limit still works', async () => {
        const res = await fetch(`${s.url}/alice/pushy.git/git-receive-pack`, {
          method: 'POST',
          headers: {
            authorization: basicAuth('alice', alice.token),
            'content-type': 'application/x-git-receive-pack-request',
          },
          body: Buffer.alloc(PUSH_LIMIT + 1),
        });
        assert.equal(res.status, 413);
        assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
        assert.equal(
          await res.text(),
          `Push refused: it is larger than ${PUSH_LIMIT} bytes (GANTRY_GIT_MAX_PUSH_SIZE); nothing was written. Push fewer commits at a time, or ask the administrator to raise the limit.\n`,
        );

        await work.git(['reset', '-q', '--hard', pushed]);
        const small = await work.commit(randomFiles(4, 4096, 'small'), 'small');
        const result = await work.push('main');
        assert.equal(result.code, 0, result.stderr);
        assert.equal(await remoteHead(), small);
      });
    });

    test("a task log over GANTRY_ACTIONS_LOG_MAX_SIZE is cut with a notice; the runner's lines are still acknowledged", async () => {
      assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name: 'logs' } })).status, 201);
      const work = await createWorkDir(remoteUrl(s.url, 'alice', 'logs', { user: 'alice', password: alice.token }));
      try {
        await work.commit(
          {
            '.forgejo/workflows/ci.yml':
              'on: workflow_dispatch\njobs:\n  chatty:\n    runs-on: limits-log\n    steps:\n      - run: yes\n',
          },
          'ci',
        );
        assert.equal((await work.push('main')).code, 0);
      } finally {
        await work.remove();
      }
      const registration = await repoGetRunnerRegistrationToken({
        client: alice.client,
        path: { owner: 'alice', repo: 'logs' },
      });
      const runner = await registerRunner(s.url, (registration.data as { token: string }).token, {
        labels: ['limits-log'],
      });
      const dispatched = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'logs', workflowfilename: 'ci.yml' },
        body: { ref: 'main', inputs: {} },
      });
      assert.equal(dispatched.status, 204, JSON.stringify(dispatched.error));
      const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(fetched.task, 'a task');
      const task = decodeTask(fetched.task as Task);

      const time = { seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 };
      const line = (i: number) => `line ${i} ${'.'.repeat(90)}`;
      const send = async (from: number, count: number, noMore = false): Promise<number> => {
        const rows = Array.from({ length: count }, (_, k) => ({ time, content: line(from + k) }));
        return Number(
          (await runner.runner.updateLog({ taskId: BigInt(task.id), index: BigInt(from), rows, noMore })).ackIndex,
        );
      };
      // ~125 bytes a line: the limit falls inside the first batch.
      assert.equal(await send(0, 60), 60, 'every row is acknowledged, stored or not');
      assert.equal(await send(60, 40), 100, 'rows after the cut are acknowledged too');
      assert.equal(await send(100, 0, true), 100);

      const lines: string[] = [];
      for await (const stored of s.server.deps.services.taskReports.readLog(task.id)) lines.push(stored);
      const notice = lines.pop() ?? '';
      assert.match(
        notice,
        new RegExp(
          `^\\S+Z Gantry: the rest of this log was dropped: a task's log is limited to ${LOG_LIMIT} bytes \\(GANTRY_ACTIONS_LOG_MAX_SIZE\\)\\.$`,
        ),
      );
      assert.ok(lines.length > 20 && lines.length < 40, `${lines.length} lines kept`);
      lines.forEach((stored, i) => assert.equal(stored.slice(stored.indexOf(' ') + 1), line(i)));
      const row = await s.server.deps.database.db
        .selectFrom('action_task')
        .select(['log_length', 'log_size', 'log_in_storage'])
        .where('id', '=', task.id)
        .executeTakeFirstOrThrow();
      assert.equal(Number(row.log_length), 100, 'the ack index the runner saw');
      assert.ok(Number(row.log_size) <= LOG_LIMIT, `${row.log_size} bytes stored`);
      assert.equal(Number(row.log_in_storage), 1, 'archived on "no more" as usual');
    });
  });
}
