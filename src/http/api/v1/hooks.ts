// GET|POST /orgs/{org}/hooks, GET|PATCH|DELETE /orgs/{org}/hooks/{id}, and
// the same for /repos/{owner}/{repo}/hooks, plus POST
// /repos/{owner}/{repo}/hooks/{id}/tests (Forgejo: routers/api/v1/org/hook.go
// and repo/hook.go → routers/api/v1/utils/hook.go; JSON from
// services/webhook/general.go ToHook). One route set for both scopes
// (hook-scopes.ts says who may use each); the rules live in WebhookService.
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { parseIdParam, parsePage } from '../../../modules/pagination.ts';
import { toApiHook } from '../../../services/convert-hooks.ts';
import { scopeOfPlace } from '../../../services/webhooks/deliveries.ts';
import { bindLikeGo } from '../../guards.ts';
import { requireDoer, requireRepo } from '../../request-context.ts';
import { CreateHookOption, EditHookOption, Hook } from '../../../api-types/hook-schemas.ts';
import { hookRouteScopes } from './hook-scopes.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { scopeParams, setTotalCount } from './route-context.ts';
import { NoContent, PageQuery, errorResponses } from '../../../api-types/schemas.ts';

export function hookRoutes(app: ApiApp, { config, services, guards: g }: RouteContext): void {
  const webhooks = services.webhooks;
  for (const scope of hookRouteScopes(g)) {
    const { prefix, guards } = scope;
    const withBody = [...guards, bindLikeGo];
    const tags = [scope.tag];
    const op = (name: string) => `${scope.kind}${name}`;
    const params = scopeParams(scope);
    const idParams = scopeParams(scope, { id: Type.String({ description: 'id of the hook' }) });
    const where = (req: Parameters<typeof scope.place>[0]) => scopeOfPlace(scope.place(req));
    const whose = scope.kind === 'org' ? "an organization's" : "a repository's";

    app.get(
      prefix,
      {
        schema: {
          operationId: op('ListHooks'),
          tags,
          description: `List ${whose} webhooks, id ascending (paginated; X-Total-Count).`,
          params,
          querystring: PageQuery,
          response: { 200: Type.Array(Hook), ...errorResponses(401, 403, 404) },
        },
        preValidation: guards,
      },
      async (req, reply) => {
        const page = parsePage(req.query as Record<string, unknown>, config);
        const { hooks, total } = await webhooks.list(where(req), page);
        setTotalCount(reply, total);
        return hooks.map((h) => toApiHook(h, webhooks));
      },
    );

    app.post(
      prefix,
      {
        schema: {
          operationId: op('CreateHook'),
          tags,
          description: 'Create a webhook (inactive unless `active` is true; events default to ["push"]).',
          params,
          body: CreateHookOption,
          response: { 201: Hook, ...errorResponses(400, 401, 403, 404, 422) },
        },
        preValidation: withBody,
      },
      async (req, reply) => {
        const hook = await webhooks.create(where(req), req.body);
        return (reply as FastifyReply).status(201).send(toApiHook(hook, webhooks));
      },
    );

    app.get(
      `${prefix}/:id`,
      {
        schema: {
          operationId: op('GetHook'),
          tags,
          params: idParams,
          response: { 200: Hook, ...errorResponses(401, 403, 404) },
        },
        preValidation: guards,
      },
      async (req) => toApiHook(await webhooks.get(where(req), parseIdParam(req.params.id)), webhooks),
    );

    app.patch(
      `${prefix}/:id`,
      {
        schema: {
          operationId: op('EditHook'),
          tags,
          description:
            'Edit a webhook as Forgejo does: omitted events reset to push, omitted branch_filter and authorization_header are cleared, omitted active is kept; the secret, package and action_run_* events cannot be changed.',
          params: idParams,
          body: EditHookOption,
          response: { 200: Hook, ...errorResponses(401, 403, 404, 422) },
        },
        preValidation: withBody,
      },
      async (req) => {
        const hook = await webhooks.edit(where(req), parseIdParam(req.params.id), req.body);
        return toApiHook(hook, webhooks);
      },
    );

    app.delete(
      `${prefix}/:id`,
      {
        schema: {
          operationId: op('DeleteHook'),
          tags,
          params: idParams,
          response: { 204: NoContent, ...errorResponses(401, 403, 404) },
        },
        preValidation: guards,
      },
      async (req, reply) => {
        await webhooks.delete(where(req), parseIdParam(req.params.id));
        return (reply as FastifyReply).status(204).send();
      },
    );

    if (scope.kind !== 'repo') continue;
    // Only repository hooks have /tests in Forgejo (routers/api/v1/repo/hook.go TestHook).
    app.post(
      `${prefix}/:id/tests`,
      {
        schema: {
          operationId: 'repoTestHook',
          tags,
          description:
            'Queue a test `push` delivery of one commit (the `ref` query: branch, tag or commit id; else the default branch head), whatever the hook subscribes to and even when inactive. Answers before delivery.',
          params: idParams,
          querystring: Type.Object({
            ref: Type.Optional(Type.String({ description: 'branch, tag or commit id; default: the default branch' })),
          }),
          response: { 204: NoContent, ...errorResponses(401, 403, 404) },
        },
        preValidation: guards,
      },
      async (req, reply) => {
        const { repo, owner } = requireRepo(req);
        const ref = ((req.query as { ref?: string }).ref ?? '').trim();
        await services.webhookTests.send(repo, owner, parseIdParam(req.params.id), requireDoer(req), ref);
        return (reply as FastifyReply).status(204).send();
      },
    );
  }
}
