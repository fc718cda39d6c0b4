// GET /metrics (Prometheus text format; the metrics are listed in
// services/metrics.ts). Off unless GANTRY_METRICS_TOKEN is set: then it answers
// only `Authorization: Bearer <that token>`, compared in constant time, and
// every request is counted and timed by route template. Off, nothing is
// counted and /metrics answers 404 saying how to turn it on.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Deps } from '../deps.ts';
import { digestsEqual, hashToken } from '../modules/crypto/tokens.ts';
import { AppError } from '../modules/errors.ts';

export const METRICS_PATH = '/metrics';
const UNMATCHED_ROUTE = 'unmatched';

function bearerToken(req: FastifyRequest): string | null {
  const match = /^Bearer +(\S+) *$/i.exec(req.headers.authorization ?? '');
  return match?.[1] ?? null;
}

export function installMetrics(app: FastifyInstance, deps: Deps): void {
  const token = deps.config.metricsToken;
  const metrics = deps.metrics;
  if (token === null || metrics === null) {
    app.get(METRICS_PATH, { schema: { hide: true } }, async () => {
      throw AppError.notFoundMessage(
        'metrics are disabled: set GANTRY_METRICS_TOKEN on the server, then scrape /metrics with "Authorization: Bearer <that token>"',
      );
    });
    return;
  }

  app.addHook('onResponse', (req, reply, done) => {
    metrics.observeRequest(
      req.method,
      req.routeOptions.url ?? UNMATCHED_ROUTE,
      reply.statusCode,
      reply.elapsedTime / 1000,
    );
    done();
  });

  // Digests of equal length: the comparison takes the same time whatever the caller sent.
  const expected = hashToken(token);
  app.get(METRICS_PATH, { schema: { hide: true } }, async (req, reply) => {
    const given = bearerToken(req);
    if (given === null || !digestsEqual(hashToken(given), expected)) {
      reply.header('www-authenticate', 'Bearer realm="gantry metrics"');
      throw AppError.unauthorized(
        given === null
          ? 'GET /metrics needs "Authorization: Bearer <token>" with the server\'s GANTRY_METRICS_TOKEN'
          : "the bearer token is not the server's GANTRY_METRICS_TOKEN",
      );
    }
    const body = await metrics.render();
    return reply.header('content-type', metrics.contentType).header('cache-control', 'no-store').send(body);
  });
}
