// FetchTask as forgejo-runner and act_runner send it (connect-go: a binary
// body with a Content-Length, a few bytes), served by the HTTP server's
// request listener before Fastify sees the request. An idle fleet is
// thousands of these calls every few seconds, and Fastify's per-request work
// (request and reply objects, routing, the hooks of every route, the
// response pipeline) was the larger part of what each cost. This path does
// what those hooks do for such a call, no more:
//   - the request id: X-Request-Id answered (the runner's own when it is a
//     plausible id, request-id.ts), and `reqId` on a logged failure;
//   - the body deadline (request-deadlines.ts, the runner protocol's transfer
//     deadlines): no byte for GANTRY_HTTP_TRANSFER_IDLE_TIMEOUT, or the whole
//     body not within GANTRY_HTTP_TRANSFER_TIMEOUT, closes the connection;
//   - the metrics (metrics.ts): the call counted and timed under its route;
//   - no request log lines (FetchTask never writes them, app.ts).
// The body is read whole (its length is at most the method's limit, checked
// before), so nothing is left unread for the drain of unread-bodies.ts.
// Everything else goes on to Fastify untouched, and is answered or refused
// there as before: other methods and shapes (fetch-task-direct.ts says
// which), a chunked body or one over the limit, credentials that name no
// runner, any call while rate limits are on (their counters live in
// rate-limit.ts's hook) and any call once the server is closing (Fastify
// answers 503).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ConnectError } from '@connectrpc/connect';
import type { FastifyBaseLogger } from 'fastify';
import type { RunnerProtocolService } from '../../services/actions/runner-protocol.ts';
import { requestIdOf, REQUEST_ID_HEADER } from '../request-id.ts';
import type { FetchTaskAnswer, PlainCall } from './fetch-task-direct.ts';
import {
  ClientGone,
  decodeFetchTask,
  FETCH_TASK_PATH,
  fetchTaskAnswer,
  holdFetchTask,
  plainCall,
  plainCallRunner,
  undecodable,
} from './fetch-task-direct.ts';

export interface FetchTaskFrontOptions {
  protocol: RunnerProtocolService;
  /** FetchTask's body limit (request-limits.ts). */
  maxBytes: number;
  transferIdleTimeoutMs: number;
  /** 0: no bound. */
  transferTimeoutMs: number;
  logger: FastifyBaseLogger;
  /** Counts and times one answered call (metrics.ts's onResponse), or null when metrics are off. */
  observe: ((method: string, route: string, status: number, seconds: number) => void) | null;
  /** true: every call goes to Fastify (rate limits on, or the server closing). */
  passAll(): boolean;
}

/** A request listener's fallback: hands the request to Fastify. */
export type NextListener = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * As request-deadlines.ts's transfer deadline: the connection is destroyed
 * when no byte of the body arrives for the idle timeout (progress read from
 * the socket's byte counter), or the whole body takes too long.
 */
function bodyDeadline(req: IncomingMessage, options: BodyReadOptions): NodeJS.Timeout {
  const socket = req.socket;
  const started = performance.now();
  let lastBytes = socket.bytesRead;
  let lastProgress = started;
  const interval = Math.max(100, Math.min(1000, Math.floor(options.transferIdleTimeoutMs / 4)));
  const timer = setInterval(() => {
    const now = performance.now();
    if (socket.bytesRead !== lastBytes) {
      lastBytes = socket.bytesRead;
      lastProgress = now;
    }
    const stalled = now - lastProgress >= options.transferIdleTimeoutMs;
    const tooSlow = options.transferTimeoutMs > 0 && now - started >= options.transferTimeoutMs;
    if (!stalled && !tooSlow) return;
    options.logger
      .child({ reqId: requestIdOf(req) })
      .info(
        stalled ? { idleTimeoutMs: options.transferIdleTimeoutMs } : { transferTimeoutMs: options.transferTimeoutMs },
        `${stalled ? 'request body stalled' : 'request body too slow'}: closed the connection`,
      );
    socket.destroy();
  }, interval);
  timer.unref();
  return timer;
}

/** What reading a body needs of the options (report-front.ts reads its bodies the same way). */
export type BodyReadOptions = Pick<FetchTaskFrontOptions, 'transferIdleTimeoutMs' | 'transferTimeoutMs' | 'logger'>;

/**
 * The body (Content-Length bytes), the reason it could not be read, or null
 * when the connection went away. Usually it came with the head and is in the
 * stream's buffer already, and no deadline is started.
 */
export function readBody(
  req: IncomingMessage,
  length: number,
  options: BodyReadOptions,
): Promise<Buffer | ConnectError | null> {
  if (length === 0) return Promise.resolve(Buffer.alloc(0));
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const done = (value: Buffer | ConnectError | null): void => {
      if (timer !== undefined) clearInterval(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
      resolve(value);
    };
    const onData = (chunk: Buffer): void => void chunks.push(chunk);
    const onEnd = (): void => done(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks));
    const onError = (error: Error): void => done(undecodable(error));
    const onClose = (): void => done(null);
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onError);
    req.once('close', onClose);
    // Stream events come later than this (never while a listener is added), so `done` sees it set.
    const timer = req.complete ? undefined : bodyDeadline(req, options);
  });
}

