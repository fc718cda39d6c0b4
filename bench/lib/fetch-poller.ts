// FetchTask as forgejo-runner puts it on the wire (connect-go, HTTP/1.1,
// binary protobuf, its fetch_timeout as Connect-Timeout-Ms), over bare
// node:http: a fleet of thousands of these costs the bench process little,
// so a starved client does not time out calls the server answered in time.
// The Connect client of test/support/runner-client.ts does the same work with
// far more CPU per call (Headers, abort signals, async iterables).
import http from 'node:http';
import { gunzipSync } from 'node:zlib';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { FetchTaskRequestSchema, FetchTaskResponseSchema } from '../../src/gen/runner/v1/messages_pb.ts';
import type { FetchTaskResponse } from '../../src/gen/runner/v1/messages_pb.ts';

export type FetchOutcome =
  { kind: 'answered'; response: FetchTaskResponse } | { kind: 'timeout' } | { kind: 'dropped' };

export class FetchPollerError extends Error {}

export interface FetchPoller {
  fetch(): Promise<FetchOutcome>;
}

/** One agent for the whole fleet: every call in flight holds its own kept-alive connection, as each runner does. */
export function fleetAgent(): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY, maxFreeSockets: 100_000 });
}

export function fetchPoller(
  serverUrl: string,
  runner: { uuid: string; token: string },
  timeoutMs: number,
  agent: http.Agent,
): FetchPoller {
  const url = new URL('/api/actions/runner.v1.RunnerService/FetchTask', serverUrl);
  const body = Buffer.from(toBinary(FetchTaskRequestSchema, create(FetchTaskRequestSchema, { tasksVersion: 0n })));
  const headers = {
    'content-type': 'application/proto',
    'connect-protocol-version': '1',
    'connect-timeout-ms': String(timeoutMs),
    'accept-encoding': 'gzip',
    'user-agent': 'connect-go/1.18.1 (go1.24)',
    'content-length': String(body.length),
    'x-runner-uuid': runner.uuid,
    'x-runner-token': runner.token,
  };
  return {
    fetch() {
      return new Promise((resolve, reject) => {
        let settled = false;
        const settle = (outcome: FetchOutcome | Error): void => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          if (outcome instanceof Error) reject(outcome);
          else resolve(outcome);
        };
        const req = http.request(
          { host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers, agent },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('error', () => settle({ kind: 'dropped' }));
            res.on('end', () => {
              const raw = Buffer.concat(chunks);
              if (res.statusCode !== 200) {
                settle(
                  new FetchPollerError(`FetchTask answered ${res.statusCode}: ${raw.toString('utf8').slice(0, 200)}`),
                );
                return;
              }
              const bytes = res.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
              settle({ kind: 'answered', response: fromBinary(FetchTaskResponseSchema, bytes) });
            });
          },
        );
        // On a loaded machine this process may wake after a stall with both the
        // deadline passed and the answer already in: timers run before I/O in
        // an event-loop turn, so the answer is read first (setImmediate runs
        // after the turn's I/O) and only a call still unanswered then times out.
        const timer = setTimeout(() => {
          setImmediate(() => {
            if (settled) return;
            settle({ kind: 'timeout' });
            req.destroy();
          });
        }, timeoutMs);
        req.on('error', () => settle({ kind: 'dropped' }));
        req.end(body);
      });
    },
  };
}
