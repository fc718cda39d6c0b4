// The web console (`gantry web` serves it beside the API, on the same port):
// Forgejo's Actions pages and URLs (routers/web/web.go) over the services the
// API uses. Pages are rendered on the server (render.ts); the only scripts
// are small files under /assets/ (the live log, copy buttons), so the
// Content-Security-Policy forbids every inline script and style.
//
// Errors: AppError kinds map to statuses through the same table as the API
// (STATUS_OF_KIND); here the answer is an HTML page, and a signed-out visitor
// of a page that needs a user is sent to /user/login instead of a 401.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import cookie from '@fastify/cookie';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../../config.ts';
import { AppError, STATUS_OF_KIND } from '../../modules/errors.ts';
import type { Services } from '../../services/index.ts';
import { createGuards } from '../guards.ts';
import type { WebContext } from './context.ts';
import { sendPage, sitePrefix } from './render.ts';
import { accountRoutes, CHANGE_PASSWORD_PATH } from './routes-account.ts';
import { actionsRoutes } from './routes-actions.ts';
import { hookRoutes } from './routes-hooks.ts';
import { runRoutes } from './routes-run.ts';
import { runArtifactRoutes } from './routes-run-artifacts.ts';
import { settingsRoutes } from './routes-settings.ts';
import { chromeOf, cookieSettings, installSessions } from './session.ts';

// Beside this module, or beside the bundle in dist/ (scripts/build.mjs copies them there).
const ASSETS = path.join(path.dirname(fileURLToPath(import.meta.url)), 'assets');
const ASSET_TYPES: Readonly<Record<string, string>> = {
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
};

/** Scripts and styles from this origin only; nothing inline, no plugins, no framing. */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** The assets, read once at start: a handful of small files, served with their type and a short cache. */
function loadAssets(): Map<string, { body: Buffer; type: string }> {
  const assets = new Map<string, { body: Buffer; type: string }>();
  for (const name of fs.readdirSync(ASSETS)) {
    const type = ASSET_TYPES[path.extname(name)];
    if (type !== undefined) assets.set(name, { body: fs.readFileSync(path.join(ASSETS, name)), type });
  }
  return assets;
}

/** What every page is sent with: the CSP above, no sniffing or framing, not cached unless the route says so. */
function setPageHeaders(reply: FastifyReply): void {
  reply.header('Content-Security-Policy', CONTENT_SECURITY_POLICY);
  reply.header('X-Content-Type-Options', 'nosniff');
  reply.header('X-Frame-Options', 'DENY');
  reply.header('Referrer-Policy', 'same-origin');
  if (!reply.hasHeader('cache-control')) reply.header('Cache-Control', 'no-store');
}

/** Prefixes of what machines read (the API, the runner and artifact protocols): never a page. */
const MACHINE_PREFIXES = ['/api/', '/twirp/'];

/**
 * The console's 404 page for a browser that follows a wrong link (Forgejo
 * answers every unknown web URL with its 404 page). Only a GET or HEAD that
 * asks for HTML and is not under a machine prefix gets it: scripts and
 * clients, which do not send `Accept: text/html`, keep the API's JSON 404.
 * The page is drawn signed out: no route ran, so no session was read.
 */
export function pageNotFoundFor(rootUrl: string) {
  const site = sitePrefix(rootUrl);
  return function pageNotFound(req: FastifyRequest, reply: FastifyReply): FastifyReply | null {
    if (req.method !== 'GET' && req.method !== 'HEAD') return null;
    if (!/\btext\/html\b/i.test(req.headers.accept ?? '')) return null;
    const pathOnly = req.url.split('?')[0] ?? '';
    if (MACHINE_PREFIXES.some((prefix) => pathOnly.startsWith(prefix))) return null;
    reply.status(404);
    setPageHeaders(reply);
    const chrome = { title: '404', site, doer: null, csrf: '', flash: null };
    return sendPage(reply, 'error', chrome, { status: 404, message: 'The page you asked for does not exist.' });
  };
}

/**
 * A redirect's target under the root URL's path: routes redirect to the
 * paths they serve (`/user/login`), which the browser must reach as
 * `/ci/user/login` when Gantry is served under `/ci/`. Anything that is not a
 * same-site absolute path (none is sent today) passes unchanged.
 */
function locationUnderSite(reply: FastifyReply, site: string): void {
  const location = reply.getHeader('location');
  if (typeof location === 'string' && location.startsWith('/') && !location.startsWith('//'))
    reply.header('location', `${site}${location}`);
}

export async function webConsole(app: FastifyInstance, config: Config, services: Services): Promise<void> {
  const cookies = cookieSettings(config.rootUrl);
  const ctx: WebContext = { config, services, guards: createGuards(services), cookies };
  const assets = loadAssets();

  // Pages, not API: kept out of the OpenAPI document (whose base path is /api/v1).
  app.addHook('onRoute', (route) => {
    route.schema = { ...route.schema, hide: true };
  });
  await app.register(cookie);
  app.addHook('onSend', async (_req, reply, payload) => {
    setPageHeaders(reply);
    if (cookies.site !== '') locationUnderSite(reply, cookies.site);
    return payload;
  });

  app.get('/assets/:name', async (req, reply) => {
    const asset = assets.get((req.params as { name: string }).name);
    if (asset === undefined) throw AppError.notFound();
    return reply.type(asset.type).header('Cache-Control', 'public, max-age=300').send(asset.body);
  });

  await installSessions(app, services, cookies);

  app.setErrorHandler((error: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
    let status: number;
    let message: string;
    if (error instanceof AppError) {
      status = STATUS_OF_KIND[error.kind];
      message = error.message;
      if (status === 401 && req.method === 'GET')
        return reply.redirect(`/user/login?redirect_to=${encodeURIComponent(req.url)}`, 303);
      if (error.options.retryAfterSec !== undefined) reply.header('Retry-After', String(error.options.retryAfterSec));
    } else if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
      // Fastify's own (a bad body) and @fastify/csrf-protection's 403 `Invalid csrf token`.
      status = error.statusCode;
      message = error.code?.startsWith('FST_CSRF')
        ? 'The form has expired or was not sent from this site; reload the page and try again.'
        : error.message;
    } else {
      req.log.error({ err: error }, 'web console request failed');
      status = 500;
      message = `internal server error (request ${req.id}); the cause is in the server log`;
    }
    reply.status(status);
    return sendPage(reply, 'error', chromeOf(cookies, req, reply, `${status}`), { status, message });
  });
  // A user who must change their password sees nothing else until they have (Forgejo's
  // routers/web/user/setting/account.go MustChangePassword).
  app.addHook('preHandler', async (req, reply) => {
    const doer = req.auth.doer;
    if (!doer?.mustChangePassword) return;
    const route = req.routeOptions.url ?? '';
    if (route === CHANGE_PASSWORD_PATH || route === '/user/logout' || route === '/assets/:name') return;
    return reply.redirect(CHANGE_PASSWORD_PATH, 303);
  });

  accountRoutes(app, ctx);
  actionsRoutes(app, ctx);
  runRoutes(app, ctx);
  runArtifactRoutes(app, ctx);
  settingsRoutes(app, ctx);
  hookRoutes(app, ctx);
}