/** Writes a front path's answer (FetchTask's here, the reports' in report-front.ts) with its request id. */
export function sendFrontAnswer(
  res: ServerResponse,
  requestId: string,
  answer: Pick<FetchTaskAnswer, 'status' | 'contentType' | 'gzip'> & { body: Uint8Array },
): void {
  const headers: Record<string, string | number> = {
    [REQUEST_ID_HEADER]: requestId,
    'content-type': answer.contentType,
    'content-length': answer.body.byteLength,
  };
  if (answer.gzip) headers['content-encoding'] = 'gzip';
  res.writeHead(answer.status, headers);
  res.end(answer.body);
}

async function serve(
  req: IncomingMessage,
  res: ServerResponse,
  call: PlainCall,
  length: number,
  options: FetchTaskFrontOptions,
  next: NextListener,
): Promise<void> {
  const started = performance.now();
  const runner = await plainCallRunner(options.protocol, call, req.socket);
  // Unknown credentials: the Connect path refuses them (the body still unread).
  if (runner === null) return next(req, res);
  const requestId = requestIdOf(req);
  const body = await readBody(req, length, options);
  if (body === null) return; // The connection is gone.
  const gone = new ClientGone();
  // 'close' comes once: `on` keeps no once-wrapper for the seconds a poll is held.
  res.on('close', () => {
    if (!res.writableFinished) gone.abort();
  });
  const logOf = (): FastifyBaseLogger => options.logger.child({ reqId: requestId });
  const send = (answer: FetchTaskAnswer): void => {
    if (res.destroyed) return;
    const { observe } = options;
    if (observe !== null)
      res.on('finish', () => observe('POST', FETCH_TASK_PATH, answer.status, (performance.now() - started) / 1000));
    sendFrontAnswer(res, requestId, answer);
  };
  const input = decodeFetchTask(body);
  // An idle runner's poll: held with no suspended call, answered by `send` (this function returns now).
  if (
    !(input instanceof ConnectError) &&
    holdFetchTask(options.protocol, runner, input, call, gone, logOf, safely(send, res, options.logger))
  )
    return;
  send(await fetchTaskAnswer(options.protocol, runner, input, call, gone, logOf));
}

/**
 * `send` for an answer that comes from the version watch's timer or tick: a
 * failure is logged and the response destroyed, as serve's own failures
 * are, and never thrown back into the watch.
 */
function safely(
  send: (answer: FetchTaskAnswer) => void,
  res: ServerResponse,
  logger: FastifyBaseLogger,
): (answer: FetchTaskAnswer) => void {
  return (answer) => {
    try {
      send(answer);
    } catch (error) {
      logger.error({ err: error, rpc: 'FetchTask' }, 'runner RPC failed');
      if (!res.headersSent) res.destroy();
    }
  };
}

/**
 * The server's request listener: serves a FetchTask as connect-go sends it,
 * and hands every other request to `next` (Fastify's listener).
 */
export function fetchTaskFront(options: FetchTaskFrontOptions, next: NextListener): NextListener {
  return function serveFetchTaskFirst(req, res) {
    if (req.url !== FETCH_TASK_PATH || options.passAll()) return next(req, res);
    const call = plainCall(req, options.maxBytes);
    if (call === undefined || call.length === null) return next(req, res);
    serve(req, res, call, call.length, options, next).catch((error: unknown) => {
      options.logger.error({ err: error, rpc: 'FetchTask' }, 'runner RPC failed');
      if (!res.headersSent) res.destroy();
    });
  };
}
