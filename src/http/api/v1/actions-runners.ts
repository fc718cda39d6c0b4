// Runners: registration token, register, list, get, delete and the jobs search
// (Forgejo: routers/api/v1/shared/runners.go, wrapped by {user,org,repo,admin}
// handlers; routes in routers/api/v1/api.go). One route set, registered for the
// user, organization, repository and instance (admin) scopes with each scope's
// guard chain; handlers only turn the guarded request into a Scope.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { linkHeader, parseIdParam, parsePage } from '../../../modules/pagination.ts';
import { INSTANCE_SCOPE, scopeColumns } from '../../../modules/scope.ts';
import { bindLikeGo } from '../../guards.ts';
import { actionsRouteScopes } from './actions-scopes.ts';
import type { ActionsScopeRoutes } from './actions-scopes.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { scopeParams, setTotalCount } from './route-context.ts';
import {
  ActionRunJobList,
  ActionRunner,
  RegisterRunnerOptions,
  RegisterRunnerResponse,
  RegistrationToken,
  RunnerJobsQuery,
  RunnerListQuery,
} from '../../../api-types/runner-schemas.ts';
import { NoContent, errorResponses } from '../../../api-types/schemas.ts';
import { toApiRunJob, toApiRunner } from '../../../services/convert-runners.ts';

interface OperationIds {
  getToken: string;
  /** Gitea's POST variant (Forgejo has GET only); Gantry answers both with the active token. */
  createToken: string;
  /** Gantry's rotation: deactivates the active token (neither Forgejo nor Gitea has it). */
  deleteToken: string;
  list: string;
  register: string;
  get: string;
  delete: string;
  searchJobs: string;
}

interface ScopeRoutes extends ActionsScopeRoutes {
  ops: OperationIds;
}

type Query = Record<string, string | string[] | undefined>;

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** Forgejo's ctx.FormBool: strconv.ParseBool, or `on` in any case; anything else is false. */
export function formBool(value: string | undefined): boolean {
  if (value === undefined) return false;
  return ['1', 't', 'T', 'TRUE', 'true', 'True'].includes(value) || value.toLowerCase() === 'on';
}

/**
 * The `labels` of a jobs search: null when the parameter is absent; else the
 * first value, trimmed as a whole and split on commas (items are not trimmed,
 * so `labels=` is `[""]`), as Forgejo's GetActionRunJobs.
 */
export function parseLabels(query: Query): string[] | null {
  if (!Object.hasOwn(query, 'labels')) return null;
  return (first(query.labels) ?? '').trim().split(',');
}

