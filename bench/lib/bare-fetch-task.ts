// The floor for an idle fleet: a node:http server in a child process of its
// own (as `gantry web` is) that does for a runner's FetchTask only what any
// HTTP server holding a long poll must: read the request, hold it with one
// timer as long as Gantry holds it (the runner's Connect-Timeout-Ms less
// Gantry's margin, at most 5 s: src/http/runner-rpc/fetch-task.ts and
// runner-protocol.ts), and answer the bytes Gantry answers an idle runner (200,
// X-Request-Id, application/proto, FetchTaskResponse{tasks_version: 1}), with
// Gantry's server settings at their defaults (keep-alive 75 s, head deadline
// 20 s checked every 5 s). No routing, no authentication, no database. What
// Gantry costs above this is its own; this much is Node's. Run as a script it
// prints `listening <port>` once it listens, and stops on SIGTERM.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startListeningChild } from './listening-child.ts';
import type { ListeningChild } from './listening-child.ts';

/** FetchTaskResponse{tasks_version: 1}: what Gantry answers a runner of a scope that never had a job. */
export const NO_TASK = Buffer.from([0x10, 0x01]);
const DEFAULT_HOLD_MS = 3000;
const MAX_HOLD_MS = 5000;
const HEADERS_TIMEOUT_MS = 20_000;
const KEEP_ALIVE_TIMEOUT_MS = 75_000;

/** Gantry's hold for a runner's deadline: the deadline less max(500 ms, a tenth), at most 5 s. */
export function holdMs(timeout: string | string[] | undefined): number {
  if (typeof timeout !== 'string') return DEFAULT_HOLD_MS;
  const ms = Number(timeout);
  return Math.min(MAX_HOLD_MS, Math.max(0, ms - Math.max(500, Math.ceil(ms / 10))));
}

/** The node:http floor server (not listening yet). */
export function serveBare(): http.Server {
  const server = http.createServer(
    { headersTimeout: HEADERS_TIMEOUT_MS, connectionsCheckingInterval: HEADERS_TIMEOUT_MS / 4 },
    (req, res) => {
      req.resume();
      req.once('end', () => {
        const timer = setTimeout(() => {
          res.writeHead(200, {
            'x-request-id': randomUUID(),
            'content-type': 'application/proto',
            'content-length': NO_TASK.length,
          });
          res.end(NO_TASK);
        }, holdMs(req.headers['connect-timeout-ms']));
        res.once('close', () => clearTimeout(timer));
      });
    },
  );
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.requestTimeout = 0;
  server.maxConnections = 100_000;
  return server;
}

export type BareFetchTaskChild = ListeningChild;

/** Starts the floor server as a child process (through tsx, as `gantry web` runs). */
export function startBareFetchTaskChild(): Promise<BareFetchTaskChild> {
  return startListeningChild(fileURLToPath(import.meta.url), process.env, 'the bare FetchTask server');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const server = serveBare();
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
  });
  process.once('SIGTERM', () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
