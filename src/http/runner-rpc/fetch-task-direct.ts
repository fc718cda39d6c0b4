// FetchTask without the Connect machinery, for the calls that make up an idle
// fleet's traffic: forgejo-runner and act_runner (connect-go) ask every few
// seconds with a small binary body, and on a fleet of thousands the
// per-call cost of the generic path (web Headers, abort controllers and their
// DOMExceptions, async iterables, protocol negotiation) was most of Gantry's
// idle CPU. This path serves exactly that shape of call and answers as the
// Connect handler does (status, content type, gzip from 16 KiB on when the
// runner accepts it, errors as Connect JSON, a body over the method's limit
// refused unread past it); anything else — JSON or compressed bodies, other
// protocol versions, an unusable deadline, a caller the credentials do not
// name — goes on to the Connect handler untouched, which answers or refuses
// it as before. The body may come with a length or chunked (connect-es sends
// chunked). The call as forgejo-runner sends it (a Content-Length body) is
// served even earlier, before Fastify (fetch-task-front.ts); this hook serves
// the rest of the plain calls (chunked bodies, and every call while rate
// limits are on). Both answer through fetchTaskAnswer.
import { fromBinary } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { codeToHttpStatus, errorToJsonBytes } from '@connectrpc/connect/protocol-connect';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { FetchTaskRequestSchema } from '../../gen/runner/v1/messages_pb.ts';
import type { IncomingHttpHeaders } from 'node:http';
import type { FetchTaskRequest } from '../../gen/runner/v1/messages_pb.ts';
import { RunnerService } from '../../gen/runner/v1/services_pb.ts';
import type { Runner } from '../../models/runners.ts';
import type { FetchTasksResult, RunnerProtocolService } from '../../services/actions/runner-protocol.ts';
import type { EndSignal } from '../../services/actions/tasks-version-watch.ts';
import { REQUEST_KEY_HEADER, TOKEN_HEADER, UUID_HEADER } from './auth.ts';
import { toConnectError } from './errors.ts';
import { fetchTaskResponseOf, fetchTasksRequestOf, usableRequestKey } from './fetch-task.ts';
import { COMPRESS_MIN_BYTES, gzipAnswers } from './gzip-answers.ts';
import { encodeFetchTaskResponse } from './task-encoding.ts';
import { BodyLimitError, bounded, readAll } from './request-body.ts';

/** Where the Connect plugin mounts FetchTask (under the /api/actions prefix). */
export const FETCH_TASK_PATH = `/api/actions/${RunnerService.typeName}/${RunnerService.method.fetchTask.name}`;

/**
 * The signal of a call whose runner may hang up, for the version watch (its
 * only listener, one wait at a time): what an AbortController did here
 * without its EventTarget, abort reason and listener bookkeeping, which on
 * an idle fleet were a visible part of every held poll.
 */
export class ClientGone implements EndSignal {
  aborted = false;
  private listener: { handleEvent(): void } | null = null;

  addEventListener(_type: 'abort', listener: { handleEvent(): void }): void {
    if (this.listener !== null && this.listener !== listener)
      throw new Error('ClientGone takes one listener at a time');
    this.listener = listener;
  }

  removeEventListener(_type: 'abort', listener: { handleEvent(): void }): void {
    if (this.listener === listener) this.listener = null;
  }

  /** The runner hung up: the listener, if any, hears it once. */
  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const listener = this.listener;
    this.listener = null;
    listener?.handleEvent();
  }
}
export const CONNECT_TIMEOUT = /^\d{1,10}$/;

