// Per-IP and per-token request rate limits (GANTRY_RATE_LIMIT_PER_IP,
// GANTRY_RATE_LIMIT_PER_TOKEN, requests per minute), counted in this process
// by the limiter in modules/rate-limiter.ts, before any other work (no body
// is read, no credential is verified, no database is touched for a refused
// request). Every request counts against its client address — API, git and
// runner RPC alike; /api/healthz is exempt so a load balancer's probes can
// neither be refused nor use up a client's budget. A request that carries a
// credential also counts against that credential, whichever client sends it.
//
// The credential key is a keyed digest (HMAC with a key made at start and
// never stored) of the secret the route will verify: the access or task
// token of `Authorization: token|Bearer`, or of basic auth with a token as
// user name or password (however the user name is spelled, so varying it
// buys no fresh budget); the runner token (x-runner-token) under
// /api/actions. Raw secrets are never kept in the limiter or logged.
//
// Over a limit: 429 with Retry-After (whole seconds) and the answer the
// caller understands — Forgejo's {message, url} on the API, plain text for
// git (its client prints it as `remote: …`), a Connect `resource_exhausted`
// error for runners. Limited requests also get GitHub's headers:
// X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset (Unix
// seconds when the budget is whole again), for whichever limit is closer to
// running out (the one that refused, on a 429).
import { createHmac, randomBytes } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Deps } from '../deps.ts';
import { looksLikeAccessToken } from '../modules/crypto/tokens.ts';
import { clientAddressKey, RateLimiter } from '../modules/rate-limiter.ts';
import type { RateLimitDecision } from '../modules/rate-limiter.ts';
import { errorBody } from './errors.ts';
import { isGitHttpRoute } from './git-http.ts';

const WINDOW_MS = 60_000;
const EXEMPT_ROUTES: ReadonlySet<string> = new Set(['/api/healthz']);
const RUNNER_RPC_PREFIX = '/api/actions/';

type LimitKind = 'ip' | 'token';

const SETTING_OF: Readonly<Record<LimitKind, string>> = {
  ip: 'GANTRY_RATE_LIMIT_PER_IP',
  token: 'GANTRY_RATE_LIMIT_PER_TOKEN',
};
const SUBJECT_OF: Readonly<Record<LimitKind, string>> = { ip: 'client address', token: 'token' };

interface Counted {
  kind: LimitKind;
  decision: RateLimitDecision;
}

/** The secret a request will authenticate with, as the route reads it; null when it sends none. */
function credentialOf(url: string, headers: IncomingHttpHeaders): string | null {
  if (url.startsWith(RUNNER_RPC_PREFIX)) {
    const runnerToken = headers['x-runner-token'];
    return typeof runnerToken === 'string' && runnerToken !== '' ? `runner\0${runnerToken}` : null;
  }
  const parts = (headers.authorization ?? '').trim().split(/\s+/);
  if (parts.length !== 2) return null;
  const scheme = (parts[0] as string).toLowerCase();
  const value = parts[1] as string;
  if (scheme === 'token' || scheme === 'bearer') return `token\0${value}`;
  if (scheme !== 'basic') return null;
  // The same reading as AuthenticationService.byBasic, so one token is one key.
  const decoded = Buffer.from(value, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return `basic\0${decoded}`;
  const user = decoded.slice(0, colon);
  const password = decoded.slice(colon + 1);
  if (looksLikeAccessToken(user) && (password === '' || password === 'x-oauth-basic')) return `token\0${user}`;
  if (looksLikeAccessToken(password)) return `token\0${password}`;
  return `basic\0${user.toLowerCase()}\0${password}`;
}

function digester(): (secret: string) => string {
  const key = randomBytes(32);
  // 128 bits: no collisions in practice, and a third of the memory of a full digest per tracked key.
  return (secret) => createHmac('sha256', key).update(secret, 'utf8').digest('base64url').slice(0, 22);
}

function setLimitHeaders(reply: FastifyReply, decision: RateLimitDecision): void {
  reply.header('X-RateLimit-Limit', String(decision.limit));
  reply.header('X-RateLimit-Remaining', String(decision.remaining));
  reply.header('X-RateLimit-Reset', String(Math.ceil(decision.resetAtMs / 1000)));
}

function refuse(req: FastifyRequest, reply: FastifyReply, rootUrl: string, refused: Counted): FastifyReply {
  const retryAfter = Math.max(1, Math.ceil(refused.decision.retryAfterMs / 1000));
  const message = `rate limit exceeded: at most ${refused.decision.limit} requests per minute per ${SUBJECT_OF[refused.kind]} (${SETTING_OF[refused.kind]}); retry in ${retryAfter} s`;
  req.log.debug({ limit: refused.kind }, 'request refused by a rate limit');
  setLimitHeaders(reply, refused.decision);
  reply.code(429).header('Retry-After', String(retryAfter));
  // Connect's wire form of an error on a unary call (connectrpc.com/docs/protocol): the code name, HTTP 429.
  if (req.url.startsWith(RUNNER_RPC_PREFIX))
    return reply.type('application/json').send(JSON.stringify({ code: 'resource_exhausted', message }));
  if (isGitHttpRoute(req.routeOptions.url)) return reply.type('text/plain; charset=utf-8').send(`${message}\n`);
  return reply.send(errorBody(rootUrl, message));
}

export function installRateLimits(app: FastifyInstance, deps: Deps): void {
  const { config, clock } = deps;
  const perIp =
    config.rateLimitPerIp > 0 ? new RateLimiter({ limit: config.rateLimitPerIp, windowMs: WINDOW_MS, clock }) : null;
  const perToken =
    config.rateLimitPerToken > 0
      ? new RateLimiter({ limit: config.rateLimitPerToken, windowMs: WINDOW_MS, clock })
      : null;
  if (perIp === null && perToken === null) return;
  const digest = digester();

  app.addHook('onRequest', async (req, reply) => {
    if (req.routeOptions.url !== undefined && EXEMPT_ROUTES.has(req.routeOptions.url)) return;
    const counted: Counted[] = [];
    if (perIp !== null) {
      // req.ip is the peer address, or the client X-Forwarded-For names when the peer is in GANTRY_TRUSTED_PROXIES.
      const decision = perIp.take(clientAddressKey(req.ip));
      if (!decision.allowed) return refuse(req, reply, config.rootUrl, { kind: 'ip', decision });
      counted.push({ kind: 'ip', decision });
    }
    const credential = perToken === null ? null : credentialOf(req.url, req.headers);
    if (perToken !== null && credential !== null) {
      const decision = perToken.take(digest(credential));
      if (!decision.allowed) return refuse(req, reply, config.rootUrl, { kind: 'token', decision });
      counted.push({ kind: 'token', decision });
    }
    const closest = counted.reduce<Counted | undefined>(
      (best, c) => (best === undefined || c.decision.remaining <= best.decision.remaining ? c : best),
      undefined,
    );
    if (closest !== undefined) setLimitHeaders(reply, closest.decision);
  });
}
