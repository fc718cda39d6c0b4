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
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** FetchTaskResponse{tasks_version: 1}: what Gantry answers a runner of a scope that never had a job. */
const NO_TASK = Buffer.from([0x10, 0x01]);
const DEFAULT_HOLD_MS = 3000;
const MAX_HOLD_MS = 5000;
const HEADERS_TIMEOUT_MS = 20_000;
const KEEP_ALIVE_TIMEOUT_MS = 75_000;

/** Gantry's hold for a runner's deadline: the deadline less max(500 ms, a tenth), at most 5 s. */
function holdMs(timeout: string | string[] | undefined): number {
  if (typeof timeout !== 'string') return DEFAULT_HOLD_MS;
  const ms = Number(timeout);
  return Math.min(MAX_HOLD_MS, Math.max(0, ms - Math.max(500, Math.ceil(ms / 10))));
}

function serve(): http.Server {
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

export interface BareFetchTaskChild {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/** Starts the floor server as a child process (through tsx, as `gantry web` runs). */
export async function startBareFetchTaskChild(): Promise<BareFetchTaskChild> {
  const script = fileURLToPath(import.meta.url);
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: path.resolve(path.dirname(script), '../..'),
    env: process.env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.once('exit', (code) => reject(new Error(`the bare FetchTask server exited early (${code})`)));
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening (\d+)/.exec(out);
      if (match) resolve(Number(match[1]));
    });
  });
  child.removeAllListeners('exit');
  if (child.pid === undefined) throw new Error('the bare FetchTask server has no pid');
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const server = serve();
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
  });
  process.once('SIGTERM', () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