export function actionsRunnerRoutes(app: ApiApp, { config, services, guards: g }: RouteContext): void {
  const where = actionsRouteScopes(g);
  const { runners } = services;

  // The instance (Forgejo's admin routes): global runners, (0, 0).
  const instance: ScopeRoutes = {
    prefix: '/admin/actions',
    params: {},
    tag: 'admin',
    category: 'admin',
    access: [g.reqToken, g.reqSiteAdmin],
    guards: [g.scopes('admin'), g.reqToken, g.reqSiteAdmin],
    scopeOf: () => INSTANCE_SCOPE,
    ops: {
      getToken: 'adminGetRunnerRegistrationToken',
      createToken: 'adminCreateRunnerRegistrationToken',
      deleteToken: 'adminDeleteRunnerRegistrationToken',
      list: 'getAdminRunners',
      register: 'registerAdminRunner',
      get: 'getAdminRunner',
      delete: 'deleteAdminRunner',
      searchJobs: 'adminGetActionRunJobs',
    },
  };

  const scopes: ScopeRoutes[] = [
    {
      ...where.user,
      ops: {
        getToken: 'userGetRunnerRegistrationToken',
        createToken: 'userCreateRunnerRegistrationToken',
        deleteToken: 'userDeleteRunnerRegistrationToken',
        list: 'getUserRunners',
        register: 'registerUserRunner',
        get: 'getUserRunner',
        delete: 'deleteUserRunner',
        searchJobs: 'userSearchRunJobs',
      },
    },
    {
      ...where.org,
      ops: {
        getToken: 'orgGetRunnerRegistrationToken',
        createToken: 'orgCreateRunnerRegistrationToken',
        deleteToken: 'orgDeleteRunnerRegistrationToken',
        list: 'getOrgRunners',
        register: 'registerOrgRunner',
        get: 'getOrgRunner',
        delete: 'deleteOrgRunner',
        searchJobs: 'orgSearchRunJobs',
      },
    },
    {
      ...where.repo,
      ops: {
        getToken: 'repoGetRunnerRegistrationToken',
        createToken: 'repoCreateRunnerRegistrationToken',
        deleteToken: 'repoDeleteRunnerRegistrationToken',
        list: 'getRepoRunners',
        register: 'registerRepoRunner',
        get: 'getRepoRunner',
        delete: 'deleteRepoRunner',
        searchJobs: 'repoSearchRunJobs',
      },
    },
    instance,
  ];

  const tokenHandler = (scope: ScopeRoutes) => async (req: FastifyRequest) => ({
    token: await runners.registrationToken(scopeColumns(scope.scopeOf(req))),
  });
  const jobsHandler = (scope: ScopeRoutes) => async (req: FastifyRequest) => {
    const jobs = await runners.searchJobs(scope.scopeOf(req), parseLabels(req.query as Query));
    return jobs.length > 0 ? jobs.map(toApiRunJob) : null;
  };

  /**
   * Registration tokens need the write scope of their category even on GET (a
   * deliberate departure from Forgejo 15, which asks read: a runner registered
   * with the token receives every secret of the scope). Job tokens are refused
   * before anything else.
   */
  const tokenGuards = (scope: ScopeRoutes) => [g.refuseJobToken, g.scopesAt('write', scope.category), ...scope.access];

  for (const scope of scopes) registerScope(scope);

  // Forgejo's deprecated instance paths (before /admin/actions/runners existed).
  app.get(
    '/admin/runners/registration-token',
    {
      schema: {
        operationId: 'adminGetRegistrationToken',
        tags: ['admin'],
        deprecated: true,
        response: { 200: RegistrationToken, ...errorResponses(401, 403) },
      },
      preValidation: tokenGuards(instance),
    },
    tokenHandler(instance),
  );
  app.get(
    '/admin/runners/jobs',
    {
      schema: {
        operationId: 'adminSearchRunJobs',
        tags: ['admin'],
        deprecated: true,
        querystring: RunnerJobsQuery,
        response: { 200: ActionRunJobList, ...errorResponses(401, 403) },
      },
      preValidation: instance.guards,
    },
    jobsHandler(instance),
  );

  function registerScope(scope: ScopeRoutes): void {
    const { prefix, tag, guards, ops } = scope;
    const runnerParams = scopeParams(scope, { runner_id: Type.String({ description: 'id of the runner' }) });
    const tokenSchema = (operationId: string, description: string) => ({
      operationId,
      tags: [tag],
      description,
      params: scopeParams(scope),
      response: { 200: RegistrationToken, ...errorResponses(401, 403, 404) },
    });

    // Static segments (`registration-token`, `jobs`) win over `:runner_id` in the router.
    app.get(
      `${prefix}/runners/registration-token`,
      {
        schema: tokenSchema(
          ops.getToken,
          "The scope's active registration token, created when there is none. Needs the write scope of the category.",
        ),
        preValidation: tokenGuards(scope),
      },
      tokenHandler(scope),
    );
    app.post(
      `${prefix}/runners/registration-token`,
      {
        schema: tokenSchema(
          ops.createToken,
          'Same as GET (Gitea has POST): the active token, created when there is none.',
        ),
        preValidation: tokenGuards(scope),
      },
      tokenHandler(scope),
    );
    app.delete(
      `${prefix}/runners/registration-token`,
      {
        schema: {
          operationId: ops.deleteToken,
          tags: [tag],
          description:
            'Rotation: deactivates the active registration token (204, also when there is none); the next GET or POST creates a new one. Registered runners keep working.',
          params: scopeParams(scope),
          response: { 204: NoContent, ...errorResponses(401, 403, 404) },
        },
        preValidation: tokenGuards(scope),
      },
      async (req, reply: FastifyReply) => {
        await runners.deactivateRegistrationToken(scopeColumns(scope.scopeOf(req)));
        return reply.status(204).send();
      },
    );

    app.get(
      `${prefix}/runners/jobs`,
      {
        schema: {
          operationId: ops.searchJobs,
          tags: [tag],
          description: 'Waiting and running jobs of the scope, newest first; not paginated; null when none match.',
          params: scopeParams(scope),
          querystring: RunnerJobsQuery,
          response: { 200: ActionRunJobList, ...errorResponses(401, 403, 404) },
        },
        preValidation: guards,
      },
      jobsHandler(scope),
    );

    app.get(
      `${prefix}/runners`,
      {
        schema: {
          operationId: ops.list,
          tags: [tag],
          description: 'Runners, most recently online first, with X-Total-Count and Link.',
          params: scopeParams(scope),
          querystring: RunnerListQuery,
          response: { 200: Type.Array(ActionRunner), ...errorResponses(400, 401, 403, 404) },
        },
        preValidation: guards,
      },
      async (req, reply) => {
        const query = req.query as Query;
        const page = parsePage(query, config);
        const { runners: list, total } = await runners.list(scope.scopeOf(req), {
          visible: formBool(first(query.visible)),
          page,
        });
        setTotalCount(reply, total);
        const link = linkHeader(new URL(`${config.rootUrl}${req.url.slice(1)}`), page, total);
        if (link !== null) {
          reply.header('Link', link);
          reply.header('Access-Control-Expose-Headers', 'Link, X-Total-Count');
        }
        return list.map((runner) => toApiRunner(runner, runners.status(runner)));
      },
    );

    app.post(
      `${prefix}/runners`,
      {
        schema: {
          operationId: ops.register,
          tags: [tag],
          description: "Registers a runner in this scope; the answer holds the runner's secret, shown only here.",
          params: scopeParams(scope),
          body: RegisterRunnerOptions,
          response: { 201: RegisterRunnerResponse, ...errorResponses(400, 401, 403, 404, 422) },
        },
        preValidation: [g.refuseJobToken, ...guards, bindLikeGo],
      },
      async (req, reply) => {
        const body = req.body;
        const { runner, token } = await runners.registerRunner(scopeColumns(scope.scopeOf(req)), {
          name: body.name,
          description: body.description ?? '',
          ephemeral: body.ephemeral ?? false,
        });
        return reply.status(201).send({ id: runner.id, uuid: runner.uuid, token });
      },
    );

    app.get(
      `${prefix}/runners/:runner_id`,
      {
        schema: {
          operationId: ops.get,
          tags: [tag],
          params: runnerParams,
          response: { 200: ActionRunner, ...errorResponses(400, 401, 403, 404) },
        },
        preValidation: guards,
      },
      async (req) => {
        const runner = await runners.get(scope.scopeOf(req), parseIdParam(req.params.runner_id));
        return toApiRunner(runner, runners.status(runner));
      },
    );

    app.delete(
      `${prefix}/runners/:runner_id`,
      {
        schema: {
          operationId: ops.delete,
          tags: [tag],
          params: runnerParams,
          response: { 204: NoContent, ...errorResponses(400, 401, 403, 404) },
        },
        preValidation: guards,
      },
      async (req, reply) => {
        await runners.delete(scope.scopeOf(req), parseIdParam(req.params.runner_id));
        return reply.status(204).send(null);
      },
    );
  }
}
