// Slow and greedy clients, as a client sees them, on every database: an API
// request whose body trickles in gets 408 and a closed connection within
// GANTRY_HTTP_REQUEST_TIMEOUT (and is not handled), a head sent one header at
// a time is closed by GANTRY_HTTP_HEADERS_TIMEOUT, a stalled git push by
// GANTRY_HTTP_TRANSFER_IDLE_TIMEOUT — while a git push slower than the API
// limit and a runner's long poll longer than it still work — and connections
// beyond GANTRY_HTTP_MAX_CONNECTIONS are closed unanswered. Limits are set
// to seconds here so the tests take seconds.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { createCurrentUserRepo, repoGetRunnerRegistrationToken } from '@llamaduck/forgejo-ts';
import { registerRunner } from '../support/runner-client.ts';
import { basicAuth, startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';

const REQUEST_TIMEOUT_S = 2;
const HEADERS_TIMEOUT_S = 2;
const TRANSFER_IDLE_TIMEOUT_S = 5;
const KEEPALIVE_TIMEOUT_S = 7;

interface RawConnection {
  socket: net.Socket;
  /** Everything the server sent so far. */
  received(): string;
  /** Resolves when the server sent something. */
  firstData: Promise<void>;
  /** Milliseconds from connecting until the connection closed, or null if it is still open after `capMs`. */
  closedWithin(capMs: number): Promise<number | null>;
}

/** A bare TCP connection to the server, for what no HTTP client will do (send half a request, then nothing). */
async function connect(baseUrl: string): Promise<RawConnection> {
  const { hostname, port } = new URL(baseUrl);
  const socket = net.connect(Number(port), hostname);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const opened = performance.now();
  let data = '';
  let onFirst: () => void = () => {};
  const firstData = new Promise<void>((resolve) => (onFirst = resolve));
  socket.on('data', (chunk: Buffer) => {
    data += chunk.toString('utf8');
    onFirst();
  });
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now() - opened)));
  return {
    socket,
    received: () => data,
    firstData,
    closedWithin: async (capMs) => {
      let timer: NodeJS.Timeout | undefined;
      const result = await Promise.race([
        closed,
        new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), capMs))),
      ]);
      clearTimeout(timer);
      return result;
    },
  };
}

