// FetchTask without the Connect machinery, for the calls that make up an idle
// fleet's traffic: forgejo-runner and act_runner (connect-go) ask every few
// seconds with a small binary body, and on a fleet of thousands the
// per-call cost of the generic path (web Headers, abort controllers and their
// DOMExceptions, async iterables, protocol negotiation) was most of Gantry's
// idle CPU. This path serves exactly that shape of call and answers as the
// Connect handler does (status, content type, gzip from 1 KiB on when the
// runner accepts it, errors as Connect JSON, a body over the method's limit
// refused unread past it); anything else — JSON or compressed bodies, other
// protocol versions, an unusable deadline, a caller the credentials do not
// name — goes on to the Connect handler untouched, which answers or refuses
// it as before. The body may come with a length or chunked (connect-es sends
// chunked).
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { codeToHttpStatus, errorToJsonBytes } from '@connectrpc/connect/protocol-connect';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { FetchTaskRequestSchema, FetchTaskResponseSchema } from '../../gen/runner/v1/messages_pb.ts';
import type { FetchTaskRequest } from '../../gen/runner/v1/messages_pb.ts';
import { RunnerService } from '../../gen/runner/v1/services_pb.ts';
import type { Runner } from '../../models/runners.ts';
import type { RunnerProtocolService } from '../../services/actions/runner-protocol.ts';
import { REQUEST_KEY_HEADER, TOKEN_HEADER, UUID_HEADER } from './auth.ts';
import { toConnectError } from './errors.ts';
import { fetchTask, usableRequestKey } from './fetch-task.ts';
import { gzipAnswers } from './gzip-answers.ts';
import { BodyLimitError, bounded, readAll } from './request-body.ts';

/** Where the Connect plugin mounts FetchTask (under the /api/actions prefix). */
export const FETCH_TASK_PATH = `/api/actions/${RunnerService.typeName}/${RunnerService.method.fetchTask.name}`;
/** Answers from this size on are gzip-compressed for a runner that accepts gzip (routes.ts: compressMinBytes). */
const COMPRESS_MIN_BYTES = 1024;
/** The abort reason of a call whose runner hung up (a shared value: no error object per call). */
const CLIENT_GONE = Object.freeze({ reason: 'the runner closed the connection' });
const CONNECT_TIMEOUT = /^\d{1,10}$/;

function header(req: FastifyRequest, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** Connect's negotiation: gzip when it is one of the names the runner lists. */
function acceptsGzip(accept: string | undefined): boolean {
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

interface DirectCall {
  runner: Runner;
  /** null: chunked. */
  length: number | null;
  timeoutMs: number | undefined;
}

/** The call, when it has the shape this path serves and its credentials name a runner; undefined otherwise. */
async function directCall(
  req: FastifyRequest,
  protocol: RunnerProtocolService,
  maxBytes: number,
): Promise<DirectCall | undefined> {
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
  let runner: Runner | null;
  try {
    runner = await protocol.authenticate(uuid, token, false);
  } catch {
    return undefined; // The Connect path authenticates again and reports the failure.
  }
  if (runner === null) return undefined;
  return { runner, length, timeoutMs: timeout === undefined ? undefined : Number(timeout) };
}

/**
 * A preHandler for the runner RPC routes: serves a plain binary FetchTask
 * itself and ends the request; leaves every other request to its route.
 */
export function fetchTaskDirect(protocol: RunnerProtocolService, maxBytes: number) {
  return async function serveFetchTaskDirectly(req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    const call = await directCall(req, protocol, maxBytes);
    if (call === undefined) return undefined;
    const sendError = (error: unknown): FastifyReply => {
      const connectError = toConnectError(error, req.log, 'FetchTask');
      return reply
        .code(codeToHttpStatus(connectError.code))
        .type('application/json')
        .send(Buffer.from(errorToJsonBytes(connectError, {})));
    };
    let input: FetchTaskRequest;
    try {
      input = fromBinary(FetchTaskRequestSchema, await readBody(req, call.length, maxBytes));
    } catch (error) {
      // The rest of the body stays unread: the connection cannot carry another request.
      if (error instanceof BodyLimitError) {
        reply.header('connection', 'close');
        return sendError(error);
      }
      return sendError(
        new ConnectError(
          `cannot decode the request as ${FetchTaskRequestSchema.typeName}: ${(error as Error).message}`,
          Code.InvalidArgument,
        ),
      );
    }
    const controller = new AbortController();
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) controller.abort(CLIENT_GONE);
    });
    try {
      const answer = await fetchTask(protocol, call.runner, input, {
        timeoutMs: call.timeoutMs,
        requestKey: usableRequestKey(header(req, REQUEST_KEY_HEADER)),
        signal: controller.signal,
      });
      let body = toBinary(FetchTaskResponseSchema, create(FetchTaskResponseSchema, answer));
      reply.code(200).type('application/proto');
      if (body.byteLength >= COMPRESS_MIN_BYTES && acceptsGzip(header(req, 'accept-encoding'))) {
        body = await gzipAnswers.compress(body);
        reply.header('content-encoding', 'gzip');
      }
      return reply.send(Buffer.from(body.buffer, body.byteOffset, body.byteLength));
    } catch (error) {
      return sendError(error);
    }
  };
}
