// GET|POST /orgs/{org}/hooks, GET|PATCH|DELETE /orgs/{org}/hooks/{id}
// (Forgejo: routers/api/v1/org/hook.go → routers/api/v1/utils/hook.go; JSON
// from services/webhook/general.go ToHook). Owners of the organization and
// site admins only; the rules live in WebhookService.
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import type { Static } from 'typebox';
import { parseIdParam, parsePage } from '../../../modules/pagination.ts';
import type { WebhookRecord } from '../../../models/webhooks.ts';
import { apiTime } from '../../../services/convert.ts';
import { apiEventsOf } from '../../../services/webhooks/hook-events.ts';
import type { WebhookService } from '../../../services/webhooks/hooks.ts';
import { bindLikeGo } from '../../guards.ts';
import { requireOrg } from '../../request-context.ts';
import { CreateHookOption, EditHookOption, Hook, HookIdParams, HookParams } from '../../../api-types/hook-schemas.ts';
import type { HookJson } from '../../../api-types/hook-schemas.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { setTotalCount } from './route-context.ts';
import { NoContent, PageQuery, errorResponses } from '../../../api-types/schemas.ts';

/** Forgejo's ToHook: config keys come out sorted (a Go map), never with the secret. */
export function toApiHook(hook: WebhookRecord, webhooks: WebhookService): HookJson {
  const config: Record<string, string> = { content_type: hook.contentType, url: hook.url };
  if (hook.type === 'slack') {
    const meta = webhooks.metadataOf(hook) as Record<string, string>;
    Object.assign(config, { channel: meta.channel, username: meta.username, icon_url: meta.icon_url, color: meta.color });
  }
  const sorted = Object.fromEntries(Object.entries(config).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return {
    id: hook.id,
    type: hook.type,
    branch_filter: hook.branchFilter,
    url: hook.url,
    config: sorted,
    events: apiEventsOf(hook.events),
    authorization_header: webhooks.authorizationHeaderOf(hook),
    content_type: hook.contentType,
    metadata: webhooks.metadataOf(hook),
    active: hook.isActive,
    updated_at: apiTime(hook.updatedUnix),
    created_at: apiTime(hook.createdUnix),
  };
}

type IdParams = Static<typeof HookIdParams>;

export function orgHookRoutes(app: ApiApp, { config, services, guards: g }: RouteContext): void {
  // Forgejo's reqWebhooksEnabled has nothing to check: Gantry has no DISABLE_WEBHOOKS.
  const guards = [g.scopes('organization'), g.orgAssignment, g.publicOnly, g.reqToken, g.reqOrgOwnership];
  const withBody = [...guards, bindLikeGo];
  const webhooks = services.webhooks;
  const tags = ['organization'];

  app.get(
    '/orgs/:org/hooks',
    {
      schema: {
        operationId: 'orgListHooks',
        tags,
        description: "List an organization's webhooks, id ascending (paginated; X-Total-Count).",
        params: HookParams,
        querystring: PageQuery,
        response: { 200: Type.Array(Hook), ...errorResponses(401, 403, 404) },
      },
      preValidation: guards,
    },
    async (req, reply) => {
      const page = parsePage(req.query as Record<string, unknown>, config);
      const { hooks, total } = await webhooks.list(requireOrg(req).id, page);
      setTotalCount(reply, total);
      return hooks.map((h) => toApiHook(h, webhooks));
    },
  );

  app.post(
    '/orgs/:org/hooks',
    {
      schema: {
        operationId: 'orgCreateHook',
        tags,
        description: 'Create a webhook (inactive unless `active` is true; events default to ["push"]).',
        params: HookParams,
        body: CreateHookOption,
        response: { 201: Hook, ...errorResponses(400, 401, 403, 404, 422) },
      },
      preValidation: withBody,
    },
    async (req, reply) => {
      const hook = await webhooks.create(requireOrg(req).id, req.body as Static<typeof CreateHookOption>);
      return (reply as FastifyReply).status(201).send(toApiHook(hook, webhooks));
    },
  );

  app.get(
    '/orgs/:org/hooks/:id',
    {
      schema: { operationId: 'orgGetHook', tags, params: HookIdParams, response: { 200: Hook, ...errorResponses(401, 403, 404) } },
      preValidation: guards,
    },
    async (req) => toApiHook(await webhooks.get(requireOrg(req).id, parseIdParam((req.params as IdParams).id)), webhooks),
  );

  app.patch(
    '/orgs/:org/hooks/:id',
    {
      schema: {
        operationId: 'orgEditHook',
        tags,
        description: "Edit a webhook as Forgejo does: omitted events reset to push, omitted branch_filter and authorization_header are cleared, omitted active is kept; the secret, package and action_run_* events cannot be changed.",
        params: HookIdParams,
        body: EditHookOption,
        response: { 200: Hook, ...errorResponses(401, 403, 404, 422) },
      },
      preValidation: withBody,
    },
    async (req) => {
      const hook = await webhooks.edit(requireOrg(req).id, parseIdParam((req.params as IdParams).id), req.body as Static<typeof EditHookOption>);
      return toApiHook(hook, webhooks);
    },
  );

  app.delete(
    '/orgs/:org/hooks/:id',
    {
      schema: { operationId: 'orgDeleteHook', tags, params: HookIdParams, response: { 204: NoContent, ...errorResponses(401, 403, 404) } },
      preValidation: guards,
    },
    async (req, reply) => {
      await webhooks.delete(requireOrg(req).id, parseIdParam((req.params as IdParams).id));
      return (reply as FastifyReply).status(204).send();
    },
  );
}
