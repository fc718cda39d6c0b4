// UpdateTask and UpdateLog as forgejo-runner and act_runner send them
// (connect-go: binary, a Content-Length body), served by the HTTP server's
// request listener before Fastify sees the request, as fetch-task-front.ts
// serves FetchTask. A busy fleet reports every job it runs (forgejo-runner's
// reporter sends UpdateLog and UpdateTask when a job starts, every second
// while it runs and when it ends), and on that path Fastify's per-request
// work and the Connect machinery (web Headers, abort signals, async
// iterables, protocol negotiation) cost more than the report's own JSON. This
// path answers exactly as the Connect route does (routes.ts, request-gate.ts),
// with the same code for the work itself:
//   - authentication from the headers before the body is read (a report
//     makes the runner `active`), the runner RPCs' error mapping (errors.ts);
//   - an undecodable body is invalid_argument ("cannot decode the request as
//     …"), a NUL in a stored string is refused (nul-strings.ts);
//   - UpdateTask through update-task.ts, UpdateLog through
//     update-log-stream.ts (the rows stored as the streamed path stores them);
//   - answers gzip-compressed from 16 KiB on when the runner accepts gzip;
//   - what Fastify's hooks do: X-Request-Id, the body's transfer deadline,
//     the metrics by route and, when info lines are on, the request line
//     request-log.ts writes ("request completed").
// Everything else goes on to Fastify untouched and is answered or refused
// there as before: another shape (JSON, gzip bodies, a chunked body, a
// Connect-Timeout-Ms deadline), a body over UpdateTask's limit or over
// FRONT_LOG_MAX_BYTES for UpdateLog (streamed into the log in batches there),
// credentials that name no runner, any call while rate limits are on, while
// the server is closing, or, with info lines on, behind a trusted proxy
// (whose client address only Fastify resolves).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { codeToHttpStatus, errorToJsonBytes } from '@connectrpc/connect/protocol-connect';
import type { FastifyBaseLogger } from 'fastify';
import {
  UpdateLogResponseSchema,
  UpdateTaskRequestSchema,
  UpdateTaskResponseSchema,
} from '../../gen/runner/v1/messages_pb.ts';
import type { UpdateTaskRequest } from '../../gen/runner/v1/messages_pb.ts';
import { RunnerService } from '../../gen/runner/v1/services_pb.ts';
import type { Runner } from '../../models/runners.ts';
import { AppError } from '../../modules/errors.ts';
import type { RunnerProtocolService } from '../../services/actions/runner-protocol.ts';
import type { TaskReportService } from '../../services/actions/task-reports.ts';
import { requestIdOf } from '../request-id.ts';
import { TOKEN_HEADER, UUID_HEADER } from './auth.ts';
import { toConnectError } from './errors.ts';
import { acceptsGzip } from './fetch-task-direct.ts';
import type { BodyReadOptions, NextListener } from './fetch-task-front.ts';
import { readBody, sendFrontAnswer } from './fetch-task-front.ts';
import { COMPRESS_MIN_BYTES, gzipAnswers } from './gzip-answers.ts';
import { fieldWithNul } from './nul-strings.ts';
import { updateLogFromStream } from './update-log-stream.ts';
import { updateTask } from './update-task.ts';

const SERVICE_PATH = `/api/actions/${RunnerService.typeName}/`;
export const UPDATE_TASK_PATH = `${SERVICE_PATH}${RunnerService.method.updateTask.name}`;
export const UPDATE_LOG_PATH = `${SERVICE_PATH}${RunnerService.method.updateLog.name}`;
/** An UpdateLog body up to this size is read whole here; a larger one is streamed into the log by the Connect route. */
const FRONT_LOG_MAX_BYTES = 1024 * 1024;

type ReportMethod = 'UpdateTask' | 'UpdateLog';

export interface ReportFrontOptions extends BodyReadOptions {
  protocol: RunnerProtocolService;
  reports: TaskReportService;
  /** UpdateTask's body limit (request-limits.ts). */
  updateTaskMaxBytes: number;
  /** A streamed UpdateLog's limit (GANTRY_ACTIONS_LOG_MAX_REQUEST_SIZE). */
  updateLogMaxBytes: number;
  /** Counts and times one answered call (metrics.ts's onResponse), or null when metrics are off. */
  observe: ((method: string, route: string, status: number, seconds: number) => void) | null;
  /** The logger's isLevelEnabled: request lines are written only at the levels request-log.ts writes them. */
  isLevelEnabled(level: 'debug' | 'info'): boolean;
  /** true: every call goes to Fastify (rate limits on, the server closing, a proxy's client address to log). */
  passAll(): boolean;
}

interface ReportCall {
  method: ReportMethod;
  path: string;
  length: number;
  uuid: string;
  token: string;
  acceptEncoding: string | undefined;
}