/** A TCP proxy that forwards what the client sends in `sliceBytes` pieces every `everyMs` (a slow uplink); answers go back at full speed. */
async function startThrottlingProxy(
  targetUrl: string,
  sliceBytes: number,
  everyMs: number,
): Promise<{ url: string; close(): Promise<void> }> {
  const target = new URL(targetUrl);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    let pending = Buffer.alloc(0);
    const timer = setInterval(() => {
      if (pending.length === 0) return;
      upstream.write(pending.subarray(0, sliceBytes));
      pending = pending.subarray(sliceBytes);
    }, everyMs);
    client.on('data', (chunk: Buffer) => (pending = Buffer.concat([pending, chunk])));
    upstream.pipe(client);
    const done = () => {
      clearInterval(timer);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', done).on('error', done);
    upstream.on('close', done).on('error', done);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

for (const dialect of testDialects()) {
  describe(`slow clients [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;

    before(async () => {
      s = await startTestServer(dialect, {
        GANTRY_HTTP_REQUEST_TIMEOUT: String(REQUEST_TIMEOUT_S),
        GANTRY_HTTP_HEADERS_TIMEOUT: String(HEADERS_TIMEOUT_S),
        GANTRY_HTTP_TRANSFER_IDLE_TIMEOUT: String(TRANSFER_IDLE_TIMEOUT_S),
        GANTRY_HTTP_KEEPALIVE_TIMEOUT: String(KEEPALIVE_TIMEOUT_S),
      });
      alice = await s.createUser('alice');
      assert.equal(
        (
          await createCurrentUserRepo({
            client: alice.client,
            body: { name: 'app', auto_init: true, default_branch: 'main' },
          })
        ).status,
        201,
      );
    });
    after(async () => {
      await s?.stop();
    });

    test('an API POST that sent its headers and one body byte gets 408 within GANTRY_HTTP_REQUEST_TIMEOUT and is closed; finishing the body afterwards creates nothing', async () => {
      const body = JSON.stringify({ username: 'slowpoke' });
      const conn = await connect(s.url);
      conn.socket.write(
        `POST /api/v1/orgs HTTP/1.1\r\nHost: gantry\r\nAuthorization: token ${alice.token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 1)}`,
      );
      await Promise.race([conn.firstData, new Promise((resolve) => setTimeout(resolve, 8_000))]);
      // Too late: the rest of the body arrives right after the 408.
      if (!conn.socket.destroyed) conn.socket.write(body.slice(1));
      const closedAfter = await conn.closedWithin(10_000);
      assert.ok(closedAfter !== null, `still open after 10 s; received: ${conn.received()}`);
      assert.ok(
        closedAfter >= REQUEST_TIMEOUT_S * 1000 - 100 && closedAfter < REQUEST_TIMEOUT_S * 1000 + 4_000,
        `closed after ${Math.round(closedAfter)} ms`,
      );
      assert.match(conn.received(), /^HTTP\/1\.1 408 Request Timeout\r\n/);
      assert.match(conn.received(), /Connection: close/i);
      const answer = JSON.parse(conn.received().slice(conn.received().indexOf('\r\n\r\n') + 4)) as {
        message: string;
        url: string;
      };
      assert.match(answer.message, /did not arrive within 2 s of its headers \(GANTRY_HTTP_REQUEST_TIMEOUT\)/);
      assert.equal(answer.url, `${s.rootUrl}api/swagger`);
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(
        (await s.api('GET', '/orgs/slowpoke', { token: alice.token })).status,
        404,
        'the organization was not created',
      );
    });

    test('a head sent one header line every 500 ms (slowloris) is closed by GANTRY_HTTP_HEADERS_TIMEOUT with 408', async () => {
      const conn = await connect(s.url);
      conn.socket.write('GET /api/v1/version HTTP/1.1\r\nHost: gantry\r\n');
      let line = 0;
      const drip = setInterval(() => {
        if (!conn.socket.destroyed && conn.socket.writable) conn.socket.write(`X-Drip-${(line += 1)}: x\r\n`);
      }, 500);
      try {
        const closedAfter = await conn.closedWithin(10_000);
        assert.ok(closedAfter !== null, `still open after 10 s (${line} header lines sent)`);
        // headersTimeout, checked every quarter of it (500 ms here), plus slack for a busy machine.
        assert.ok(closedAfter < HEADERS_TIMEOUT_S * 1000 + 3_000, `closed after ${Math.round(closedAfter)} ms`);
        assert.match(conn.received(), /^HTTP\/1\.1 408 /);
      } finally {
        clearInterval(drip);
      }
    });

    test('a git push body that stalls is closed after GANTRY_HTTP_TRANSFER_IDLE_TIMEOUT, not after the shorter API timeout', async () => {
      const conn = await connect(s.url);
      conn.socket.write(
        `POST /alice/app.git/git-receive-pack HTTP/1.1\r\nHost: gantry\r\nAuthorization: ${basicAuth('alice', alice.token)}\r\nContent-Type: application/x-git-receive-pack-request\r\nContent-Length: 1000\r\n\r\n0`,
      );
      assert.equal(
        await conn.closedWithin(REQUEST_TIMEOUT_S * 1000 + 1_500),
        null,
        'a git transfer is not held to the API request timeout',
      );
      const closedAfter = await conn.closedWithin(TRANSFER_IDLE_TIMEOUT_S * 1000 + 5_000);
      assert.ok(closedAfter !== null, 'a stalled push body is closed');
      assert.ok(closedAfter >= TRANSFER_IDLE_TIMEOUT_S * 1000 - 100, `closed after ${Math.round(closedAfter)} ms`);
    });

    test('a git push that takes longer than GANTRY_HTTP_REQUEST_TIMEOUT (a slow uplink) still succeeds', async () => {
      // ~60 KiB of incompressible data at 20 KiB/s: about 3 s of pack, no pause near the idle limit.
      const proxy = await startThrottlingProxy(s.url, 2048, 100);
      const work = await createWorkDir(remoteUrl(proxy.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      try {
        assert.equal((await work.git(['pull', '-q', 'origin', 'main'])).code, 0);
        const sha = await work.commit({ 'blob.bin': randomBytes(60 * 1024).toString('base64') }, 'big');
        const started = performance.now();
        const pushed = await work.push('main');
        const tookMs = performance.now() - started;
        assert.equal(pushed.code, 0, pushed.stderr);
        assert.ok(
          tookMs > REQUEST_TIMEOUT_S * 1000,
          `the push took ${Math.round(tookMs)} ms: not slower than the API limit, so it proves nothing`,
        );
        const remote = await work.git(['ls-remote', 'origin', 'refs/heads/main']);
        assert.equal(remote.stdout.split('\t')[0], sha);
      } finally {
        await work.remove();
        await proxy.close();
      }
    });

    test('a runner long poll (FetchTask) that waits longer than GANTRY_HTTP_REQUEST_TIMEOUT is answered normally', async () => {
      const registration = await repoGetRunnerRegistrationToken({
        client: alice.client,
        path: { owner: 'alice', repo: 'app' },
      });
      const runner = await registerRunner(s.url, (registration.data as { token: string }).token, {
        labels: ['nothing-runs-here'],
      });
      const started = performance.now();
      const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
      const tookMs = performance.now() - started;
      // No job: the server waits its whole long poll (3 s) before answering "nothing".
      assert.equal(fetched.task, undefined, 'no task expected');
      assert.ok(tookMs > REQUEST_TIMEOUT_S * 1000, `answered after ${Math.round(tookMs)} ms`);
    });

    test('answers announce the keep-alive timeout (Keep-Alive: timeout=GANTRY_HTTP_KEEPALIVE_TIMEOUT)', async () => {
      const conn = await connect(s.url);
      conn.socket.write('GET /api/v1/version HTTP/1.1\r\nHost: gantry\r\n\r\n');
      await conn.firstData;
      assert.match(conn.received(), new RegExp(`\r\nKeep-Alive: timeout=${KEEPALIVE_TIMEOUT_S}\r\n`, 'i'));
      conn.socket.destroy();
    });
  });

  describe(`connection cap [${dialect}]`, () => {
    const CAP = 3;
    let s: TestServer;

    before(async () => {
      s = await startTestServer(dialect, { GANTRY_HTTP_MAX_CONNECTIONS: String(CAP) });
    });
    after(async () => {
      await s?.stop();
    });

    test('beyond GANTRY_HTTP_MAX_CONNECTIONS a new connection is closed at once, unanswered (refused, not queued); once one closes, the next is served', async () => {
      // The fixtures were made in-process: these are the server's only connections.
      const held = await Promise.all(Array.from({ length: CAP }, () => connect(s.url)));
      await new Promise((resolve) => setTimeout(resolve, 200));
      const extra = await connect(s.url);
      extra.socket.write('GET /api/healthz HTTP/1.1\r\nHost: gantry\r\n\r\n');
      const closedAfter = await extra.closedWithin(3_000);
      assert.ok(closedAfter !== null, `the connection over the cap was served: ${extra.received()}`);
      assert.equal(extra.received(), '', 'no answer at all');

      held[0]?.socket.destroy();
      await new Promise((resolve) => setTimeout(resolve, 200));
      const next = await connect(s.url);
      next.socket.write('GET /api/healthz HTTP/1.1\r\nHost: gantry\r\nConnection: close\r\n\r\n');
      assert.notEqual(await next.closedWithin(5_000), null);
      assert.match(next.received(), /^HTTP\/1\.1 200 /);
      for (const conn of held) conn.socket.destroy();
    });
  });
}
