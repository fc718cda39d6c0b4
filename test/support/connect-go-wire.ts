// A unary Connect call as connect-go's client makes it (the Go library both
// forgejo-runner and act_runner are built on): HTTP/1.1 POST of the binary
// codec (`application/proto`), the request body uncompressed,
// `Connect-Protocol-Version: 1`, `Accept-Encoding: gzip` (its only
// registered compressor), and `Connect-Timeout-Ms` when the call has a
// deadline. An answer with `Content-Encoding: gzip` is inflated; errors are
// the Connect JSON envelope {code, message} under a non-200 status.
import http from 'node:http';
import { gunzipSync } from 'node:zlib';

export class WireError extends Error {
  constructor(
    /** Connect code ("unauthenticated", "internal", …), or "deadline_exceeded"/"unavailable" for what the client saw itself. */
    readonly code: string,
    message: string,
    readonly status: number,
  ) {
    super(`${code}: ${message}`);
  }
}

export interface WireCall {
  /** Full URL of the procedure, e.g. http://host/api/actions/runner.v1.RunnerService/FetchTask. */
  url: string;
  body: Uint8Array;
  headers: Record<string, string>;
  /** The call's deadline: sent as Connect-Timeout-Ms and enforced (the request is abandoned, like a Go context). */
  timeoutMs?: number;
}

export interface WireAnswer {
  body: Uint8Array;
  /** The Content-Encoding the server chose ('' for identity). */
  encoding: string;
  headers: http.IncomingHttpHeaders;
}

/** One keep-alive agent per emulated runner process, as Go's http.Transport pools connections. */
export function createAgent(): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets: 10 });
}

export function callUnary(agent: http.Agent, call: WireCall): Promise<WireAnswer> {
  return new Promise((resolve, reject) => {
    const url = new URL(call.url);
    const headers: Record<string, string> = {
      'content-type': 'application/proto',
      'connect-protocol-version': '1',
      'accept-encoding': 'gzip',
      'content-length': String(call.body.byteLength),
      ...call.headers,
    };
    if (call.timeoutMs !== undefined) headers['connect-timeout-ms'] = String(call.timeoutMs);
    const req = http.request(
      { agent, host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', (error) => reject(new WireError('unavailable', error.message, 0)));
        res.on('end', () => {
          clearTimeout(timer);
          const encoding = String(res.headers['content-encoding'] ?? '');
          let body: Buffer = Buffer.concat(chunks);
          try {
            if (encoding === 'gzip') body = gunzipSync(body);
            else if (encoding !== '' && encoding !== 'identity')
              throw new Error(`unexpected Content-Encoding ${encoding}`);
          } catch (error) {
            reject(new WireError('internal', (error as Error).message, res.statusCode ?? 0));
            return;
          }
          if (res.statusCode !== 200) {
            let envelope: { code?: string; message?: string } = {};
            try {
              envelope = JSON.parse(body.toString('utf8')) as typeof envelope;
            } catch {
              envelope = { code: 'unknown', message: body.toString('utf8') };
            }
            reject(new WireError(envelope.code ?? 'unknown', envelope.message ?? '', res.statusCode ?? 0));
            return;
          }
          resolve({ body: new Uint8Array(body), encoding, headers: res.headers });
        });
      },
    );
    // The deadline covers the whole call: past it the client stops waiting and drops the connection.
    const timer =
      call.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            req.destroy();
            reject(new WireError('deadline_exceeded', `no answer within ${call.timeoutMs} ms`, 0));
          }, call.timeoutMs);
    req.on('error', (error) => {
      clearTimeout(timer);
      reject(new WireError('unavailable', error.message, 0));
    });
    req.end(call.body);
  });
}
