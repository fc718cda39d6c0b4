// The Connect services runners call, under /api/actions (Forgejo:
// routers/api/actions/{ping,runner}): binary and JSON codecs, gzip answers from
// 1 KiB on (connect.WithCompressMinBytes(1024)), runner authentication on
// everything but Ping and Register. Handlers only translate between protocol
// messages and the services.
import { fastifyConnectPlugin } from '@connectrpc/connect-fastify';
import type { ConnectRouter, HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { Code, ConnectError } from '@connectrpc/connect';
import { codeToHttpStatus, errorToJsonBytes } from '@connectrpc/connect/protocol-connect';
import type { FastifyError, FastifyInstance } from 'fastify';
import { PingService } from '../../gen/ping/v1/services_pb.ts';
import type { Result } from '../../gen/runner/v1/messages_pb.ts';
import { RunnerService } from '../../gen/runner/v1/services_pb.ts';
import type { Services } from '../../services/index.ts';
import { truncateUtf8 } from '../../services/actions/runners.ts';
import { REQUEST_KEY_HEADER, runnerAuthInterceptor, runnerOf } from './auth.ts';
import { toConnectError } from './errors.ts';
import { refuseNulStrings } from './nul-strings.ts';
import { decodeRequestsFirst } from './request-decoding.ts';
import { fromProtoLogRequest, fromProtoTaskState, toNumber, toProtoRunner, toProtoTask } from './mapping.ts';

/** Runners send whole log batches; larger bodies are refused before they are read whole. */
const MAX_REQUEST_BYTES = 32 * 1024 * 1024;
/** Answer a little before the caller's Connect deadline rather than after it. */
const DEADLINE_MARGIN_MS = 1000;

/** Forgejo's FetchTask answers an unusable key like no key; only a well-formed one is used. */
function requestKeyOf(ctx: HandlerContext): string | undefined {
  const key = ctx.requestHeader.get(REQUEST_KEY_HEADER)?.trim();
  return key === undefined || key === '' || key.length > 64 ? undefined : key;
}

/**
 * How long a FetchTask may wait for work: the client's deadline less a margin
 * for claiming and answering (at least DEADLINE_MARGIN_MS, a third of the
 * deadline when that is more), so a busy server still answers "no task"
 * before the runner gives up on the call.
 */
function maxWaitOf(ctx: HandlerContext): number | undefined {
  const timeout = ctx.timeoutMs();
  return timeout === undefined ? undefined : Math.max(0, timeout - Math.max(DEADLINE_MARGIN_MS, Math.ceil(timeout / 3)));
}

/** The Connect code of a request Fastify refused (415 content type, 413 size, 400 framing). */
function codeOfRefusal(status: number): Code {
  if (status === 413 || status === 429) return Code.ResourceExhausted;
  if (status === 401) return Code.Unauthenticated;
  if (status === 403) return Code.PermissionDenied;
  return Code.InvalidArgument;
}

function runnerService(services: Services): ServiceImpl<typeof RunnerService> {
  const protocol = services.runnerProtocol;
  return {
    async register(req) {
      if (req.token === '' || req.name === '') throw new ConnectError('missing runner token, name', Code.InvalidArgument);
      const found = await services.runners.findActiveRegistrationToken(req.token);
      if (found === null) throw new ConnectError('runner registration token not found', Code.InvalidArgument);
      if (found === 'inactive') throw new ConnectError('runner registration token has been invalidated, please use the latest one', Code.InvalidArgument);
      // act_runner before 0.2 sent labels as agent_labels only.
      const labels = req.labels.length > 0 ? req.labels : req.agentLabels;
      const { runner, token } = await services.runners.registerRunner(found.scope, {
        name: truncateUtf8(req.name, 255),
        version: req.version,
        labels,
        ephemeral: req.ephemeral,
      });
      return { runner: toProtoRunner(runner, token) };
    },

    async declare(req, ctx) {
      const runner = await protocol.declare(runnerOf(ctx), req.version, req.labels);
      return { runner: toProtoRunner(runner) };
    },

    async fetchTask(req, ctx) {
      const result = await protocol.fetchTasks(runnerOf(ctx), {
        tasksVersion: toNumber(req.tasksVersion),
        ...(req.taskCapacity !== undefined ? { capacity: toNumber(req.taskCapacity) } : {}),
        requestKey: requestKeyOf(ctx),
        signal: ctx.signal,
        maxWaitMs: maxWaitOf(ctx),
      });
      const [first, ...rest] = result.tasks.map(toProtoTask);
      return { task: first, additionalTasks: rest, tasksVersion: BigInt(result.tasksVersion) };
    },

    async fetchSingleTask(req, ctx) {
      const handle = req.handle === undefined || req.handle === '' ? undefined : req.handle;
      const result = await protocol.fetchTasks(runnerOf(ctx), {
        tasksVersion: toNumber(req.tasksVersion),
        capacity: 1,
        handle,
        requestKey: requestKeyOf(ctx),
        signal: ctx.signal,
        maxWaitMs: maxWaitOf(ctx),
      });
      const task = result.tasks[0];
      return { task: task === undefined ? undefined : toProtoTask(task), tasksVersion: BigInt(result.tasksVersion) };
    },

    async updateTask(req, ctx) {
      const state = fromProtoTaskState(req.state);
      const result = await services.taskReports.updateTask(runnerOf(ctx), state, req.outputs);
      return { state: { id: BigInt(state.id), result: result.result as Result }, sentOutputs: result.sentOutputs };
    },

    async updateLog(req, ctx) {
      const result = await services.taskReports.updateLog(runnerOf(ctx), fromProtoLogRequest(req));
      return { ackIndex: BigInt(result.ackIndex) };
    },
  };
}

export async function runnerRpcRoutes(app: FastifyInstance, services: Services): Promise<void> {
  // Connect reads the bodies itself: drop the API's parsers (JSON, forms, the
  // 415 catch-all) in this context only, so the plugin can register its own.
  app.removeAllContentTypeParsers();
  // What Fastify refuses before Connect sees the request (a content type no
  // parser takes) is answered as a Connect error, not in the REST API's shape.
  app.setErrorHandler(async (error: FastifyError, req, reply) => {
    const refused = error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : null;
    const connectError = refused !== null ? new ConnectError(error.message, codeOfRefusal(refused)) : toConnectError(error, req.log, req.url);
    const status = refused ?? codeToHttpStatus(connectError.code);
    return reply.status(status).type('application/json').send(Buffer.from(errorToJsonBytes(connectError, {})));
  });
  // A closing server ends the long polls at once instead of holding shutdown for their bound.
  app.addHook('preClose', async () => services.runnerProtocol.interruptWaits());
  const log = app.log;
  await app.register(fastifyConnectPlugin, {
    compressMinBytes: 1024,
    readMaxBytes: MAX_REQUEST_BYTES,
    // The first interceptor is the outermost: every failure, authentication's included, is mapped once.
    interceptors: [
      (next) => async (req) => {
        try {
          return await next(req);
        } catch (error) {
          throw toConnectError(error, log, req.method.name);
        }
      },
      refuseNulStrings,
      runnerAuthInterceptor(services.runnerProtocol),
    ],
    routes: (router: ConnectRouter) => {
      router.service(PingService, { ping: (req) => ({ data: `Hello, ${req.data}!` }) });
      router.service(RunnerService, runnerService(services));
      // The plugin mounts router.handlers once this returns: each decodes its body first.
      router.handlers.splice(0, router.handlers.length, ...router.handlers.map((handler) => decodeRequestsFirst(handler, MAX_REQUEST_BYTES)));
    },
  });
}
