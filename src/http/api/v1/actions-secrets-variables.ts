// Actions secrets and variables: one route set, registered for the user,
// organization and repository scopes with each scope's guard chain (Forgejo:
// addActionsRoutes in routers/api/v1/api.go, and the /user group; handlers in
// routers/api/v1/{user,org,repo}/action.go). Handlers only turn the guarded
// request into a Scope; the rules live in the services.
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { parsePage } from '../../../modules/pagination.ts';
import { bindLikeGo } from '../../guards.ts';
import { apiTime } from '../../../services/convert.ts';
import { toApiVariable } from '../../../services/convert-variables.ts';
import { actionsRouteScopes } from './actions-scopes.ts';
import type { ActionsScopeRoutes } from './actions-scopes.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { scopeParams, setTotalCount } from './route-context.ts';
import {
  ActionVariable,
  CreateOrUpdateSecretOption,
  CreateVariableOption,
  NoContent,
  PageQuery,
  Secret,
  UpdateVariableOption,
  errorResponses,
} from '../../../api-types/schemas.ts';

interface OperationIds {
  /** Forgejo has no GET /user/actions/secrets. */
  listSecrets: string | null;
  updateSecret: string;
  deleteSecret: string;
  listVariables: string;
  getVariable: string;
  createVariable: string;
  updateVariable: string;
  deleteVariable: string;
}

interface ScopeRoutes extends ActionsScopeRoutes {
  ops: OperationIds;
}

/** 201/204 answers have no body and no JSON content type (Forgejo's ctx.Status). */
function noContent(reply: unknown, status: 201 | 204): FastifyReply {
  return (reply as FastifyReply).status(status).send();
}

