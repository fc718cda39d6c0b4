// Authentication for API routes, then Forgejo's account checks and sudo, in
// Forgejo's order (routers/api/v1/api.go: apiAuth → verifyAuthWithOptions → sudo).
//
// A callback hook: a request whose answer is known at once (no credentials,
// or a token the credential cache holds, and no sudo) is admitted without a
// promise; anything else waits for the authentication service. Both paths
// apply the same checks in the same order.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../modules/errors.ts';
import type { Authentication } from '../services/authentication.ts';
import type { Services } from '../services/index.ts';

export function installAuthHook(app: FastifyInstance, services: Services, rootUrl: string): void {
  /** Forgejo's account checks for the doer; sets req.auth. */
  const admit = (req: FastifyRequest, auth: Authentication): void => {
    const doer = auth.doer;
    if (doer) {
      if (!doer.isActive) throw new AppError('forbidden', 'This account is not activated.', { omitUrl: true });
      if (doer.prohibitLogin) {
        throw new AppError(
          'forbidden',
          'This account is prohibited from signing in, please contact your site administrator.',
          { omitUrl: true },
        );
      }
      if (doer.mustChangePassword) {
        throw new AppError('forbidden', `You must change your password. Change it at: ${rootUrl}user/change_password`, {
          omitUrl: true,
        });
      }
    }
    req.auth = auth;
  };

  const sudo = async (req: FastifyRequest, name: string): Promise<void> => {
    const auth = req.auth;
    const doer = auth.doer;
    if (!doer || !doer.isAdmin || auth.token?.scope.publicOnly) {
      throw new AppError('forbidden', 'Only administrators allowed to sudo.', { omitUrl: true });
    }
    const target = await services.accounts.findByName(name);
    if (!target || target.isOrganization) throw AppError.notFoundMessage(`user does not exist [uid: 0, name: ${name}]`);
    req.auth = { ...auth, doer: target };
  };

  const authenticate = async (req: FastifyRequest): Promise<void> => {
    admit(req, await services.authentication.authenticate(req.headers.authorization));
    const name = sudoTarget(req);
    if (name !== null) await sudo(req, name);
  };

  app.addHook('preParsing', (req, _reply, payload, done) => {
    const known = services.authentication.authenticateNow(req.headers.authorization, req.raw.socket);
    if (known === null) {
      authenticate(req).then(() => done(null, payload), done);
      return;
    }
    try {
      admit(req, known);
    } catch (error) {
      done(error as Error);
      return;
    }
    const name = sudoTarget(req);
    if (name === null) done(null, payload);
    else sudo(req, name).then(() => done(null, payload), done);
  });
}

function sudoTarget(req: FastifyRequest): string | null {
  const header = req.headers.sudo;
  if (typeof header === 'string' && header !== '') return header;
  const query = (req.query as Record<string, unknown> | undefined)?.sudo;
  return typeof query === 'string' && query !== '' ? query : null;
}
