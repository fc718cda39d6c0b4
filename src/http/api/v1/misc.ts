// GET /version: Forgejo's version string, which clients parse to gate features.
import type { ApiApp, RouteContext } from './route-context.ts';
import { ServerVersion } from '../../../api-types/schemas.ts';

/** The Forgejo release whose API Gantry serves, with Gantry's own version as build metadata. */
export const FORGEJO_COMPAT_VERSION = '15.0.3';

export function miscRoutes(app: ApiApp, _ctx: RouteContext, gantryVersion: string): void {
  const body = { version: `${FORGEJO_COMPAT_VERSION}+gantry-${gantryVersion}` };
  app.get(
    '/version',
    { schema: { operationId: 'getVersion', tags: ['miscellaneous'], response: { 200: ServerVersion } } },
    async () => body,
  );
}
