// How long a client may take to SEND a request, by route class. Node's own
// `requestTimeout` bounds the time to receive a whole request, but it is one
// value per server: 30 s suits an API body (at most GANTRY_BODY_LIMIT, 1 MiB)
// and would cut a 2 GiB git push or a large runner log upload. So the server's
// requestTimeout is 0 (off) and this file enforces a deadline per request:
//
//   API (/api/v1 and every route not marked otherwise): the whole body within
//     GANTRY_HTTP_REQUEST_TIMEOUT of the headers. One timer per request.
//   transfer (git smart HTTP, the runner protocol at /api/actions, marked by
//     useTransferDeadlines on their plugin): no byte of the body for
//     GANTRY_HTTP_TRANSFER_IDLE_TIMEOUT, or the whole body not within
//     GANTRY_HTTP_TRANSFER_TIMEOUT (0: no bound). Progress is read from the
//     socket's byte counter, which does not touch the body stream (a 'data'
//     listener would start it flowing before the route reads it).
//
// Only RECEIVING is bounded. Once the request is complete (`req.complete`) the
// timers do nothing: a runner's FetchTask long poll or a slow clone's response
// takes as long as it takes. The request line and headers are bounded by
// Node's headersTimeout (GANTRY_HTTP_HEADERS_TIMEOUT, in app.ts) for every
// route alike, an idle keep-alive connection by keepAliveTimeout.
//
// On expiry:
//   API: a 408 `{message, url}` goes out with `Connection: close` and the
//     connection is closed (as clientErrors.ts answers a slow head). A body
//     that completes in the moment after is not handled: the route never runs
//     after its client was told 408, so nothing is half-written.
//   transfer: the route is already streaming the body (into git, or the
//     runner service), so the connection is destroyed; the stream fails, git
//     drops the quarantined pack, no ref moves, and the runner retries.
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { endWithAnswer } from './client-errors.ts';
import { errorBody } from './errors.ts';

export interface RequestDeadlineLimits {
  requestTimeoutMs: number;
  transferIdleTimeoutMs: number;
  /** 0: no bound. */
  transferTimeoutMs: number;
  rootUrl: string;
}

/** The current deadline of each request being received: its cancel function. */
const running = new WeakMap<IncomingMessage, () => void>();
/** Requests answered 408 by a deadline: their route must not run if the body completes after all. */
const expired = new WeakSet<IncomingMessage>();

/** How often a transfer's progress is looked at: often enough to be close to its idle limit, cheap per request. */
function pollIntervalMs(idleMs: number): number {
  return Math.max(100, Math.min(1000, Math.floor(idleMs / 4)));
}

function cancelDeadline(raw: IncomingMessage): void {
  running.get(raw)?.();
  running.delete(raw);
}

function track(raw: IncomingMessage, cancel: () => void): void {
  cancelDeadline(raw);
  running.set(raw, cancel);
  // Nothing to bound once the request is over (complete or its socket gone).
  raw.once('close', () => cancelDeadline(raw));
}

function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}

function expireApiRequest(req: FastifyRequest, reply: FastifyReply, limits: RequestDeadlineLimits): void {
  const socket = req.raw.socket;
  if (req.raw.complete || socket.destroyed) return;
  expired.add(req.raw);
  req.log.info({ timeoutMs: limits.requestTimeoutMs }, 'request body too slow: answered 408 and closed the connection');
  if (reply.raw.headersSent || !socket.writable) {
    socket.destroy();
    return;
  }
  const message = `the request body did not arrive within ${seconds(limits.requestTimeoutMs)} of its headers (GANTRY_HTTP_REQUEST_TIMEOUT); send it at once, or ask the administrator to raise the limit`;
  endWithAnswer(socket, 408, JSON.stringify(errorBody(limits.rootUrl, message)), 'application/json;charset=utf-8');
}

function expireTransfer(req: FastifyRequest, reason: string, details: Record<string, number>): void {
  const socket = req.raw.socket;
  if (req.raw.complete || socket.destroyed) return;
  req.log.info(details, `${reason}: closed the connection`);
  socket.destroy();
}

/** HTTP/1.1: a request has a body only when it says so (RFC 9112, section 6.3); without one there is nothing to wait for. */
function hasNoBody(req: FastifyRequest): boolean {
  const length = req.headers['content-length'];
  return (length === undefined || length === '0') && req.headers['transfer-encoding'] === undefined;
}

function startApiDeadline(req: FastifyRequest, reply: FastifyReply, limits: RequestDeadlineLimits): void {
  if (req.raw.complete || hasNoBody(req)) return;
  const timer = setTimeout(() => expireApiRequest(req, reply, limits), limits.requestTimeoutMs);
  timer.unref();
  track(req.raw, () => clearTimeout(timer));
}

function startTransferDeadline(req: FastifyRequest, limits: RequestDeadlineLimits): void {
  if (req.raw.complete) return;
  const socket = req.raw.socket;
  const started = performance.now();
  let lastBytes = socket.bytesRead;
  let lastProgress = started;
  const timer = setInterval(() => {
    if (req.raw.complete || socket.destroyed) return cancelDeadline(req.raw);
    const now = performance.now();
    // bytesRead counts the whole connection; any increase is this body arriving.
    if (socket.bytesRead !== lastBytes) {
      lastBytes = socket.bytesRead;
      lastProgress = now;
    }
    if (now - lastProgress >= limits.transferIdleTimeoutMs) {
      expireTransfer(req, 'request body stalled', { idleTimeoutMs: limits.transferIdleTimeoutMs });
    } else if (limits.transferTimeoutMs > 0 && now - started >= limits.transferTimeoutMs) {
      expireTransfer(req, 'request body too slow', { transferTimeoutMs: limits.transferTimeoutMs });
    }
  }, pollIntervalMs(limits.transferIdleTimeoutMs));
  timer.unref();
  track(req.raw, () => clearInterval(timer));
}

/**
 * Every route gets the API deadline (installed on the root instance before
 * any route plugin, so it applies to all of them and to 404s), and a route
 * that has answered 408 never reaches its handler.
 */
export function installRequestDeadlines(app: FastifyInstance, limits: RequestDeadlineLimits): void {
  // Callback hooks: no promise per request.
  app.addHook('onRequest', (req, reply, done) => {
    startApiDeadline(req, reply, limits);
    done();
  });
  app.addHook('preValidation', (req, reply, done) => {
    // The body completed just after its 408 went out: the client was told it
    // failed, so it must. A hijacked reply counts as sent: Fastify runs
    // neither the later hooks nor the handler.
    if (expired.has(req.raw)) reply.hijack();
    done();
  });
}

/**
 * Switches the routes of `plugin` (an encapsulated instance: git smart HTTP,
 * the runner protocol) to the transfer deadlines. Its onRequest hook runs after
 * the root's, replacing the API deadline the root just started.
 */
export function useTransferDeadlines(plugin: FastifyInstance, limits: RequestDeadlineLimits): void {
  plugin.addHook('onRequest', async (req) => startTransferDeadline(req, limits));
}