interface ReportAnswer {
  status: number;
  contentType: 'application/proto' | 'application/json';
  gzip: boolean;
  body: Uint8Array;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** The call, when its head has the shape this path serves; undefined otherwise. */
function reportCall(req: IncomingMessage, options: ReportFrontOptions): ReportCall | undefined {
  const method: ReportMethod | undefined =
    req.url === UPDATE_TASK_PATH ? 'UpdateTask' : req.url === UPDATE_LOG_PATH ? 'UpdateLog' : undefined;
  if (method === undefined || req.method !== 'POST') return undefined;
  if (header(req, 'content-type') !== 'application/proto') return undefined;
  const encoding = header(req, 'content-encoding');
  if (encoding !== undefined && encoding !== 'identity') return undefined;
  const version = header(req, 'connect-protocol-version');
  if (version !== undefined && version !== '1') return undefined;
  if (req.headers['connect-timeout-ms'] !== undefined) return undefined;
  const declared = header(req, 'content-length');
  if (declared === undefined) return undefined;
  const length = Number(declared);
  const maxBytes =
    method === 'UpdateTask' ? options.updateTaskMaxBytes : Math.min(options.updateLogMaxBytes, FRONT_LOG_MAX_BYTES);
  if (!Number.isSafeInteger(length) || length < 0 || length > maxBytes) return undefined;
  const uuid = header(req, UUID_HEADER);
  const token = header(req, TOKEN_HEADER);
  if (uuid === undefined || token === undefined) return undefined;
  return { method, path: req.url as string, length, uuid, token, acceptEncoding: header(req, 'accept-encoding') };
}

function errorAnswer(error: unknown, method: ReportMethod, logOf: () => FastifyBaseLogger): ReportAnswer {
  const connectError = error instanceof ConnectError ? error : toConnectError(error, logOf(), method);
  return {
    status: codeToHttpStatus(connectError.code),
    contentType: 'application/json',
    gzip: false,
    body: errorToJsonBytes(connectError, {}),
  };
}

/** As request-gate.ts words a body it cannot decode. */
function undecodableAs(typeName: string, error: unknown): ConnectError {
  return new ConnectError(
    `cannot decode the request as ${typeName}: ${(error as Error).message}`,
    Code.InvalidArgument,
  );
}

async function updateTaskBytes(reports: TaskReportService, runner: Runner, body: Uint8Array): Promise<Uint8Array> {
  let input: UpdateTaskRequest;
  try {
    input = fromBinary(UpdateTaskRequestSchema, body);
  } catch (error) {
    throw undecodableAs(UpdateTaskRequestSchema.typeName, error);
  }
  const field = fieldWithNul(UpdateTaskRequestSchema, input as unknown as Record<string, unknown>);
  if (field !== null) throw AppError.invalid(`${field} must not contain NUL characters`);
  const answer = await updateTask(reports, runner, input);
  return toBinary(UpdateTaskResponseSchema, create(UpdateTaskResponseSchema, answer));
}

/** The body as the Connect route's stream would give it: its bytes in one chunk, none when empty. */
async function* oneChunk(body: Uint8Array): AsyncGenerator<Uint8Array, void, undefined> {
  if (body.byteLength > 0) yield body;
}

async function updateLogBytes(reports: TaskReportService, runner: Runner, body: Uint8Array): Promise<Uint8Array> {
  // The body is whole and under the streamed limit, so the answer is always `complete`.
  const answer = await updateLogFromStream(reports, runner, oneChunk(body));
  return toBinary(UpdateLogResponseSchema, create(UpdateLogResponseSchema, { ackIndex: BigInt(answer.ackIndex) }));
}

async function reportAnswer(
  options: ReportFrontOptions,
  runner: Runner,
  call: ReportCall,
  body: Uint8Array | ConnectError,
  logOf: () => FastifyBaseLogger,
): Promise<ReportAnswer> {
  if (body instanceof ConnectError) return errorAnswer(body, call.method, logOf);
  try {
    let bytes =
      call.method === 'UpdateTask'
        ? await updateTaskBytes(options.reports, runner, body)
        : await updateLogBytes(options.reports, runner, body);
    const gzip = bytes.byteLength >= COMPRESS_MIN_BYTES && acceptsGzip(call.acceptEncoding);
    if (gzip) bytes = await gzipAnswers.compress(bytes);
    return { status: 200, contentType: 'application/proto', gzip, body: bytes };
  } catch (error) {
    return errorAnswer(error, call.method, logOf);
  }
}

async function serve(
  req: IncomingMessage,
  res: ServerResponse,
  call: ReportCall,
  options: ReportFrontOptions,
  next: NextListener,
): Promise<void> {
  const started = performance.now();
  let runner: Runner | null;
  try {
    runner = await options.protocol.authenticate(call.uuid, call.token, true, req.socket);
  } catch {
    runner = null; // The Connect path authenticates again and reports the failure.
  }
  // Unknown credentials: the Connect path refuses them (the body still unread).
  if (runner === null) return next(req, res);
  const requestId = requestIdOf(req);
  let log: FastifyBaseLogger | undefined;
  const logOf = (): FastifyBaseLogger => (log ??= options.logger.child({ reqId: requestId }));
  // request-log.ts's lines; `req` goes through the logger's request serializer.
  if (options.isLevelEnabled('debug')) logOf().debug({ req }, 'incoming request');
  const body = await readBody(req, call.length, options);
  if (body === null) return; // The connection is gone.
  const answer = await reportAnswer(options, runner, call, body, logOf);
  if (res.destroyed) return;
  const { observe } = options;
  const logged = options.isLevelEnabled('info');
  if (observe !== null || logged)
    res.once('finish', () => {
      const elapsedMs = performance.now() - started;
      observe?.('POST', call.path, answer.status, elapsedMs / 1000);
      if (logged)
        logOf().info({ req, res: { statusCode: answer.status }, responseTime: elapsedMs }, 'request completed');
    });
  sendFrontAnswer(res, requestId, answer);
}

/**
 * The server's request listener: serves UpdateTask and UpdateLog as
 * connect-go sends them, and hands every other request to `next`.
 */
export function reportFront(options: ReportFrontOptions, next: NextListener): NextListener {
  return function serveReportsFirst(req, res) {
    if ((req.url !== UPDATE_TASK_PATH && req.url !== UPDATE_LOG_PATH) || options.passAll()) return next(req, res);
    const call = reportCall(req, options);
    if (call === undefined) return next(req, res);
    serve(req, res, call, options, next).catch((error: unknown) => {
      options.logger.error({ err: error, rpc: call.method }, 'runner RPC failed');
      if (!res.headersSent) res.destroy();
    });
  };
}
