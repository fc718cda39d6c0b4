// Organizations, their teams and team membership.
import { Type } from 'typebox';
import { AppError } from '../../../modules/errors.ts';
import { actorOf, requireDoer, requireOrg, requireTeam } from '../../request-context.ts';
import { toApiOrg, toApiRepo, toApiTeam } from '../../../services/convert.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { viewerOf } from './route-context.ts';
import { createRepoInput } from './repos.ts';
import {
  CreateOrgOption,
  CreateRepoOption,
  CreateTeamOption,
  NoContent,
  Organization,
  Repository,
  Team,
  errorResponses,
} from '../../../api-types/schemas.ts';

const OrgParams = Type.Object({ org: Type.String() });

export function orgRoutes(app: ApiApp, { config, services, guards: g }: RouteContext): void {
  const ownerChain = [g.scopes('organization'), g.orgAssignment, g.publicOnly, g.reqToken, g.reqOrgOwnership];

  app.post(
    '/orgs',
    {
      schema: {
        operationId: 'orgCreate',
        tags: ['organization'],
        body: CreateOrgOption,
        response: { 201: Organization, ...errorResponses(401, 403, 422) },
      },
      preValidation: [g.scopes('organization'), g.reqToken],
    },
    async (req, reply) => {
      const b = req.body;
      const org = await services.orgs.create(requireDoer(req), {
        username: b.username,
        fullName: b.full_name,
        email: b.email,
        description: b.description,
        website: b.website,
        location: b.location,
        visibility: b.visibility || undefined,
        repoAdminChangeTeamAccess: b.repo_admin_change_team_access,
      });
      return reply.status(201).send(toApiOrg(org, config.rootUrl));
    },
  );

  app.get(
    '/orgs/:org',
    {
      schema: {
        operationId: 'orgGet',
        tags: ['organization'],
        params: OrgParams,
        response: { 200: Organization, ...errorResponses(403, 404) },
      },
      preValidation: [g.scopes('organization'), g.orgAssignment, g.publicOnly],
    },
    // orgAssignment answers an organization the caller may not see as a missing one.
    async (req) => toApiOrg(requireOrg(req), config.rootUrl),
  );

  app.delete(
    '/orgs/:org',
    {
      schema: {
        operationId: 'orgDelete',
        tags: ['organization'],
        params: OrgParams,
        response: { 204: NoContent, ...errorResponses(401, 403, 404, 409) },
      },
      preValidation: ownerChain,
    },
    async (req, reply) => {
      await services.orgs.delete(requireOrg(req));
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/orgs/:org/teams',
    {
      schema: {
        operationId: 'orgCreateTeam',
        tags: ['organization'],
        params: OrgParams,
        body: CreateTeamOption,
        response: { 201: Team, ...errorResponses(401, 403, 404, 422) },
      },
      preValidation: ownerChain,
    },
    async (req, reply) => {
      const org = requireOrg(req);
      const b = req.body;
      const team = await services.orgs.createTeam(org, {
        name: b.name,
        description: b.description,
        permission: b.permission,
        includesAllRepositories: b.includes_all_repositories,
        canCreateOrgRepo: b.can_create_org_repo,
        units: b.units,
        unitsMap: b.units_map,
      });
      return reply.status(201).send(toApiTeam(team, org, config.rootUrl));
    },
  );

  app.post(
    '/orgs/:org/repos',
    {
      schema: {
        operationId: 'createOrgRepo',
        tags: ['organization'],
        params: OrgParams,
        body: CreateRepoOption,
        response: { 201: Repository, ...errorResponses(400, 401, 403, 404, 409, 422) },
      },
      preValidation: [g.scopes('organization'), g.orgAssignment, g.publicOnly, g.reqToken],
    },
    async (req, reply) => {
      const org = requireOrg(req);
      const doer = requireDoer(req);
      if (!(await services.permissions.canCreateOrgRepo(actorOf(req), org))) {
        throw AppError.forbidden('User is not allowed to create repositories in this organization.');
      }
      const repo = await services.repos.create(doer, org, createRepoInput(req.body));
      const mode = await services.permissions.repoAccessMode(actorOf(req), repo, org);
      return reply.status(201).send(toApiRepo(repo, org, mode, viewerOf(req, services), config.rootUrl));
    },
  );

  const TeamMemberParams = Type.Object({ id: Type.String(), username: Type.String() });
  const teamChain = [g.scopes('organization'), g.reqToken, g.teamAssignmentAsOwner];

  for (const method of ['PUT', 'DELETE'] as const) {
    app.route({
      method,
      url: '/teams/:id/members/:username',
      schema: {
        operationId: method === 'PUT' ? 'orgAddTeamMember' : 'orgRemoveTeamMember',
        tags: ['organization'],
        params: TeamMemberParams,
        response: { 204: NoContent, ...errorResponses(401, 403, 404, 409) },
      },
      preValidation: teamChain,
      handler: async (req, reply) => {
        const { username } = req.params;
        const user = await services.accounts.findByName(username);
        if (!user) throw AppError.notFound();
        if (method === 'PUT') await services.orgs.addMember(requireTeam(req), user);
        else await services.orgs.removeMember(requireTeam(req), user);
        return reply.status(204).send(null);
      },
    });
  }
}