function header(req: { headers: IncomingHttpHeaders }, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** Connect's negotiation: gzip when it is one of the names the runner lists. */
export function acceptsGzip(accept: string | undefined): boolean {
  return accept !== undefined && accept.split(',').some((name) => name.trim() === 'gzip');
}

/**
 * The body (a FetchTask body is a few bytes, usually none), refused with
 * BodyLimitError once more than maxBytes came; the rest is never read. The
 * stream is pulled with next() only, never ended early: that would destroy
 * the socket the answer goes out on (request-body.ts).
 */
async function readBody(req: FastifyRequest, length: number | null, maxBytes: number): Promise<Uint8Array> {
  if (length === 0) return new Uint8Array(0);
  return readAll(bounded(req.raw[Symbol.asyncIterator](), { maxBytes }));
}

/** A plain binary FetchTask, from its request head. */
export interface PlainCall {
  /** null: chunked. */
  length: number | null;
  timeoutMs: number | undefined;
  uuid: string;
  token: string;
  requestKey: string | undefined;
  acceptEncoding: string | undefined;
}

/** The call, when its head has the shape the direct paths serve; undefined otherwise. */
export function plainCall(
  req: { method?: string; url?: string; headers: IncomingHttpHeaders },
  maxBytes: number,
): PlainCall | undefined {
  if (req.method !== 'POST' || req.url !== FETCH_TASK_PATH) return undefined;
  if (header(req, 'content-type') !== 'application/proto') return undefined;
  const encoding = header(req, 'content-encoding');
  if (encoding !== undefined && encoding !== 'identity') return undefined;
  const version = header(req, 'connect-protocol-version');
  if (version !== undefined && version !== '1') return undefined;
  const declared = header(req, 'content-length');
  const length = declared === undefined ? null : Number(declared);
  if (length === null ? header(req, 'transfer-encoding') !== 'chunked' : !Number.isSafeInteger(length) || length < 0)
    return undefined;
  if (length !== null && length > maxBytes) return undefined;
  const timeout = header(req, 'connect-timeout-ms');
  if (timeout !== undefined && !CONNECT_TIMEOUT.test(timeout)) return undefined;
  const uuid = header(req, UUID_HEADER);
  const token = header(req, TOKEN_HEADER);
  if (uuid === undefined || token === undefined) return undefined;
  return {
    length,
    timeoutMs: timeout === undefined ? undefined : Number(timeout),
    uuid,
    token,
    requestKey: usableRequestKey(header(req, REQUEST_KEY_HEADER)),
    acceptEncoding: header(req, 'accept-encoding'),
  };
}

/** The runner the call's credentials name; null when they name none (the Connect path then refuses the call). */
export async function plainCallRunner(
  protocol: RunnerProtocolService,
  call: PlainCall,
  /** The connection the call came on (its token is hashed once per connection and cache entry). */
  connection: object,
): Promise<Runner | null> {
  try {
    return await protocol.authenticate(call.uuid, call.token, false, connection);
  } catch {
    return null; // The Connect path authenticates again and reports the failure.
  }
}

export interface FetchTaskAnswer {
  status: number;
  contentType: 'application/proto' | 'application/json';
  /** The body is gzip-compressed (Content-Encoding: gzip). */
  gzip: boolean;
  body: Buffer;
}

/**
 * FetchTaskResponse{tasks_version} with no task, as toBinary writes it (field
 * 2 as a varint, left out when 0): most of an idle fleet's answers, encoded
 * without building a message.
 */
export function noTaskAnswer(tasksVersion: bigint): Uint8Array {
  if (tasksVersion === 0n) return new Uint8Array(0);
  const bytes = [0x10];
  let rest = BigInt.asUintN(64, tasksVersion);
  while (rest >= 0x80n) {
    bytes.push(Number(rest & 0x7fn) | 0x80);
    rest >>= 7n;
  }
  bytes.push(Number(rest));
  return Uint8Array.from(bytes);
}

/** The last no-task answer encoded, shared by the answers at that version (a Buffer is never written to once sent). */
let lastNoTask: { version: bigint; body: Buffer } = { version: 0n, body: Buffer.alloc(0) };

/** noTaskAnswer as a Buffer, encoded once per version: an idle fleet's answers are all at its scopes' few versions. */
function noTaskBody(tasksVersion: bigint): Buffer {
  if (lastNoTask.version !== tasksVersion) {
    const bytes = noTaskAnswer(tasksVersion);
    lastNoTask = { version: tasksVersion, body: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) };
  }
  return lastNoTask.body;
}

/** A body that is not a FetchTaskRequest (or could not be read whole): invalid_argument. */
export function undecodable(error: unknown): ConnectError {
  return new ConnectError(
    `cannot decode the request as ${FetchTaskRequestSchema.typeName}: ${(error as Error).message}`,
    Code.InvalidArgument,
  );
}

function errorAnswer(error: unknown, logOf: () => FastifyBaseLogger): FetchTaskAnswer {
  const connectError = toConnectError(error, logOf(), 'FetchTask');
  return {
    status: codeToHttpStatus(connectError.code),
    contentType: 'application/json',
    gzip: false,
    body: Buffer.from(errorToJsonBytes(connectError, {})),
  };
}

/** The FetchTaskRequest in a body, or the Connect error (invalid_argument) that answers it. */
export function decodeFetchTask(body: Uint8Array | ConnectError): FetchTaskRequest | ConnectError {
  if (body instanceof ConnectError) return body;
  try {
    return fromBinary(FetchTaskRequestSchema, body);
  } catch (error) {
    return undecodable(error);
  }
}

