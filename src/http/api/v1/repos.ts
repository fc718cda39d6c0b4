// Repositories: create, read, edit, delete; collaborators; team grants.
import { Type } from 'typebox';
import type { Static } from 'typebox';
import type { CreateRepoInput } from '../../../services/repos.ts';
import { AppError } from '../../../modules/errors.ts';
import type { RepoUnit } from '../../../models/repos.ts';
import { actorOf, requireDoer, requireRepo } from '../../request-context.ts';
import { toApiRepo } from '../../../services/convert.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { viewerOf } from './route-context.ts';
import {
  AddCollaboratorOption,
  CreateRepoOption,
  EditRepoOption,
  NoContent,
  Repository,
  errorResponses,
} from '../../../api-types/schemas.ts';

const RepoParams = Type.Object({ owner: Type.String(), repo: Type.String() });
const CollaboratorParams = Type.Object({ owner: Type.String(), repo: Type.String(), collaborator: Type.String() });

export function repoRoutes(app: ApiApp, { config, services, guards: g }: RouteContext): void {
  const repoChain = [g.scopes('repository'), g.repoAssignment, g.publicOnly];

  app.post(
    '/user/repos',
    {
      schema: {
        operationId: 'createCurrentUserRepo',
        tags: ['repository'],
        body: CreateRepoOption,
        response: { 201: Repository, ...errorResponses(400, 401, 403, 409, 422) },
      },
      preValidation: [g.scopes('user', 'repository'), g.reqToken],
    },
    async (req, reply) => {
      const doer = requireDoer(req);
      const repo = await services.repos.create(doer, doer, createRepoInput(req.body));
      const mode = await services.permissions.repoAccessMode(actorOf(req), repo, doer);
      return reply.status(201).send(toApiRepo(repo, doer, mode, viewerOf(req, services), config.rootUrl));
    },
  );

  app.get(
    '/repos/:owner/:repo',
    {
      schema: {
        operationId: 'repoGet',
        tags: ['repository'],
        params: RepoParams,
        response: { 200: Repository, ...errorResponses(403, 404) },
      },
      preValidation: [...repoChain, g.reqAnyRepoReader],
    },
    async (req) => {
      const { repo, owner, mode } = requireRepo(req);
      return toApiRepo(repo, owner, mode, viewerOf(req, services), config.rootUrl);
    },
  );

  app.patch(
    '/repos/:owner/:repo',
    {
      schema: {
        operationId: 'repoEdit',
        tags: ['repository'],
        params: RepoParams,
        body: EditRepoOption,
        response: { 200: Repository, ...errorResponses(401, 403, 404, 409, 422) },
      },
      preValidation: [...repoChain, g.reqToken, g.reqAdmin],
    },
    async (req) => {
      const { repo, owner, mode } = requireRepo(req);
      const b = req.body;
      const units: Partial<Record<RepoUnit, boolean>> = {
        issues: b.has_issues,
        wiki: b.has_wiki,
        pull_requests: b.has_pull_requests,
        projects: b.has_projects,
        releases: b.has_releases,
        packages: b.has_packages,
        actions: b.has_actions,
      };
      const updated = await services.repos.edit(repo, owner, {
        name: b.name,
        description: b.description,
        website: b.website,
        private: b.private,
        archived: b.archived,
        template: b.template,
        defaultBranch: b.default_branch,
        units,
      });
      return toApiRepo(updated, owner, mode, viewerOf(req, services), config.rootUrl);
    },
  );

  app.delete(
    '/repos/:owner/:repo',
    {
      schema: {
        operationId: 'repoDelete',
        tags: ['repository'],
        params: RepoParams,
        response: { 204: NoContent, ...errorResponses(401, 403, 404) },
      },
      preValidation: [...repoChain, g.reqToken, g.reqOwner()],
    },
    async (req, reply) => {
      const { repo, owner } = requireRepo(req);
      // Forgejo (repo_module.CanUserDelete): in an organization only its owners may delete.
      if (owner.isOrganization && !(await services.permissions.isOrgOwner(actorOf(req), owner))) {
        throw AppError.forbidden('Given user is not owner of organization.');
      }
      await services.repos.delete(requireDoer(req), repo, owner);
      return reply.status(204).send(null);
    },
  );

  for (const method of ['PUT', 'DELETE'] as const) {
    app.route({
      method,
      url: '/repos/:owner/:repo/collaborators/:collaborator',
      schema: {
        operationId: method === 'PUT' ? 'repoAddCollaborator' : 'repoDeleteCollaborator',
        tags: ['repository'],
        params: CollaboratorParams,
        ...(method === 'PUT' ? { body: Type.Optional(AddCollaboratorOption) } : {}),
        response: { 204: NoContent, ...errorResponses(401, 403, 404, 422) },
      },
      preValidation: [...repoChain, g.reqToken, g.reqAdmin],
      handler: async (req, reply) => {
        const { repo, owner } = requireRepo(req);
        const name = req.params.collaborator;
        const user = await services.accounts.findByName(name);
        if (!user) throw AppError.unprocessable(`user does not exist [uid: 0, name: ${name}]`);
        if (method === 'PUT') {
          const body = (req.body ?? {}) as { permission?: string };
          await services.repos.addCollaborator(repo, owner, user, body.permission);
        } else {
          await services.repos.removeCollaborator(repo, user);
        }
        return reply.status(204).send(null);
      },
    });
  }
}

/** CreateRepoOption → the service's input (POST /user/repos and POST /orgs/{org}/repos). */
export function createRepoInput(b: Static<typeof CreateRepoOption>): CreateRepoInput {
  return {
    name: b.name,
    description: b.description,
    private: b.private,
    autoInit: b.auto_init,
    defaultBranch: b.default_branch,
    template: b.template,
    objectFormatName: b.object_format_name,
  };
}
