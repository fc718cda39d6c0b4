import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { Http1Connection } from './http1-connection.ts';
import { WireFleet, wireRunner } from './runner-wire.ts';

/** A raw TCP server answering each request with the bytes `answer` gives, written in the pieces it gives. */
async function rawServer(answer: (request: string, socket: net.Socket) => Buffer[] | null): Promise<{
  port: number;
  connections: () => number;
  close: () => Promise<void>;
}> {
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    connections += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let pending = '';
    socket.on('data', (bytes) => {
      pending += bytes.toString('latin1');
      const end = pending.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/content-length: (\d+)/i.exec(pending)?.[1] ?? 0);
      if (pending.length < end + 4 + length) return;
      const request = pending.slice(0, end + 4 + length);
      pending = pending.slice(end + 4 + length);
      const pieces = answer(request, socket);
      if (pieces === null) return;
      // Each piece its own write, a turn apart, so the client sees the answer split.
      let i = 0;
      const next = (): void => {
        if (i >= pieces.length || socket.destroyed) return;
        socket.write(pieces[i++] as Buffer);
        setImmediate(next);
      };
      next();
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const request = (path = '/'): Buffer => Buffer.from(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi`);
const bytes = (...parts: string[]): Buffer[] => parts.map((p) => Buffer.from(p, 'latin1'));

describe('Http1Connection', { timeout: 5000 }, () => {
  const servers: { close: () => Promise<void> }[] = [];
  after(async () => {
    for (const server of servers) await server.close();
  });
  const serve = async (answer: Parameters<typeof rawServer>[0]) => {
    const server = await rawServer(answer);
    servers.push(server);
    return server;
  };

  it('reads a Content-Length answer split anywhere, and keeps the connection for the next call', async () => {
    const server = await serve(() => bytes('HTTP/1.1 200 OK\r\nContent-Le', 'ngth: 5\r\nX-A: b\r\n\r', '\nhel', 'lo'));
    const connection = new Http1Connection('127.0.0.1', server.port);
    for (let i = 0; i < 2; i += 1) {
      const answer = await connection.call(request());
      assert.ok(typeof answer !== 'string');
      assert.equal(answer.status, 200);
      assert.equal(answer.headers.get('x-a'), 'b');
      assert.equal(answer.body.toString(), 'hello');
      assert.equal(connection.usable, true);
    }
    assert.equal(server.connections(), 1);
    connection.destroy();
  });

  it('reads a chunked answer (chunk extensions, trailers) and skips a 1xx answer before it', async () => {
    const server = await serve(() =>
      bytes(
        'HTTP/1.1 100 Continue\r\n\r\n',
        'HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n',
        '3;ext=1\r\nabc\r',
        '\n2\r\nde\r\n0\r\nTrailer: x\r\n',
        '\r\n',
      ),
    );
    const connection = new Http1Connection('127.0.0.1', server.port);
    const answer = await connection.call(request());
    assert.ok(typeof answer !== 'string');
    assert.equal(answer.status, 201);
    assert.equal(answer.body.toString(), 'abcde');
    assert.equal(connection.usable, true);
    connection.destroy();
  });

  it('reads a body without length up to the connection’s end, and honours Connection: close', async () => {
    const server = await serve((_request, socket) => {
      socket.end('HTTP/1.1 200 OK\r\n\r\nuntil the end');
      return null;
    });
    const connection = new Http1Connection('127.0.0.1', server.port);
    const answer = await connection.call(request());
    assert.ok(typeof answer !== 'string');
    assert.equal(answer.body.toString(), 'until the end');
    assert.equal(connection.usable, false);

    const closing = await serve(() => bytes('HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: 0\r\n\r\n'));
    const other = new Http1Connection('127.0.0.1', closing.port);
    const busy = await other.call(request());
    assert.ok(typeof busy !== 'string');
    assert.equal(busy.status, 503);
    assert.equal(other.usable, false);
  });

  it('times out an unanswered call and closes its connection; an abort drops the call', async () => {
    let closed = 0;
    const server = await serve((_request, socket) => {
      socket.on('close', () => (closed += 1));
      return null; // never answers
    });
    const connection = new Http1Connection('127.0.0.1', server.port);
    const started = performance.now();
    assert.equal(await connection.call(request(), { timeoutMs: 50 }), 'timeout');
    assert.ok(performance.now() - started >= 45);
    assert.equal(connection.usable, false);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(closed, 1);

    const aborted = new Http1Connection('127.0.0.1', server.port);
    const controller = new AbortController();
    const outcome = aborted.call(request(), { signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    assert.equal(await outcome, 'dropped');
    assert.equal(aborted.usable, false);
  });

  it('drops a call whose answer is cut short or malformed, and refuses a second call in flight', async () => {
    const cut = await serve((_request, socket) => {
      socket.end('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort');
      return null;
    });
    assert.equal(await new Http1Connection('127.0.0.1', cut.port).call(request()), 'dropped');

    const malformed = await serve(() => bytes('SMTP ready\r\n\r\n'));
    const connection = new Http1Connection('127.0.0.1', malformed.port);
    assert.equal(await connection.call(request()), 'dropped');
    assert.equal(connection.usable, false);

    const silent = await serve(() => null);
    const busy = new Http1Connection('127.0.0.1', silent.port);
    const first = busy.call(request(), { timeoutMs: 20 });
    assert.throws(() => busy.call(request()), /already in flight/);
    assert.equal(await first, 'timeout');
  });
});

describe('wireRunner over Http1Connection', { timeout: 5000 }, () => {
  it('sends what forgejo-runner sends and reads the task id of a gzip answer, every call on one kept-alive connection', async () => {
    const seen: http.IncomingHttpHeaders[] = [];
    const bodies: Buffer[] = [];
    const sockets = new Set<unknown>();
    // FetchTaskResponse{task: Task{id: 300}}: field 1 (task) holding field 1 (id) = 300 as a varint.
    const answer = gzipSync(Buffer.from([0x0a, 3, 0x08, 0xac, 0x02]));
    const server = http.createServer((req, res) => {
      seen.push(req.headers);
      sockets.add(req.socket);
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        bodies.push(Buffer.concat(chunks));
        res.writeHead(200, { 'content-type': 'application/proto', 'content-encoding': 'gzip' });
        res.end(answer);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const fleet = new WireFleet();
    try {
      const { port } = server.address() as AddressInfo;
      const runner = wireRunner(`http://127.0.0.1:${port}`, { uuid: 'u-1', token: 't-1' }, fleet);
      assert.deepEqual(await runner.fetchTask({ timeoutMs: 5000, requestKey: 'k-1' }), {
        kind: 'answered',
        taskId: 300n,
      });
      assert.deepEqual(await runner.fetchTask(), { kind: 'answered', taskId: 300n });
      await runner.finishTask(300n);
      assert.equal(sockets.size, 1, 'every call on one kept-alive connection');
      // UpdateTaskRequest{state: TaskState{id: 300, result: RESULT_SUCCESS}}.
      assert.deepEqual([...(bodies[2] as Buffer)], [0x0a, 5, 0x08, 0xac, 0x02, 0x10, 1]);
      const [first, second] = seen as [http.IncomingHttpHeaders, http.IncomingHttpHeaders];
      assert.equal(first['content-type'], 'application/proto');
      assert.equal(first['connect-protocol-version'], '1');
      assert.equal(first['accept-encoding'], 'gzip');
      assert.equal(first['x-runner-uuid'], 'u-1');
      assert.equal(first['x-runner-token'], 't-1');
      assert.equal(first['connect-timeout-ms'], '5000');
      assert.equal(first['x-runner-request-key'], 'k-1');
      assert.equal(first['content-length'], '0');
      assert.equal(second['connect-timeout-ms'], undefined);
      assert.equal(second['x-runner-request-key'], undefined);
    } finally {
      fleet.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
