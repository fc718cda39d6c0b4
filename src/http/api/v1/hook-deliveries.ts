// GET /orgs/{org}/hooks/{id}/deliveries, GET …/deliveries/{delivery_id},
// POST …/deliveries/{delivery_id}/attempts (redeliver), POST /orgs/{org}/hooks/{id}/pings.
// Not in Forgejo (#38463); named after GitHub's hook-deliveries API. Guards are
// the org hooks' own (owners of the organization and site admins).
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { parseIdParam, parsePage } from '../../../modules/pagination.ts';
import { requireDoer, requireOrg } from '../../request-context.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { setTotalCount } from './route-context.ts';
import { PageQuery, errorResponses } from '../../../api-types/schemas.ts';

const Headers = Type.Record(Type.String(), Type.String());

const HookDelivery = Type.Object({
  id: Type.Integer(),
  guid: Type.String({ description: 'the delivery id receivers see (X-Forgejo-Delivery, X-GitHub-Delivery…), the same on every automatic retry' }),
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
  response: Type.Object({ status_code: Type.Integer(), headers: Headers, payload: Type.String({ description: 'the first 64 KiB of the body' }) }),
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

const HookIdParams = Type.Object({ org: Type.String({ description: 'name of the organization' }), id: Type.String({ description: 'id of the hook' }) });
const DeliveryParams = Type.Object({ ...HookIdParams.properties, delivery_id: Type.String({ description: 'id of the delivery' }) });

interface Params {
  id?: string;
  delivery_id?: string;
}

export function hookDeliveryRoutes(app: ApiApp, { config, services, guards: g }: RouteContext): void {
  const guards = [g.scopes('organization'), g.orgAssignment, g.publicOnly, g.reqToken, g.reqOrgOwnership];
  const deliveries = services.webhookDeliveries;
  const tags = ['organization'];

  app.get(
    '/orgs/:org/hooks/:id/deliveries',
    {
      schema: {
        operationId: 'orgListHookDeliveries',
        tags,
        description: "A webhook's deliveries, newest first (paginated; X-Total-Count).",
        params: HookIdParams,
        querystring: PageQuery,
        response: { 200: Type.Array(HookDelivery), ...errorResponses(401, 403, 404) },
      },
      preValidation: guards,
    },
    async (req, reply) => {
      const page = parsePage(req.query as Record<string, unknown>, config);
      const { deliveries: list, total } = await deliveries.list(requireOrg(req).id, parseIdParam((req.params as Params).id), page);
      setTotalCount(reply, total);
      return list;
    },
  );

  app.get(
    '/orgs/:org/hooks/:id/deliveries/:delivery_id',
    {
      schema: {
        operationId: 'orgGetHookDelivery',
        tags,
        description: 'One delivery: the request and response of its last attempt, and every attempt.',
        params: DeliveryParams,
        response: { 200: HookDeliveryDetail, ...errorResponses(401, 403, 404) },
      },
      preValidation: guards,
    },
    async (req) => {
      const params = req.params as Params;
      return deliveries.get(requireOrg(req).id, parseIdParam(params.id), parseIdParam(params.delivery_id));
    },
  );

  app.post(
    '/orgs/:org/hooks/:id/deliveries/:delivery_id/attempts',
    {
      schema: {
        operationId: 'orgRedeliverHookDelivery',
        tags,
        description: 'Queue the payload of a delivery again, as a new delivery (new guid, redelivery=true), with the hook as it is now.',
        params: DeliveryParams,
        response: { 202: HookDelivery, ...errorResponses(401, 403, 404) },
      },
      preValidation: guards,
    },
    async (req, reply) => {
      const params = req.params as Params;
      const created = await deliveries.redeliver(requireOrg(req).id, parseIdParam(params.id), parseIdParam(params.delivery_id));
      return (reply as FastifyReply).status(202).send(created);
    },
  );

  app.post(
    '/orgs/:org/hooks/:id/pings',
    {
      schema: {
        operationId: 'orgPingHook',
        tags,
        description: 'Queue a `ping` delivery (past the event and branch filters).',
        params: HookIdParams,
        response: { 202: HookDelivery, ...errorResponses(401, 403, 404) },
      },
      preValidation: guards,
    },
    async (req, reply) => {
      const created = await deliveries.ping(requireOrg(req), parseIdParam((req.params as Params).id), requireDoer(req));
      return (reply as FastifyReply).status(202).send(created);
    },
  );
}