/** The answer to what the service found: no task in the bytes shared per version, tasks encoded (and maybe gzipped). */
async function answerOf(result: FetchTasksResult, call: PlainCall): Promise<FetchTaskAnswer> {
  const answer = fetchTaskResponseOf(result);
  if (answer.task === undefined && answer.additionalTasks.length === 0)
    return { status: 200, contentType: 'application/proto', gzip: false, body: noTaskBody(answer.tasksVersion) };
  let bytes = encodeFetchTaskResponse(answer);
  const gzip = bytes.byteLength >= COMPRESS_MIN_BYTES && acceptsGzip(call.acceptEncoding);
  if (gzip) bytes = await gzipAnswers.compress(bytes);
  return {
    status: 200,
    contentType: 'application/proto',
    gzip,
    body: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
  };
}

/**
 * The answer to a plain binary FetchTask whose runner is known, as the
 * Connect handler gives it: the task (or none) gzipped from 16 KiB on when the
 * runner accepts gzip, or the Connect error (an undecodable body is
 * invalid_argument); `body` is the error itself when the body could not be
 * read (BodyLimitError past its limit).
 */
export async function fetchTaskAnswer(
  protocol: RunnerProtocolService,
  runner: Runner,
  body: Uint8Array | ConnectError | FetchTaskRequest,
  call: PlainCall,
  /** Aborted when the runner hangs up. */
  signal: EndSignal,
  /** The request's logger, where a failure that is Gantry's fault is logged (asked for only then). */
  logOf: () => FastifyBaseLogger,
): Promise<FetchTaskAnswer> {
  const input = body instanceof Uint8Array ? decodeFetchTask(body) : body;
  if (input instanceof ConnectError) return errorAnswer(input, logOf);
  try {
    const request = fetchTasksRequestOf(input, {
      timeoutMs: call.timeoutMs,
      requestKey: call.requestKey,
      signal,
    });
    return await answerOf(await protocol.fetchTasks(runner, request), call);
  } catch (error) {
    return errorAnswer(error, logOf);
  }
}

/**
 * fetchTaskAnswer for a call the service holds without a suspended call
 * (RunnerProtocolService.holdIdle, an idle runner's poll): `send` gets the
 * answer once, and never throws back. False, with nothing done, when the call
 * is not such a call: the caller then calls fetchTaskAnswer.
 */
export function holdFetchTask(
  protocol: RunnerProtocolService,
  runner: Runner,
  input: FetchTaskRequest,
  call: PlainCall,
  signal: EndSignal,
  logOf: () => FastifyBaseLogger,
  send: (answer: FetchTaskAnswer) => void,
): boolean {
  const request = fetchTasksRequestOf(input, { timeoutMs: call.timeoutMs, requestKey: call.requestKey, signal });
  return protocol.holdIdle(runner, request, {
    answer(result) {
      if (result.tasks.length === 0) return send(noTaskAnswerOf(result.tasksVersion));
      answerOf(result, call).then(send, (error: unknown) => send(errorAnswer(error, logOf)));
    },
    fail(error) {
      send(errorAnswer(error, logOf));
    },
  });
}

/** The answer with no task at `tasksVersion`, without building a response message. */
function noTaskAnswerOf(tasksVersion: number): FetchTaskAnswer {
  return { status: 200, contentType: 'application/proto', gzip: false, body: noTaskBody(BigInt(tasksVersion)) };
}

/**
 * A preHandler for the runner RPC routes: serves a plain binary FetchTask
 * itself and ends the request; leaves every other request to its route.
 */
export function fetchTaskDirect(protocol: RunnerProtocolService, maxBytes: number) {
  return async function serveFetchTaskDirectly(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const call = plainCall(req, maxBytes);
    if (call === undefined) return undefined;
    const runner = await plainCallRunner(protocol, call, req.raw.socket);
    if (runner === null) return undefined;
    let body: Uint8Array | ConnectError;
    try {
      body = await readBody(req, call.length, maxBytes);
    } catch (error) {
      body = error instanceof BodyLimitError ? error : undecodable(error);
    }
    const gone = new ClientGone();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) gone.abort();
    });
    const answer = await fetchTaskAnswer(protocol, runner, body, call, gone, () => req.log);
    // The rest of an over-limit body stays unread: the connection cannot carry another request.
    if (body instanceof BodyLimitError) reply.header('connection', 'close');
    if (answer.gzip) reply.header('content-encoding', 'gzip');
    return reply.code(answer.status).type(answer.contentType).send(answer.body);
  };
}
