// One runner RPC sent as raw HTTP, for the wire tests that compare the two
// ways a Connect call reaches Gantry: with a Content-Length body, as
// connect-go sends it (forgejo-runner, act_runner), or chunked, as connect-es
// does (`gantry runner`, the tests' client). Unlike connect-go-wire.ts's
// `callUnary`, which behaves like a client, this keeps everything a test
// compares: the status, every header, the bytes as received and inflated, and
// whether the call went on a connection an earlier call had used.
import http from 'node:http';
import { gunzipSync } from 'node:zlib';
import type { RunnerCredentials } from './runner-client.ts';

export interface RawAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** As received (gzip-encoded when content-encoding says so). */
  raw: Buffer;
  /** Inflated when gzip-encoded. */
  body: Buffer;
  /** The call went on a connection an earlier call had used. */
  reusedSocket: boolean;
}

export interface RawCallOptions {
  /** A chunked body (connect-es) instead of a Content-Length one (connect-go). */
  chunked?: boolean;
  /** Added to (and overriding) the Connect and runner headers. */
  headers?: Record<string, string>;
  /** A kept-alive agent (default: a connection per call). */
  agent?: http.Agent;
}

/** POSTs `body` to `route` (a path under `url`) as runner `runner`, binary Connect, protocol version 1. */
export function rawRunnerCall(
  url: string,
  route: string,
  runner: RunnerCredentials,
  body: Uint8Array,
  options: RawCallOptions = {},
): Promise<RawAnswer> {
  const target = new URL(route, url);
  const bytes = Buffer.from(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: 'POST',
        agent: options.agent ?? false,
        headers: {
          'content-type': 'application/proto',
          'connect-protocol-version': '1',
          'x-runner-uuid': runner.uuid,
          'x-runner-token': runner.token,
          ...(options.chunked === true ? {} : { 'content-length': String(bytes.length) }),
          ...options.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const raw = Buffer.concat(chunks);
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            raw,
            body: res.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw,
            reusedSocket: req.reusedSocket,
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    if (options.chunked === true) {
      // An empty first write makes Node stream the body: it sends Transfer-Encoding: chunked.
      req.write(bytes.subarray(0, 0));
      req.end(bytes);
    } else req.end(bytes);
  });
}

/**
 * The headers of an answer a client can rely on: not the framing, not the
 * date; nor the names in `alsoOmit` (e.g. x-request-id, which differs per call).
 */
export function visibleHeaders(answer: RawAnswer, alsoOmit: readonly string[] = []): Record<string, string> {
  const framing = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding', 'content-length', ...alsoOmit]);
  return Object.fromEntries(
    Object.entries(answer.headers)
      .filter(([name]) => !framing.has(name))
      .map(([name, value]) => [name, String(value)]),
  );
}
