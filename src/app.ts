// buildApp(deps) assembles the HTTP application. It never listens: main.ts does,
// and tests either listen on port 0 or inject.
import Fastify from 'fastify';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import http from 'node:http';
import type { Deps } from './deps.ts';
import { installAuthHook } from './http/auth-hook.ts';
import { clientErrorHandler } from './http/client-errors.ts';
import { installUnreadBodyDrain } from './http/unread-bodies.ts';
import { hasNulParam, installBodyParsers, queryParameterWithNul } from './http/body-parsers.ts';
import {
  PendingCompiles,
  lazySerializerFactory,
  lazyValidator,
  trackPendingCompiles,
} from './http/lazy-schema-compilers.ts';
import { AppError } from './modules/errors.ts';
import { frameworkErrorHandler, installErrorHandlers } from './http/errors.ts';
import { installMetrics } from './http/metrics.ts';
import { installRateLimits } from './http/rate-limit.ts';
import { installRequestIdHeader, requestIdOf } from './http/request-id.ts';
import { RequestLog } from './http/request-log.ts';
import { installRequestDeadlines, useTransferDeadlines } from './http/request-deadlines.ts';
import type { RequestDeadlineLimits } from './http/request-deadlines.ts';
import { chainGuards, createGuards } from './http/guards.ts';
import { decorateRequests } from './http/request-context.ts';
import { actionsRunnerRoutes } from './http/api/v1/actions-runners.ts';
import { actionsRunRoutes } from './http/api/v1/actions-runs.ts';
import { actionsJobRoutes } from './http/api/v1/actions-jobs.ts';
import { actionsArtifactRoutes } from './http/api/v1/actions-artifacts.ts';
import { artifactTwirpRoutes } from './http/artifacts/twirp-routes.ts';
import { artifactPipelineRoutes } from './http/artifacts/pipeline-routes.ts';
import { actionsRunControlRoutes } from './http/api/v1/actions-run-control.ts';
import { actionsWorkflowRoutes } from './http/api/v1/actions-workflows.ts';
import { actionsSecretVariableRoutes } from './http/api/v1/actions-secrets-variables.ts';
import { hookDeliveryRoutes } from './http/api/v1/hook-deliveries.ts';
import { hookRoutes } from './http/api/v1/hooks.ts';
import { commitStatusRoutes } from './http/api/v1/commit-statuses.ts';
import { gitHttpRoutes } from './http/git-http.ts';
import { runnerRpcRoutes } from './http/runner-rpc/routes.ts';
import { miscRoutes } from './http/api/v1/misc.ts';
import { orgRoutes } from './http/api/v1/orgs.ts';
import { repoRoutes } from './http/api/v1/repos.ts';
import type { ApiApp, RouteContext } from './http/api/v1/route-context.ts';
import { userRoutes } from './http/api/v1/users.ts';
import { fetchTaskFront } from './http/runner-rpc/fetch-task-front.ts';
import type { NextListener } from './http/runner-rpc/fetch-task-front.ts';
import { bufferedLimitOf, streamedLogLimit } from './http/runner-rpc/request-limits.ts';
import { reportFront } from './http/runner-rpc/report-front.ts';
import { RunnerService } from './gen/runner/v1/services_pb.ts';
import { API_CACHE_CONTROL } from './http/api-cache-control.ts';
import { pageNotFoundFor, webConsole } from './http/web/index.ts';

const JSON_TYPE = 'application/json;charset=utf-8';
/** Longest path segment the router accepts (longer: 414). */
const MAX_PARAM_LENGTH = 500;

// Bodies are validated strictly (no type coercion: a number is not a string, as
// in Go's decoder); unknown keys are dropped. Query strings and path parameters
// are parsed leniently in code, as Forgejo does, so they are not validated here.
function bodyValidator(): Ajv {
  const ajv = new Ajv({
    coerceTypes: false,
    removeAdditional: true,
    useDefaults: true,
    allErrors: false,
    strict: false,
  });
  addFormats.default(ajv);
  return ajv;
}

