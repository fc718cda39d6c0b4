// Sign-in, sign-out, the forced password change and the home page
// (Forgejo: routers/web/auth/auth.go SignIn/SignOut, routers/web/home.go).
import type { FastifyInstance } from 'fastify';
import { AppError } from '../../modules/errors.ts';
import type { RepoPermission } from '../../services/permissions.ts';
import { hasRepoAccess, unitAccessMode } from '../../services/permissions.ts';
import { AccessMode } from '../../modules/access-mode.ts';
import { WEB_SESSION_LIFETIME_SEC } from '../../services/web-sessions.ts';
import { actorOf } from '../request-context.ts';
import type { WebContext } from './context.ts';
import { field, queryParam, reqSignIn } from './context.ts';
import { safeRedirectTarget, sendPage, seeOther } from './render.ts';
import { chromeOf, clearSessionCookie, setFlash, setSessionCookie } from './session.ts';

export const CHANGE_PASSWORD_PATH = '/user/change_password';
/** How many repositories the home page considers (the most recently updated), before access filtering. */
const HOME_REPOS_SCANNED = 200;

export function accountRoutes(app: FastifyInstance, ctx: WebContext): void {
  const { services, cookies } = ctx;

  app.get('/user/login', async (req, reply) => {
    if (req.auth.doer) return seeOther(reply, '/');
    return sendPage(reply, 'login', chromeOf(cookies, req, reply, 'Sign in'), {
      login: '',
      redirectTo: safeRedirectTarget(queryParam(req, 'redirect_to')),
      error: '',
    });
  });

  app.post('/user/login', async (req, reply) => {
    const login = field(req.body, 'user_name').trim();
    const password = field(req.body, 'password');
    const redirectTo = safeRedirectTarget(field(req.body, 'redirect_to'));
    let error = '';
    try {
      if (login === '' || password === '') throw AppError.unauthorized('enter your user name or e-mail and password');
      const user = await services.authentication.signInWithPassword(login, password);
      if (!user.isActive) throw AppError.forbidden('This account is not activated.');
      if (user.prohibitLogin)
        throw AppError.forbidden('This account is prohibited from signing in, please contact your site administrator.');
      const session = await services.webSessions.start(user);
      setSessionCookie(reply, cookies, session.cookie, WEB_SESSION_LIFETIME_SEC);
      return seeOther(reply, user.mustChangePassword ? CHANGE_PASSWORD_PATH : redirectTo);
    } catch (caught) {
      if (!(caught instanceof AppError)) throw caught;
      // The failed-login limiter's 429 keeps its Retry-After; other refusals say only "invalid".
      if (caught.options.retryAfterSec !== undefined) reply.header('Retry-After', String(caught.options.retryAfterSec));
      error = caught.kind === 'unauthorized' ? 'Invalid user name, e-mail or password.' : caught.message;
      reply.status(caught.kind === 'too_many_requests' ? 429 : caught.kind === 'forbidden' ? 403 : 401);
    }
    return sendPage(reply, 'login', chromeOf(cookies, req, reply, 'Sign in'), { login, redirectTo, error });
  });

  app.post('/user/logout', async (req, reply) => {
    if (req.webSession) await services.webSessions.end(req.webSession);
    clearSessionCookie(reply, cookies);
    return seeOther(reply, '/user/login');
  });

  app.get(CHANGE_PASSWORD_PATH, { preHandler: [reqSignIn] }, async (req, reply) =>
    sendPage(reply, 'change-password', chromeOf(cookies, req, reply, 'Change password'), { error: '' }),
  );

  app.post(CHANGE_PASSWORD_PATH, { preHandler: [reqSignIn] }, async (req, reply) => {
    const doer = req.auth.doer;
    if (!doer) throw AppError.unauthorized('sign in first');
    const password = field(req.body, 'password');
    let error = '';
    if (password !== field(req.body, 'retype')) error = 'The passwords do not match.';
    else {
      try {
        await services.accounts.changePassword(doer, password);
        // Other browsers signed in as this user are signed out; this one starts afresh.
        await services.webSessions.endAllOf(doer);
        const session = await services.webSessions.start(doer);
        setSessionCookie(reply, cookies, session.cookie, WEB_SESSION_LIFETIME_SEC);
        setFlash(reply, cookies, 'info', 'Your password has been changed.');
        return seeOther(reply, '/');
      } catch (caught) {
        if (!(caught instanceof AppError)) throw caught;
        error = caught.message;
      }
    }
    reply.status(400);
    return sendPage(reply, 'change-password', chromeOf(cookies, req, reply, 'Change password'), { error });
  });

  app.get('/', async (req, reply) => {
    const actor = actorOf(req);
    const candidates = await services.repos.listRecent(HOME_REPOS_SCANNED);
    const visible: Array<{ owner: string; name: string; isPrivate: boolean; latest: unknown; actions: boolean }> = [];
    for (const repo of candidates) {
      const owner = await services.accounts.findById(repo.ownerId);
      if (!owner) continue;
      // The API's permission rule decides what the home page lists.
      const permission: RepoPermission = await services.permissions.repoPermission(actor, repo, owner);
      if (!hasRepoAccess(permission)) continue;
      const readsActions = repo.units.actions && unitAccessMode(permission, repo, 'actions') >= AccessMode.read;
      const { runs } = readsActions ? await services.runs.list(repo, {}, { limit: 1, offset: 0 }) : { runs: [] };
      visible.push({
        owner: owner.name,
        name: repo.name,
        isPrivate: repo.isPrivate,
        latest: runs[0]?.run ?? null,
        actions: readsActions,
      });
    }
    return sendPage(reply, 'home', chromeOf(cookies, req, reply, 'Gantry'), { repos: visible });
  });
}