export function actionsSecretVariableRoutes(app: ApiApp, { config, services, guards: g }: RouteContext): void {
  const where = actionsRouteScopes(g);
  const scopes: ScopeRoutes[] = [
    {
      ...where.user,
      ops: {
        listSecrets: null,
        updateSecret: 'updateUserSecret',
        deleteSecret: 'deleteUserSecret',
        listVariables: 'getUserVariablesList',
        getVariable: 'getUserVariable',
        createVariable: 'createUserVariable',
        updateVariable: 'updateUserVariable',
        deleteVariable: 'deleteUserVariable',
      },
    },
    {
      ...where.org,
      ops: {
        listSecrets: 'orgListActionsSecrets',
        updateSecret: 'updateOrgSecret',
        deleteSecret: 'deleteOrgSecret',
        listVariables: 'getOrgVariablesList',
        getVariable: 'getOrgVariable',
        createVariable: 'createOrgVariable',
        updateVariable: 'updateOrgVariable',
        deleteVariable: 'deleteOrgVariable',
      },
    },
    {
      ...where.repo,
      ops: {
        listSecrets: 'repoListActionsSecrets',
        updateSecret: 'updateRepoSecret',
        deleteSecret: 'deleteRepoSecret',
        listVariables: 'getRepoVariablesList',
        getVariable: 'getRepoVariable',
        createVariable: 'createRepoVariable',
        updateVariable: 'updateRepoVariable',
        deleteVariable: 'deleteRepoVariable',
      },
    },
  ];

  for (const scope of scopes) registerScope(scope);

  function registerScope(scope: ScopeRoutes): void {
    const { prefix, tag, guards, ops } = scope;
    const withBody = [...guards, bindLikeGo];
    const secretParams = scopeParams(scope, { secretname: Type.String({ description: 'name of the secret' }) });
    const variableParams = scopeParams(scope, { variablename: Type.String({ description: 'name of the variable' }) });

    if (ops.listSecrets) {
      app.get(
        `${prefix}/secrets`,
        {
          schema: {
            operationId: ops.listSecrets,
            tags: [tag],
            params: scopeParams(scope),
            querystring: PageQuery,
            response: { 200: Type.Array(Secret), ...errorResponses(401, 403, 404) },
          },
          preValidation: guards,
        },
        async (req, reply) => {
          const page = parsePage(req.query as Record<string, unknown>, config);
          const { secrets, total } = await services.secrets.list(scope.scopeOf(req), page);
          setTotalCount(reply, total);
          return secrets.map((s) => ({ name: s.name, created_at: apiTime(s.createdUnix) }));
        },
      );
    }

    // An empty secret name (`…/actions/secrets/`): Forgejo strips the trailing
    // slash before routing (routers/common/middleware.go), so the request lands
    // on `…/actions/secrets`, where its chi router answers 405 (Allow: GET,
    // empty body, before any guard) when that path lists secrets (repo, org),
    // and its API 404 when it is no route at all (user). Matched here before
    // the `:secretname` routes (a static path wins), so an empty name never
    // reaches the service as a 400 "invalid secret name".
    for (const method of ['PUT', 'DELETE'] as const) {
      app.route({
        method,
        url: `${prefix}/secrets/`,
        schema: { hide: true },
        handler: async (_req, reply) => {
          if (!ops.listSecrets) return reply.callNotFound();
          return reply.status(405).header('allow', 'GET').send();
        },
      });
    }

    app.put(
      `${prefix}/secrets/:secretname`,
      {
        schema: {
          operationId: ops.updateSecret,
          tags: [tag],
          description: 'Create (201) or replace (204) a secret; its value is never returned.',
          params: secretParams,
          body: CreateOrUpdateSecretOption,
          response: { 201: NoContent, 204: NoContent, ...errorResponses(400, 401, 403, 404, 422) },
        },
        preValidation: withBody,
      },
      async (req, reply) => {
        const body = req.body;
        const result = await services.secrets.createOrUpdate(scope.scopeOf(req), req.params.secretname, body.data);
        return noContent(reply, result === 'created' ? 201 : 204);
      },
    );

    app.delete(
      `${prefix}/secrets/:secretname`,
      {
        schema: {
          operationId: ops.deleteSecret,
          tags: [tag],
          params: secretParams,
          response: { 204: NoContent, ...errorResponses(400, 401, 403, 404) },
        },
        preValidation: guards,
      },
      async (req, reply) => {
        await services.secrets.delete(scope.scopeOf(req), req.params.secretname);
        return noContent(reply, 204);
      },
    );

    app.get(
      `${prefix}/variables`,
      {
        schema: {
          operationId: ops.listVariables,
          tags: [tag],
          params: scopeParams(scope),
          querystring: PageQuery,
          response: { 200: Type.Array(ActionVariable), ...errorResponses(401, 403, 404) },
        },
        preValidation: guards,
      },
      async (req, reply) => {
        const page = parsePage(req.query as Record<string, unknown>, config);
        const { variables, total } = await services.variables.list(scope.scopeOf(req), page);
        setTotalCount(reply, total);
        return variables.map(toApiVariable);
      },
    );

    app.get(
      `${prefix}/variables/:variablename`,
      {
        schema: {
          operationId: ops.getVariable,
          tags: [tag],
          params: variableParams,
          response: { 200: ActionVariable, ...errorResponses(401, 403, 404) },
        },
        preValidation: scope.getVariableGuards ?? guards,
      },
      // Answered without a promise when the guards read the variable already.
      (req) => {
        const read = req.repoAccess?.variable;
        if (read !== undefined) return toApiVariable(services.variables.found(read));
        return services.variables.get(scope.scopeOf(req), req.params.variablename).then(toApiVariable);
      },
    );

    app.post(
      `${prefix}/variables/:variablename`,
      {
        schema: {
          operationId: ops.createVariable,
          tags: [tag],
          description: 'Create a variable: 204 (as Forgejo), 409 when the name exists (in any case).',
          params: variableParams,
          body: CreateVariableOption,
          response: { 204: NoContent, ...errorResponses(400, 401, 403, 404, 409, 422) },
        },
        preValidation: withBody,
      },
      async (req, reply) => {
        const body = req.body;
        await services.variables.create(scope.scopeOf(req), req.params.variablename, body.value);
        return noContent(reply, 204);
      },
    );

    app.put(
      `${prefix}/variables/:variablename`,
      {
        schema: {
          operationId: ops.updateVariable,
          tags: [tag],
          description: 'Update a variable, renaming it when `name` is set; renaming onto an existing name is 409.',
          params: variableParams,
          body: UpdateVariableOption,
          response: { 204: NoContent, ...errorResponses(400, 401, 403, 404, 409, 422) },
        },
        preValidation: withBody,
      },
      async (req, reply) => {
        const body = req.body;
        await services.variables.update(scope.scopeOf(req), req.params.variablename, {
          name: body.name,
          value: body.value,
        });
        return noContent(reply, 204);
      },
    );

    app.delete(
      `${prefix}/variables/:variablename`,
      {
        schema: {
          operationId: ops.deleteVariable,
          tags: [tag],
          params: variableParams,
          response: { 204: NoContent, ...errorResponses(401, 403, 404) },
        },
        preValidation: guards,
      },
      async (req, reply) => {
        await services.variables.delete(scope.scopeOf(req), req.params.variablename);
        return noContent(reply, 204);
      },
    );
  }
}
