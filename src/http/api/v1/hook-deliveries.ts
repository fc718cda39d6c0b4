// GET …/hooks/{id}/deliveries, GET …/deliveries/{delivery_id},
// POST …/deliveries/{delivery_id}/attempts (redeliver), POST …/hooks/{id}/pings,
// under /orgs/{org} and /repos/{owner}/{repo}. Not in Forgejo (#38463); named
// after GitHub's hook-deliveries API. Guards are the hooks' own of each scope
// (hook-scopes.ts).
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { parseIdParam, parsePage } from '../../../modules/pagination.ts';
import { scopeOfPlace } from '../../../services/webhooks/deliveries.ts';
import { requireDoer } from '../../request-context.ts';
import { hookRouteScopes } from './hook-scopes.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { scopeParams, setTotalCount } from './route-context.ts';
import { PageQuery, errorResponses } from '../../../api-types/schemas.ts';

const Headers = Type.Record(Type.String(), Type.String());

const HookDelivery = Type.Object({
  id: Type.Integer(),
  guid: Type.String({
    description:
      'the delivery id receivers see (X-Forgejo-Delivery, X-GitHub-Delivery…), the same on every automatic retry',
  }),
  event: Type.String(),
  state: Type.String({ description: 'pending, delivering, delivered or failed (no attempts left)' }),
  status: Type.String(),
  status_code: Type.Integer(),
  duration: Type.Number({ description: 'seconds the last attempt took' }),
  delivered_at: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String(),
  next_attempt_at: Type.Union([Type.String(), Type.Null()]),
  redelivery: Type.Boolean(),
  attempts: Type.Integer(),
});

const HookDeliveryAttempt = Type.Object({
  attempt: Type.Integer(),
  started_at: Type.String(),
  duration: Type.Number(),
  url: Type.String(),
  request: Type.Object({ headers: Headers, payload: Type.String() }),
  response: Type.Object({
    status_code: Type.Integer(),
    headers: Headers,
    payload: Type.String({ description: 'the first 64 KiB of the body' }),
  }),
  error: Type.String(),
});

const HookDeliveryDetail = Type.Intersect([
  HookDelivery,
  Type.Object({
    request: Type.Union([Type.Object({ headers: Headers, payload: Type.Unknown() }), Type.Null()]),
    response: Type.Union([Type.Object({ headers: Headers, payload: Type.String() }), Type.Null()]),
    attempt_history: Type.Array(HookDeliveryAttempt),
  }),
]);

export function hookDeliveryRoutes(app: ApiApp, { config, services, guards: g }: RouteContext): void {
  const deliveries = services.webhookDeliveries;
  for (const scope of hookRouteScopes(g)) {
    const { prefix, guards } = scope;
    const tags = [scope.tag];
    const op = (name: string) => `${scope.kind}${name}`;
    const hookId = Type.String({ description: 'id of the hook' });
    const hookIdParams = scopeParams(scope, { id: hookId });
    const deliveryParams = scopeParams(scope, {
      id: hookId,
      delivery_id: Type.String({ description: 'id of the delivery' }),
    });
    const where = (req: Parameters<typeof scope.place>[0]) => scopeOfPlace(scope.place(req));

    app.get(
      `${prefix}/:id/deliveries`,
      {
        schema: {
          operationId: op('ListHookDeliveries'),
          tags,
          description: "A webhook's deliveries, newest first (paginated; X-Total-Count).",
          params: hookIdParams,
          querystring: PageQuery,
          response: { 200: Type.Array(HookDelivery), ...errorResponses(401, 403, 404) },
        },
        preValidation: guards,
      },
      async (req, reply) => {
        const page = parsePage(req.query as Record<string, unknown>, config);
        const { deliveries: list, total } = await deliveries.list(where(req), parseIdParam(req.params.id), page);
        setTotalCount(reply, total);
        return list;
      },
    );

    app.get(
      `${prefix}/:id/deliveries/:delivery_id`,
      {
        schema: {
          operationId: op('GetHookDelivery'),
          tags,
          description: 'One delivery: the request and response of its last attempt, and every attempt.',
          params: deliveryParams,
          response: { 200: HookDeliveryDetail, ...errorResponses(401, 403, 404) },
        },
        preValidation: guards,
      },
      async (req) => {
        const params = req.params;
        return deliveries.get(where(req), parseIdParam(params.id), parseIdParam(params.delivery_id));
      },
    );

    app.post(
      `${prefix}/:id/deliveries/:delivery_id/attempts`,
      {
        schema: {
          operationId: op('RedeliverHookDelivery'),
          tags,
          description:
            'Queue the payload of a delivery again, as a new delivery (new guid, redelivery=true), with the hook as it is now.',
          params: deliveryParams,
          response: { 202: HookDelivery, ...errorResponses(401, 403, 404) },
        },
        preValidation: guards,
      },
      async (req, reply) => {
        const params = req.params;
        const created = await deliveries.redeliver(
          where(req),
          parseIdParam(params.id),
          parseIdParam(params.delivery_id),
        );
        return (reply as FastifyReply).status(202).send(created);
      },
    );

    app.post(
      `${prefix}/:id/pings`,
      {
        schema: {
          operationId: op('PingHook'),
          tags,
          description: 'Queue a `ping` delivery (past the event and branch filters).',
          params: hookIdParams,
          response: { 202: HookDelivery, ...errorResponses(401, 403, 404) },
        },
        preValidation: guards,
      },
      async (req, reply) => {
        const created = await deliveries.ping(scope.place(req), parseIdParam(req.params.id), requireDoer(req));
        return (reply as FastifyReply).status(202).send(created);
      },
    );
  }
}
