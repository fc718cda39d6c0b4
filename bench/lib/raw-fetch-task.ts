// The second floor for an idle fleet: the least any Node server can spend on
// these polls. A plain node:net server in a child process of its own (as
// `gantry web` and the node:http floor, bare-fetch-task.ts, are) that keeps
// each runner's connection, finds the end of each request's head and its
// Content-Length body, holds the poll with one timer as long as Gantry holds
// it, and writes the same answer node:http writes for the bare floor (status
// line, Date, the request id, content type and length, keep-alive) as one
// buffer. No HTTP parser, no request or response objects, no streams above
// the socket: what is left is the event loop, the socket reads and writes,
// one timer per poll and the answer's bytes.
//
// It is a measuring stick only, not a server: it trusts its clients (the
// bench's runners) to send well-formed requests and reads just the two
// headers it needs. What node:http costs above it is the HTTP server's
// machinery; what Gantry costs above node:http is Gantry's own.
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { holdMs, NO_TASK } from './bare-fetch-task.ts';
import { startListeningChild } from './listening-child.ts';
import type { ListeningChild } from './listening-child.ts';

const HEAD_END = Buffer.from('\r\n\r\n');
const KEEP_ALIVE_SECONDS = 75;

/** The header value of `name` (lower-case, with its colon) in a head, or undefined. */
function headerOf(head: string, name: string): string | undefined {
  const at = head.indexOf(`\r\n${name}`);
  if (at < 0) return undefined;
  const start = at + 2 + name.length;
  const end = head.indexOf('\r\n', start);
  return head.slice(start, end < 0 ? undefined : end).trim();
}

let dateSecond = -1;
let dateText = '';
/** The Date header's value, made once a second as node:http makes it. */
function utcDate(): string {
  const second = Math.floor(Date.now() / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateText = new Date(second * 1000).toUTCString();
  }
  return dateText;
}

/** The bytes node:http writes for the bare floor's answer, with the same headers. */
function answer(): Buffer {
  return Buffer.concat([
    Buffer.from(
      'HTTP/1.1 200 OK\r\n' +
        `x-request-id: ${randomUUID()}\r\n` +
        'content-type: application/proto\r\n' +
        `content-length: ${NO_TASK.length}\r\n` +
        `Date: ${utcDate()}\r\n` +
        'Connection: keep-alive\r\n' +
        `Keep-Alive: timeout=${KEEP_ALIVE_SECONDS}\r\n\r\n`,
      'latin1',
    ),
    NO_TASK,
  ]);
}

/** One runner's connection: one poll held at a time, the next request read once it is answered. */
function serveConnection(socket: net.Socket): void {
  let pending: Buffer = Buffer.alloc(0);
  let timer: NodeJS.Timeout | undefined;
  const next = (): void => {
    if (timer !== undefined) return; // a poll is held: the next request waits for its answer
    const end = pending.indexOf(HEAD_END);
    if (end < 0) return;
    // Header names lower-cased for the look-up, as the runners send them in any case.
    const head = pending.toString('latin1', 0, end).toLowerCase();
    const length = Number(headerOf(head, 'content-length:') ?? 0);
    const total = end + HEAD_END.length + length;
    if (pending.length < total) return;
    pending = pending.subarray(total);
    timer = setTimeout(
      () => {
        timer = undefined;
        socket.write(answer());
        next();
      },
      holdMs(headerOf(head, 'connect-timeout-ms:')),
    );
  };
  socket.setNoDelay(true);
  socket.on('data', (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    next();
  });
  socket.on('close', () => clearTimeout(timer));
  socket.on('error', () => socket.destroy());
  socket.setTimeout(KEEP_ALIVE_SECONDS * 1000, () => {
    if (timer === undefined) socket.destroy();
  });
}

export type RawFetchTaskChild = ListeningChild;

/** Starts the raw floor server as a child process (through tsx, as `gantry web` runs). */
export function startRawFetchTaskChild(): Promise<RawFetchTaskChild> {
  return startListeningChild(fileURLToPath(import.meta.url), process.env, 'the raw FetchTask server');
}

/** The raw floor server (not listening yet); `closeAll` destroys every connection it holds. */
export function serveRaw(): { server: net.Server; closeAll: () => void } {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    serveConnection(socket);
  });
  return { server, closeAll: () => sockets.forEach((socket) => socket.destroy()) };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { server, closeAll } = serveRaw();
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
  });
  process.once('SIGTERM', () => {
    server.close(() => process.exit(0));
    closeAll();
  });
}