export async function buildApp(deps: Deps): Promise<FastifyInstance> {
  const { config, services, logger } = deps;
  /** Set before Fastify closes the server: every call then goes to Fastify, which answers 503. */
  let closing = false;
  const pendingSchemas = new PendingCompiles();
  const app = Fastify({
    loggerInstance: logger as unknown as FastifyBaseLogger,
    bodyLimit: config.bodyLimitBytes,
    // X-Request-Id is read (and checked) by requestIdOf, not by Fastify as is.
    requestIdHeader: false,
    genReqId: requestIdOf,
    return503OnClosing: true,
    // Response serializers compiled on a route's first answer (lazy-schema-compilers.ts).
    schemaController: { compilersFactory: { buildSerializer: lazySerializerFactory(pendingSchemas) } },
    // One line per request, none for a runner's FetchTask (request-log.ts).
    logController: new RequestLog(),
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: MAX_PARAM_LENGTH },
    frameworkErrors: frameworkErrorHandler(config.rootUrl, MAX_PARAM_LENGTH),
    http: {
      maxHeaderSize: config.headerLimitBytes,
      // Bounds the request line and headers of every request, from its first
      // byte (or from connecting): a slow head gets 408 (client-errors.ts).
      headersTimeout: config.httpHeadersTimeoutMs,
      // Node looks for expired heads on this interval (default 30 s, which
      // would let a 20 s headersTimeout run to 50 s): a quarter of it.
      connectionsCheckingInterval: Math.min(30_000, Math.max(250, Math.floor(config.httpHeadersTimeoutMs / 4))),
    },
    // Off here: it is one value for the whole server, and git pushes and
    // runner uploads need far longer than API bodies. request-deadlines.ts
    // bounds the time to receive a request per route class instead.
    requestTimeout: 0,
    // Above a reverse proxy's upstream keepalive_timeout (nginx: 60 s in the
    // README's example), so the proxy, not Gantry, closes an idle connection
    // and never sends a request on one Gantry is closing.
    keepAliveTimeout: config.httpKeepAliveTimeoutMs,
    clientErrorHandler: clientErrorHandler(),
    // req.ip: the client X-Forwarded-For names when the peer is a trusted proxy (rate limits, logs).
    trustProxy: config.trustedProxies.length > 0 ? [...config.trustedProxies] : false,
    // The server Fastify would make from the options above (`http`,
    // keepAliveTimeout, requestTimeout: Fastify applies them only to a server
    // it makes itself), with a request listener in front of Fastify's: a
    // runner's FetchTask as connect-go sends it is served there
    // (http/runner-rpc/fetch-task-front.ts), everything else goes on to Fastify.
    serverFactory: (fastifyListener: NextListener, options) => {
      const front = fetchTaskFront(
        {
          protocol: services.runnerProtocol,
          maxBytes: bufferedLimitOf(RunnerService.method.fetchTask, config.actionsLogMaxRequestBytes).maxBytes,
          transferIdleTimeoutMs: config.httpTransferIdleTimeoutMs,
          transferTimeoutMs: config.httpTransferTimeoutMs,
          logger: logger as unknown as FastifyBaseLogger,
          observe:
            config.metricsToken !== null && deps.metrics !== null
              ? deps.metrics.observeRequest.bind(deps.metrics)
              : null,
          // Rate limits count every request in rate-limit.ts's hook; a closing server answers 503 there.
          passAll: () => closing || config.rateLimitPerIp > 0 || config.rateLimitPerToken > 0,
        },
        // UpdateTask and UpdateLog as connect-go sends them (http/runner-rpc/report-front.ts).
        reportFront(
          {
            protocol: services.runnerProtocol,
            reports: services.taskReports,
            updateTaskMaxBytes: bufferedLimitOf(RunnerService.method.updateTask, config.actionsLogMaxRequestBytes)
              .maxBytes,
            updateLogMaxBytes: streamedLogLimit(config.actionsLogMaxRequestBytes).maxBytes,
            transferIdleTimeoutMs: config.httpTransferIdleTimeoutMs,
            transferTimeoutMs: config.httpTransferTimeoutMs,
            logger: logger as unknown as FastifyBaseLogger,
            isLevelEnabled: (level) => logger.isLevelEnabled(level),
            observe:
              config.metricsToken !== null && deps.metrics !== null
                ? deps.metrics.observeRequest.bind(deps.metrics)
                : null,
            // As FetchTask's, and: the request line names the client a trusted proxy forwards for (Fastify's req.ip).
            passAll: () =>
              closing ||
              config.rateLimitPerIp > 0 ||
              config.rateLimitPerToken > 0 ||
              (config.trustedProxies.length > 0 && logger.isLevelEnabled('info')),
          },
          fastifyListener,
        ),
      );
      const server = http.createServer(options.http ?? {}, front);
      server.keepAliveTimeout = config.httpKeepAliveTimeoutMs;
      server.requestTimeout = 0;
      return server;
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  // Beyond the cap Node closes a new connection at once, unanswered (refused,
  // not queued): the process keeps its file descriptors and memory for the
  // connections it has. 0 leaves it unlimited.
  if (config.httpMaxConnections > 0) app.server.maxConnections = config.httpMaxConnections;
  app.addHook('preClose', async () => {
    closing = true;
  });
  const deadlines: RequestDeadlineLimits = {
    requestTimeoutMs: config.httpRequestTimeoutMs,
    transferIdleTimeoutMs: config.httpTransferIdleTimeoutMs,
    transferTimeoutMs: config.httpTransferTimeoutMs,
    rootUrl: config.rootUrl,
  };

  const ajv = bodyValidator();
  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart !== 'body') return () => true;
    // Compiled on the route's first body (lazy-schema-compilers.ts).
    return lazyValidator(() => ajv.compile(schema), pendingSchemas);
  });
  trackPendingCompiles(app, pendingSchemas);

  installRequestIdHeader(app);
  installRequestDeadlines(app, deadlines);
  installUnreadBodyDrain(app);
  decorateRequests(app);
  installBodyParsers(app);
  installErrorHandlers(app, config.rootUrl, pageNotFoundFor(config.rootUrl));
  installMetrics(app, deps);
  installRateLimits(app, deps);

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Gantry API',
        description: "Gantry speaks Forgejo's API v1 (Forgejo 15). Errors are {message, url}.",
        version: deps.version,
      },
      servers: [{ url: `${config.rootUrl}api/v1` }],
      components: {
        securitySchemes: {
          AuthorizationHeaderToken: {
            type: 'apiKey',
            in: 'header',
            name: 'Authorization',
            description: 'token <access token> or Bearer <access token>',
          },
          BasicAuth: { type: 'http', scheme: 'basic' },
        },
      },
      security: [{ AuthorizationHeaderToken: [] }, { BasicAuth: [] }],
    },
    // Paths in the document are relative to /api/v1, as in Forgejo's swagger.v1.json.
    transform: ({ schema, url }) => ({
      schema,
      url: url.startsWith('/api/v1') ? url.slice('/api/v1'.length) || '/' : url,
    }),
    transformObject: (doc) => {
      const spec = (doc as { openapiObject: { paths?: Record<string, unknown> } }).openapiObject;
      if (spec.paths) {
        spec.paths = Object.fromEntries(
          Object.entries(spec.paths).filter(([p]) => !p.startsWith('/api/') && p !== '/swagger.v1.json'),
        );
      }
      return spec as never;
    },
  });
  await app.register(swaggerUi, { routePrefix: '/api/swagger', uiConfig: { url: '/swagger.v1.json' } as never });
  app.get('/swagger.v1.json', { schema: { hide: true } }, async () => app.swagger());

  app.get('/api/healthz', { schema: { hide: true } }, async (_req, reply) => {
    try {
      await deps.checkDatabase();
      return { status: 'pass' };
    } catch (error) {
      app.log.error({ err: error }, 'health check failed');
      return reply.status(503).send({ status: 'fail', message: 'database unreachable' });
    }
  });

  await app.register(
    async (api) => {
      const typed = api as unknown as ApiApp;
      installAuthHook(api, services, config.rootUrl);
      // A route's guards run as one hook (guards.ts).
      api.addHook('onRoute', (route) => {
        if (!Array.isArray(route.preValidation) || route.preValidation.length < 2) return;
        const chained = chainGuards(route.preValidation);
        if (chained !== null) route.preValidation = chained;
      });
      // Hooks that never wait take Fastify's callback form: no promise per request.
      api.addHook('onRequest', (req, _reply, done) => {
        const key = queryParameterWithNul(req.query);
        if (key !== null)
          throw AppError.invalid(`query parameter ${key.split('\0').join('\\0')} must not contain NUL characters`);
        done();
      });
      api.addHook('preValidation', (req, _reply, done) => {
        if (hasNulParam(req.params)) throw AppError.notFound();
        done();
      });
      api.addHook('onSend', (_req, reply, payload, done) => {
        reply.header('Cache-Control', API_CACHE_CONTROL);
        const type = reply.getHeader('content-type');
        if (typeof type === 'string' && type.startsWith('application/json')) reply.header('content-type', JSON_TYPE);
        done(null, payload);
      });
      const ctx: RouteContext = { config, services, guards: createGuards(services) };
      miscRoutes(typed, ctx, deps.version);
      userRoutes(typed, ctx);
      orgRoutes(typed, ctx);
      repoRoutes(typed, ctx);
      actionsSecretVariableRoutes(typed, ctx);
      actionsRunRoutes(typed, ctx);
      actionsJobRoutes(typed, ctx);
      actionsArtifactRoutes(typed, ctx);
      actionsRunControlRoutes(typed, ctx);
      actionsWorkflowRoutes(typed, ctx);
      actionsRunnerRoutes(typed, ctx);
      hookRoutes(typed, ctx);
      hookDeliveryRoutes(typed, ctx);
      commitStatusRoutes(typed, ctx);
    },
    { prefix: '/api/v1' },
  );

  // Git over HTTP lives beside the API, at the repositories' clone URLs.
  // Both stream large bodies (packs, logs): transfer deadlines, not the API's.
  await app.register(async (git) => {
    useTransferDeadlines(git, deadlines);
    gitHttpRoutes(git, services);
  });
  // The runner protocol (Connect RPC) that forgejo-runner and act_runner speak.
  await app.register(
    async (rpc) => {
      useTransferDeadlines(rpc, deadlines);
      await runnerRpcRoutes(rpc, services, { logRequestMaxBytes: config.actionsLogMaxRequestBytes });
    },
    { prefix: '/api/actions' },
  );

  // The artifact protocols runners' jobs speak (upload-artifact/download-artifact), at the instance's origin.
  await app.register(async (artifacts) => {
    useTransferDeadlines(artifacts, deadlines);
    artifactTwirpRoutes(artifacts, services);
  });
  // The v3 protocol (upload-artifact@v3), at ACTIONS_RUNTIME_URL.
  await app.register(
    async (pipeline) => {
      useTransferDeadlines(pipeline, deadlines);
      artifactPipelineRoutes(pipeline, services);
    },
    { prefix: '/api/actions_pipeline' },
  );
  // The web console: Forgejo's Actions pages, over the same services and guards.
  await app.register(async (web) => webConsole(web, config, services));

  return app as unknown as FastifyInstance;
}
