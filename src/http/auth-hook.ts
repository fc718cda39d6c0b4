// Authentication for API routes, then Forgejo's account checks and sudo, in
// Forgejo's order (routers/api/v1/api.go: apiAuth → verifyAuthWithOptions → sudo).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../modules/errors.ts';
import type { Services } from '../services/index.ts';

export function installAuthHook(app: FastifyInstance, services: Services, rootUrl: string): void {
  app.addHook('preParsing', async (req: FastifyRequest) => {
    const auth = await services.authentication.authenticate(req.headers.authorization);
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
    const sudo = sudoTarget(req);
    if (sudo === null) return;
    if (!doer || !doer.isAdmin || auth.token?.scope.publicOnly) {
      throw new AppError('forbidden', 'Only administrators allowed to sudo.', { omitUrl: true });
    }
    const target = await services.accounts.findByName(sudo);
    if (!target || target.isOrganization) throw AppError.notFoundMessage(`user does not exist [uid: 0, name: ${sudo}]`);
    req.auth = { ...auth, doer: target };
  });
}

function sudoTarget(req: FastifyRequest): string | null {
  const header = req.headers.sudo;
  if (typeof header === 'string' && header !== '') return header;
  const query = (req.query as Record<string, unknown> | undefined)?.sudo;
  return typeof query === 'string' && query !== '' ? query : null;
}
