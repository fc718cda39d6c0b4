// A local webhook receiver: records every request (headers and the raw body
// bytes, for signature checks) and answers what the test tells it to.
import http from 'node:http';
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface ReceivedDelivery {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  rawBody: Buffer;
  /** The body as JSON (form bodies: the `payload` field), or null. */
  json: unknown;
}

export interface WebhookReceiver {
  url: string;
  received: ReceivedDelivery[];
  /** Decides the status of each request (default 200). */
  respond: (delivery: ReceivedDelivery, index: number) => number | Promise<number>;
  /** Resolves when `predicate` holds for the received list (polls), or rejects after `timeoutMs`. */
  waitFor(predicate: (received: ReceivedDelivery[]) => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** Constant-time check of a hex HMAC-SHA256 of the raw body. */
export function verifySignature(secret: string, rawBody: Buffer, hexDigest: string | undefined): boolean {
  if (!hexDigest) return false;
  const expected = Buffer.from(createHmac('sha256', secret).update(rawBody).digest('hex'));
  const given = Buffer.from(hexDigest);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedDelivery[] = [];
  const receiver: WebhookReceiver = {
    url: '',
    received,
    respond: () => 200,
    waitFor: async (predicate, timeoutMs = 15_000) => {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(received)) {
        if (Date.now() > deadline)
          throw new Error(`webhook receiver: condition not met within ${timeoutMs} ms (${received.length} received)`);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks);
      let json: unknown = null;
      try {
        const text = rawBody.toString('utf8');
        json = JSON.parse(
          req.headers['content-type']?.includes('x-www-form-urlencoded')
            ? (new URLSearchParams(text).get('payload') ?? '')
            : text,
        );
      } catch {
        json = null;
      }
      const delivery: ReceivedDelivery = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        rawBody,
        json,
      };
      const index = received.length;
      received.push(delivery);
      Promise.resolve(receiver.respond(delivery, index)).then(
        (status) => res.writeHead(status, { 'content-type': 'text/plain' }).end(`status ${status}`),
        () => res.writeHead(500).end(),
      );
    });
  });
  server.keepAliveTimeout = 100;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('no address');
  receiver.url = `http://127.0.0.1:${address.port}`;
  return receiver;
}
