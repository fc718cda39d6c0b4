// A request answered before its body was read must not take its keep-alive
// connection down with it: the answer says `Connection: keep-alive`, so a
// client (undici, Go, curl) sends its next request on the same connection and
// must get an answer. Found by the fuzz test: a Twirp body over its 64 KiB
// bound got 413, the rest of the body stayed paused in the socket, and the
// next request on that connection waited forever.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer } from '../support/server.ts';

const ANSWER_WITHIN_MS = 5_000;

/** One keep-alive connection, written to and read from as a client library would. */
class Connection {
  private data = '';
  private waiters: Array<() => void> = [];
  readonly socket: net.Socket;

  constructor(url: string) {
    const { hostname, port } = new URL(url);
    this.socket = net.connect(Number(port), hostname);
    this.socket.on('data', (chunk: Buffer) => {
      this.data += chunk.toString('latin1');
      for (const wake of this.waiters.splice(0)) wake();
    });
    this.socket.on('error', () => {});
  }

  send(head: string, body: Buffer = Buffer.alloc(0)): void {
    this.socket.write(head);
    if (body.length > 0) this.socket.write(body);
  }

  /** The status line of the `n`th answer (1-based), once it and its body have arrived; null after `ms`. */
  async answer(n: number, ms = ANSWER_WITHIN_MS): Promise<string | null> {
    const deadline = Date.now() + ms;
    for (;;) {
      const answers = completeAnswers(this.data);
      if (answers.length >= n) return answers[n - 1] as string;
      const left = deadline - Date.now();
      if (left <= 0 || this.socket.destroyed) return null;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.socket.destroy();
  }
}

/** Status lines of the whole answers (head and Content-Length body) in `data`. */
function completeAnswers(data: string): string[] {
  const statuses: string[] = [];
  let rest = data;
  for (;;) {
    const headEnd = rest.indexOf('\r\n\r\n');
    if (headEnd < 0) return statuses;
    const head = rest.slice(0, headEnd);
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? '0');
    if (rest.length < headEnd + 4 + length) return statuses;
    statuses.push(head.split('\r\n')[0] as string);
    rest = rest.slice(headEnd + 4 + length);
  }
}

function post(host: string, path: string, type: string, length: number): string {
  return `POST ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: ${type}\r\nContent-Length: ${length}\r\nConnection: keep-alive\r\n\r\n`;
}

function get(host: string, path: string): string {
  return `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: keep-alive\r\n\r\n`;
}

for (const dialect of testDialects()) {
  describe(`requests answered before their body was read [${dialect}]`, () => {
    let s: TestServer;
    let host: string;
    before(async () => {
      s = await startTestServer(dialect);
      host = new URL(s.url).host;
    });
    after(async () => {
      await s?.stop();
    });

    test('a Twirp body over its bound gets 413, and the next request on the same connection is answered', async () => {
      const conn = new Connection(s.url);
      try {
        const body = Buffer.from(`{"name":"${'a'.repeat(200 * 1024)}"}`);
        conn.send(
          post(
            host,
            '/twirp/github.actions.results.api.v1.ArtifactService/ListArtifacts',
            'application/json',
            body.length,
          ),
          body,
        );
        assert.match((await conn.answer(1)) ?? 'no answer', /^HTTP\/1\.1 413 /);
        conn.send(get(host, '/api/v1/version'));
        assert.match(
          (await conn.answer(2)) ?? 'no answer',
          /^HTTP\/1\.1 200 /,
          'the second request on the connection got no answer',
        );
      } finally {
        conn.close();
      }
    });

    test('a body that keeps coming long after its 413 is cut off with the connection, not read forever', async () => {
      const conn = new Connection(s.url);
      try {
        // Declares 64 MiB, sends the first 128 KiB: the answer comes at once.
        const declared = 64 * 1024 * 1024;
        conn.send(
          post(
            host,
            '/twirp/github.actions.results.api.v1.ArtifactService/ListArtifacts',
            'application/json',
            declared,
          ),
          Buffer.alloc(128 * 1024, 'a'),
        );
        assert.match((await conn.answer(1)) ?? 'no answer', /^HTTP\/1\.1 413 /);
        // Keeps sending: past the drain bound (a few MiB) the server closes the connection.
        const chunk = Buffer.alloc(256 * 1024, 'a');
        const closed = new Promise<void>((resolve) => conn.socket.once('close', () => resolve()));
        const started = Date.now();
        for (let sent = 0; sent < 32 * 1024 * 1024 && !conn.socket.destroyed; sent += chunk.length) {
          if (!conn.socket.write(chunk))
            await Promise.race([new Promise((resolve) => conn.socket.once('drain', resolve)), closed]);
        }
        const outcome = await Promise.race([
          closed.then(() => 'closed'),
          new Promise((resolve) => setTimeout(() => resolve('still open'), ANSWER_WITHIN_MS)),
        ]);
        assert.equal(outcome, 'closed');
        // Not by the transfer idle timeout (a minute) of a body nobody reads: by the drain's bound.
        const seconds = (Date.now() - started) / 1000;
        assert.ok(seconds < 10, `the connection was closed ${seconds} s after the 413`);
      } finally {
        conn.close();
      }
    });
  });
}
