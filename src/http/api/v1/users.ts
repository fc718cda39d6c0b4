// The signed-in user, admin user creation, and personal access tokens.
import { parsePage } from '../../../modules/pagination.ts';
import { requireContextUser, requireDoer } from '../../request-context.ts';
import { toApiToken, toApiUser } from '../../../services/convert.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { viewerOf } from './route-context.ts';
import {
  AccessToken,
  CreateAccessTokenOption,
  CreateUserOption,
  NoContent,
  PageQuery,
  User,
  errorResponses,
} from '../../../api-types/schemas.ts';
import { Type } from 'typebox';

export function userRoutes(app: ApiApp, { config, services, guards: g }: RouteContext): void {
  app.get(
    '/user',
    {
      schema: { operationId: 'userGetCurrent', tags: ['user'], response: { 200: User, ...errorResponses(401, 403) } },
      preValidation: [g.scopes('user'), g.reqToken],
    },
    async (req) => toApiUser(requireDoer(req), viewerOf(req, services), config.rootUrl),
  );

  app.post(
    '/admin/users',
    {
      schema: {
        operationId: 'adminCreateUser',
        tags: ['admin'],
        body: CreateUserOption,
        response: { 201: User, ...errorResponses(400, 401, 403, 422) },
      },
      preValidation: [g.scopes('admin'), g.reqToken, g.reqSiteAdmin],
    },
    async (req, reply) => {
      const body = req.body;
      const user = await services.accounts.createUser({
        username: body.username,
        email: body.email,
        password: body.password ?? '',
        fullName: body.full_name,
        loginName: body.login_name,
        sourceId: body.source_id,
        // Forgejo: a user created by an admin must change the password unless told otherwise.
        mustChangePassword: body.must_change_password ?? true,
        restricted: body.restricted,
        visibility: body.visibility || undefined,
      });
      return reply.status(201).send(toApiUser(user, viewerOf(req, services), config.rootUrl));
    },
  );

  // Token routes: basic authentication is mandatory, as in Forgejo (routers/api/v1/user/app.go).
  const tokenGuards = [g.scopes('user'), g.userAssignment, g.reqSelfOrAdmin, g.reqBasicAuth, g.reqToken];
  const UsernameParams = Type.Object({ username: Type.String() });

  app.get(
    '/users/:username/tokens',
    {
      schema: {
        operationId: 'userGetTokens',
        tags: ['user'],
        params: UsernameParams,
        querystring: PageQuery,
        response: { 200: Type.Array(AccessToken), ...errorResponses(401, 403, 404) },
      },
      preValidation: tokenGuards,
    },
    async (req, reply) => {
      const page = parsePage(req.query as Record<string, unknown>, config);
      const { tokens, total } = await services.accessTokens.list(requireContextUser(req), page.limit, page.offset);
      reply.header('X-Total-Count', String(total));
      return tokens.map((t) => toApiToken(t));
    },
  );

  app.post(
    '/users/:username/tokens',
    {
      schema: {
        operationId: 'userCreateToken',
        tags: ['user'],
        params: UsernameParams,
        body: CreateAccessTokenOption,
        response: { 201: AccessToken, ...errorResponses(400, 401, 403, 404, 422) },
      },
      preValidation: tokenGuards,
    },
    async (req, reply) => {
      const created = await services.accessTokens.create(requireContextUser(req), req.body.name, req.body.scopes ?? []);
      return reply.status(201).send(toApiToken(created.token, created.secret));
    },
  );

  app.delete(
    '/users/:username/tokens/:token',
    {
      schema: {
        operationId: 'userDeleteAccessToken',
        tags: ['user'],
        params: Type.Object({ username: Type.String(), token: Type.String({ description: 'token id or name' }) }),
        response: { 204: NoContent, ...errorResponses(401, 403, 404, 422) },
      },
      preValidation: tokenGuards,
    },
    async (req, reply) => {
      await services.accessTokens.delete(requireContextUser(req), req.params.token);
      return reply.status(204).send(null);
    },
  );
}
