// Sessions, CSRF and flash messages of the web console.
//
// Guarantees:
// - The session cookie (`gantry_session`) is HttpOnly, SameSite=Lax, Secure
//   when GANTRY_ROOT_URL is https, and scoped to the root URL's path. Its
//   value is a random id the database stores only hashed (WebSessionService).
// - A signed-in request authenticates as its user (`req.auth`, method
//   `session`): the API's guards and services then decide what it may see and
//   do, exactly as for a token (one permission model).
// - Every POST carries a CSRF token (form field `_csrf`) made from the
//   session's secret by @fastify/csrf-protection; without a valid one it is
//   refused (403) before the handler runs. Before sign-in the secret lives in
//   a cookie of its own (`gantry_csrf`), so the login form is protected too.
// - A flash message survives exactly one redirect (cookie `gantry_flash`,
//   read and cleared by the next page); it holds service messages, which
//   never contain secrets.
import csrfProtection from '@fastify/csrf-protection';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../../services/index.ts';
import { ANONYMOUS } from '../../services/authentication.ts';
import type { PageChrome } from './render.ts';
import { sitePrefix } from './render.ts';

export const SESSION_COOKIE = 'gantry_session';
const LOGIN_CSRF_COOKIE = 'gantry_csrf';
const FLASH_COOKIE = 'gantry_flash';

/** What @fastify/csrf-protection reads and writes in `@fastify/session` mode: `req.session._csrf`. */
interface CsrfHolder {
  _csrf: string | undefined;
}

declare module 'fastify' {
  interface FastifyRequest {
    session: CsrfHolder;
    /** The cookie value of the live session, or null when signed out. */
    webSession: string | null;
  }
}

export interface CookieSettings {
  secure: boolean;
  /** The root URL's path (`/`, or `/ci/` under a sub-path): the cookies are not sent to other apps of the host. */
  path: string;
  /** The same path as pages prefix their links with (render.ts PageChrome.site). */
  site: string;
}

export function cookieSettings(rootUrl: string): CookieSettings {
  const url = new URL(rootUrl);
  return { secure: url.protocol === 'https:', path: url.pathname, site: sitePrefix(rootUrl) };
}

function baseCookie(settings: CookieSettings) {
  return { httpOnly: true, sameSite: 'lax' as const, secure: settings.secure, path: settings.path };
}

export function setSessionCookie(reply: FastifyReply, settings: CookieSettings, value: string, maxAgeSec: number) {
  reply.setCookie(SESSION_COOKIE, value, { ...baseCookie(settings), maxAge: maxAgeSec });
}

export function clearSessionCookie(reply: FastifyReply, settings: CookieSettings) {
  reply.clearCookie(SESSION_COOKIE, baseCookie(settings));
}

export function setFlash(reply: FastifyReply, settings: CookieSettings, kind: 'info' | 'error', message: string) {
  // Bounded: a cookie over ~4 KB is dropped by browsers.
  reply.setCookie(FLASH_COOKIE, JSON.stringify({ kind, message: message.slice(0, 500) }), {
    ...baseCookie(settings),
    maxAge: 60,
  });
}

/** Installs the session lookup and CSRF protection on the console's routes. */
export async function installSessions(app: FastifyInstance, services: Services, settings: CookieSettings) {
  app.decorateRequest('session', null as unknown as CsrfHolder);
  app.decorateRequest('webSession', null);
  app.addHook('onRequest', async (req, reply) => {
    req.auth = ANONYMOUS;
    const cookie = req.cookies[SESSION_COOKIE] ?? '';
    const live = cookie === '' ? null : await services.webSessions.find(cookie);
    if (live) {
      req.auth = { doer: live.user, method: 'session', token: null };
      req.webSession = cookie;
      req.session = { _csrf: live.csrfSecret };
      return;
    }
    req.webSession = null;
    // Signed out: a secret of the browser's own, in an HttpOnly cookie (double submit).
    req.session = {
      get _csrf() {
        return req.cookies[LOGIN_CSRF_COOKIE] || undefined;
      },
      set _csrf(secret: string | undefined) {
        if (secret !== undefined) {
          req.cookies[LOGIN_CSRF_COOKIE] = secret;
          reply.setCookie(LOGIN_CSRF_COOKIE, secret, baseCookie(settings));
        }
      },
    };
  });
  await app.register(csrfProtection, { sessionPlugin: '@fastify/session', sessionKey: '_csrf' });
  // Every state-changing request of the console: POST is the only method its forms use.
  app.addHook('preHandler', (req, reply, done) => {
    if (req.method === 'POST') return app.csrfProtection(req, reply, done);
    done();
  });
}

/** The layout's data for this request: who is signed in, a CSRF token for its forms, the pending flash. */
export function chromeOf(
  settings: CookieSettings,
  req: FastifyRequest,
  reply: FastifyReply,
  title: string,
): PageChrome {
  let flash: PageChrome['flash'] = null;
  const raw = req.cookies[FLASH_COOKIE];
  if (raw) {
    try {
      const parsed = JSON.parse(raw) as { kind?: unknown; message?: unknown };
      if (typeof parsed.message === 'string')
        flash = { kind: parsed.kind === 'error' ? 'error' : 'info', message: parsed.message };
    } catch {
      // A cookie someone edited: no flash.
    }
    reply.clearCookie(FLASH_COOKIE, baseCookie(settings));
  }
  return { title, site: settings.site, doer: req.auth.doer, csrf: reply.generateCsrf(), flash };
}
