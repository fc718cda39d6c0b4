// What every route file receives from the app: services, guards, settings.
import type { FastifyInstance, FastifyReply, FastifyRequest, RawServerDefault, FastifyBaseLogger } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { TObject, TString } from 'typebox';
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

/**
 * A route's path parameters: the scope's own plus `extra` (e.g. a secret's
 * name). The TypeBox type provider types `req.params` from it, so handlers
 * read `req.params.secretname` without a cast. Its static type names only
 * `extra`: the scope's own parameters differ per scope (none, `org`, `owner`
 * and `repo`) and handlers reach them through what the guards loaded, never
 * through `req.params`; spreading the scope's index-typed record in would
 * widen every key to `string | undefined`.
 */
export function scopeParams<E extends Record<string, TString> = Record<never, TString>>(
  scope: { readonly params: Record<string, TString> },
  extra: E = {} as E,
): TObject<E> {
  return Type.Object({ ...scope.params, ...extra }) as TObject<E>;
}
