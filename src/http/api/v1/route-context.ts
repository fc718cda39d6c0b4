// What every route file receives from the app: services, guards, settings.
import type { FastifyInstance, FastifyReply, FastifyRequest, RawServerDefault, FastifyBaseLogger } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Config } from '../../../config.ts';
import type { Services } from '../../../services/index.ts';
import type { Guards } from '../../guards.ts';
import { actorOf } from '../../request-context.ts';
import type { Viewer } from '../../../services/convert.ts';

export type ApiApp = FastifyInstance<
  RawServerDefault,
  IncomingMessage,
  ServerResponse,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

export interface RouteContext {
  config: Config;
  services: Services;
  guards: Guards;
}

export function viewerOf(req: FastifyRequest, services: Services): Viewer {
  return { doer: req.auth.doer, isSiteAdmin: services.permissions.isSiteAdmin(actorOf(req)) };
}

/** Every list sends its total, readable by browser clients too (Forgejo's SetTotalCountHeader). */
export function setTotalCount(reply: FastifyReply, total: number): void {
  reply.header('X-Total-Count', String(total));
  reply.header('Access-Control-Expose-Headers', 'X-Total-Count');
}
