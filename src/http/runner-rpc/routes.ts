// The Connect services runners call, under /api/actions (Forgejo:
// routers/api/actions/{ping,runner}): binary and JSON codecs; compression as
// a connect-go handler does it: gzip is the only encoding accepted or sent
// (connect-go registers gzip alone by default, handler.go newHandlerConfig),
// answers gzip-compressed from COMPRESS_MIN_BYTES on (Forgejo's
// connect.WithCompressMinBytes(1024) is lower: gzip-answers.ts says why)
// when the runner accepts gzip, identity otherwise, whatever else its Accept-Encoding lists. Runner authentication
// and each method's body limit come before the body is read
// (request-gate.ts). Handlers only translate between protocol messages and
// the services.
import { fastifyConnectPlugin } from '@connectrpc/connect-fastify';
import type { ConnectRouter, HandlerContext, Interceptor, MethodImpl, ServiceImpl } from '@connectrpc/connect';
import type { DescMethod } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { codeToHttpStatus, errorToJsonBytes } from '@connectrpc/connect/protocol-connect';
import type { FastifyError, FastifyInstance } from 'fastify';
import { PingService } from '../../gen/ping/v1/services_pb.ts';
import { RunnerService } from '../../gen/runner/v1/services_pb.ts';
import type { Services } from '../../services/index.ts';
import { truncateUtf8 } from '../../services/actions/runners.ts';
import { REQUEST_KEY_HEADER, runnerOf } from './auth.ts';
import { toConnectError } from './errors.ts';
import { fetchTask, maxWaitOf, usableRequestKey } from './fetch-task.ts';
import { fetchTaskDirect } from './fetch-task-direct.ts';
import { COMPRESS_MIN_BYTES, gzipAnswers } from './gzip-answers.ts';
import { refuseNulStrings } from './nul-strings.ts';
import { gateRequests } from './request-gate.ts';
import { bufferedLimitOf, streamedLogLimit } from './request-limits.ts';
import { fromProtoLogRequest, toNumber, toProtoRunner, toProtoTask } from './mapping.ts';
import { updateLogFromStream, updateLogResponse } from './update-log-stream.ts';
import { updateTask } from './update-task.ts';

export interface RunnerRpcOptions {
  /** GANTRY_ACTIONS_LOG_MAX_REQUEST_SIZE: the largest streamed UpdateLog, after decompression. */
  logRequestMaxBytes: number;
}

function requestKeyOf(ctx: HandlerContext): string | undefined {
  return usableRequestKey(ctx.requestHeader.get(REQUEST_KEY_HEADER));
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
      if (req.token === '' || req.name === '')
        throw new ConnectError('missing runner token, name', Code.InvalidArgument);
      const found = await services.runners.findActiveRegistrationToken(req.token);
      if (found === null) throw new ConnectError('runner registration token not found', Code.InvalidArgument);
      if (found === 'inactive')
        throw new ConnectError(
          'runner registration token has been invalidated, please use the latest one',
          Code.InvalidArgument,
        );
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
      return fetchTask(protocol, runnerOf(ctx), req, {
        timeoutMs: ctx.timeoutMs(),
        requestKey: requestKeyOf(ctx),
        signal: ctx.signal,
      });
    },

    async fetchSingleTask(req, ctx) {
      const handle = req.handle === undefined || req.handle === '' ? undefined : req.handle;
      const result = await protocol.fetchTasks(runnerOf(ctx), {
        tasksVersion: toNumber(req.tasksVersion),
        capacity: 1,
        handle,
        requestKey: requestKeyOf(ctx),
        signal: ctx.signal,
        maxWaitMs: maxWaitOf(ctx.timeoutMs()),
      });
      const task = result.tasks[0];
      return { task: task === undefined ? undefined : toProtoTask(task), tasksVersion: BigInt(result.tasksVersion) };
    },

    async updateTask(req, ctx) {
      return updateTask(services.taskReports, runnerOf(ctx), req);
    },

    async updateLog(req, ctx) {
      const result = await services.taskReports.updateLog(runnerOf(ctx), fromProtoLogRequest(req));
      return { ackIndex: BigInt(result.ackIndex) };
    },
  };
}

export async function runnerRpcRoutes(
  app: FastifyInstance,
  services: Services,
  options: RunnerRpcOptions,
): Promise<void> {
  // Connect reads the bodies itself: drop the API's parsers (JSON, forms, the
  // 415 catch-all) in this context only, so the plugin can register its own.
  app.removeAllContentTypeParsers();
  // What Fastify refuses before Connect sees the request (a content type no
  // parser takes) is answered as a Connect error, not in the REST API's shape.
  app.setErrorHandler(async (error: FastifyError, req, reply) => {
    const refused =
      error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : null;
    const connectError =
      refused !== null
        ? new ConnectError(error.message, codeOfRefusal(refused))
        : toConnectError(error, req.log, req.url);
    const status = refused ?? codeToHttpStatus(connectError.code);
    return reply
      .status(status)
      .type('application/json')
      .send(Buffer.from(errorToJsonBytes(connectError, {})));
  });
  // An idle fleet's FetchTask calls skip the Connect machinery (fetch-task-direct.ts).
  app.addHook(
    'preHandler',
    fetchTaskDirect(
      services.runnerProtocol,
      bufferedLimitOf(RunnerService.method.fetchTask, options.logRequestMaxBytes).maxBytes,
    ),
  );
  // A closing server ends the long polls at once instead of holding shutdown for their bound.
  app.addHook('preClose', async () => services.runnerProtocol.interruptWaits());
  const log = app.log;
  const mapErrors: Interceptor = (next) => async (req) => {
    try {
      return await next(req);
    } catch (error) {
      throw toConnectError(error, log, req.method.name);
    }
  };
  await app.register(fastifyConnectPlugin, {
    acceptCompression: [gzipAnswers],
    compressMinBytes: COMPRESS_MIN_BYTES,
    // The first interceptor is the outermost: every failure is mapped once.
    interceptors: [mapErrors, refuseNulStrings],
    routes: (router: ConnectRouter) => {
      // One registration per method: each has its own body limit (Connect's readMaxBytes, and the gate's).
      const limitOf = (method: DescMethod) => ({
        readMaxBytes: bufferedLimitOf(method, options.logRequestMaxBytes).maxBytes,
      });
      router.rpc(PingService.method.ping, (req) => ({ data: `Hello, ${req.data}!` }), limitOf(PingService.method.ping));
      const runnerImpl = runnerService(services);
      for (const method of RunnerService.methods) {
        router.rpc(
          method,
          runnerImpl[method.localName as keyof typeof runnerImpl] as MethodImpl<DescMethod>,
          limitOf(method),
        );
      }
      // The plugin mounts router.handlers once this returns: each passes the gate first.
      const gated = router.handlers.map((handler) =>
        gateRequests(handler, {
          protocol: services.runnerProtocol,
          limit: bufferedLimitOf(handler.method, options.logRequestMaxBytes),
          onError: (error) => toConnectError(error, log, handler.method.name),
          ...(handler.method.name === 'UpdateLog'
            ? {
                stream: {
                  limit: streamedLogLimit(options.logRequestMaxBytes),
                  serve: async (runner, body) =>
                    updateLogResponse(await updateLogFromStream(services.taskReports, runner, body)),
                },
              }
            : {}),
        }),
      );
      router.handlers.splice(0, router.handlers.length, ...gated);
    },
  });
}
