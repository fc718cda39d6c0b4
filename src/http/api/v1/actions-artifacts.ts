// A repository's Actions artifacts (Forgejo 16: routers/api/v1/repo/action.go
// ListActionArtifacts, ListActionRunArtifacts, GetActionArtifact,
// DeleteActionArtifact, DownloadActionArtifact). Reading needs read access to
// the Actions unit (anonymous works on public repositories), as the runs
// routes; deleting needs a token and write access to Actions.
import { Type } from 'typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { linkHeader, parseIdParam, parsePage } from '../../../modules/pagination.ts';
import type { ArtifactGroup } from '../../../models/artifacts.ts';
import { requireRepo } from '../../request-context.ts';
import { sendArtifactZip } from '../../send-artifact-zip.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { setTotalCount } from './route-context.ts';
import { ActionArtifact, ActionArtifactArray } from '../../../api-types/artifact-schemas.ts';
import type { ActionArtifactJson } from '../../../api-types/artifact-schemas.ts';
import { NoContent, errorResponses } from '../../../api-types/schemas.ts';

type Query = Record<string, string | string[] | undefined>;

function first(value: string | string[] | undefined): string {
  return (Array.isArray(value) ? value[0] : value) ?? '';
}

const iso = (unixSec: number) => new Date(unixSec * 1000).toISOString().replace(/\.000Z$/, 'Z');

export function actionsArtifactRoutes(app: ApiApp, ctx: RouteContext): void {
  const { config, services, guards: g } = ctx;
  const readGuards = [g.scopes('repository'), g.repoAssignment, g.publicOnly, g.reqRepoReader('actions')];
  const writeGuards = [...readGuards, g.reqToken, g.reqRepoWriter('actions')];
  const tags = ['repository'];
  const repoParams = Type.Object({ owner: Type.String(), repo: Type.String() });
  const runParams = Type.Object({ owner: Type.String(), repo: Type.String(), run_id: Type.String() });
  const artifactParams = Type.Object({ owner: Type.String(), repo: Type.String(), artifact_id: Type.String() });

  const render =
    (req: FastifyRequest) =>
    (group: ArtifactGroup): ActionArtifactJson => {
      const { owner, repo } = requireRepo(req);
      return {
        id: group.id,
        name: group.name,
        size_in_bytes: group.size,
        archive_download_url: `${config.rootUrl}api/v1/repos/${owner.name}/${repo.name}/actions/artifacts/${group.id}/zip`,
        expired: group.expired,
        run_id: group.runId,
        created_at: iso(group.created),
        updated_at: iso(group.updated),
        expires_at: iso(group.expiredUnix),
      };
    };

  const listHandler = (withRun: boolean) => async (req: FastifyRequest, reply: FastifyReply) => {
    const query = req.query as Query;
    const page = parsePage(query, config);
    const name = first(query.name);
    const runId = withRun ? parseIdParam((req.params as { run_id: string }).run_id) : undefined;
    const { groups, total } = await services.artifactsRest.list(
      requireRepo(req).repo,
      { ...(runId === undefined ? {} : { runId }), ...(name === '' ? {} : { name }) },
      page,
    );
    setTotalCount(reply, total);
    const link = linkHeader(new URL(`${config.rootUrl}${req.url.slice(1)}`), page, total);
    if (link !== null) {
      reply.header('Link', link);
      reply.header('Access-Control-Expose-Headers', 'Link, X-Total-Count');
    }
    return groups.map(render(req));
  };
  const listQuery = Type.Object({
    name: Type.Optional(Type.String({ description: 'only artifacts of this name' })),
    page: Type.Optional(Type.String()),
    limit: Type.Optional(Type.String()),
  });

  app.get(
    '/repos/:owner/:repo/actions/artifacts',
    {
      schema: {
        operationId: 'ListActionArtifacts',
        tags,
        description: "The repository's artifacts (confirmed or expired), one per run and name, newest first.",
        params: repoParams,
        querystring: listQuery,
        response: { 200: ActionArtifactArray, ...errorResponses(403, 404) },
      },
      preValidation: readGuards,
    },
    listHandler(false),
  );

  app.get(
    '/repos/:owner/:repo/actions/runs/:run_id/artifacts',
    {
      schema: {
        operationId: 'ListActionRunArtifacts',
        tags,
        description: "The run's artifacts; a run of another repository is 404.",
        params: runParams,
        querystring: listQuery,
        response: { 200: ActionArtifactArray, ...errorResponses(403, 404) },
      },
      preValidation: readGuards,
    },
    listHandler(true),
  );

  app.get(
    '/repos/:owner/:repo/actions/artifacts/:artifact_id',
    {
      schema: {
        operationId: 'GetActionArtifact',
        tags,
        params: artifactParams,
        response: { 200: ActionArtifact, ...errorResponses(403, 404) },
      },
      preValidation: readGuards,
    },
    async (req) => {
      const id = parseIdParam((req.params as { artifact_id: string }).artifact_id);
      const { group } = await services.artifactsRest.get(requireRepo(req).repo, id);
      return render(req)(group);
    },
  );

  app.delete(
    '/repos/:owner/:repo/actions/artifacts/:artifact_id',
    {
      schema: {
        operationId: 'DeleteActionArtifact',
        tags,
        description: 'Marks the artifact for deletion; its files are removed by the next clean-up pass.',
        params: artifactParams,
        response: { 204: NoContent, ...errorResponses(403, 404) },
      },
      preValidation: writeGuards,
    },
    async (req, reply) => {
      const id = parseIdParam((req.params as { artifact_id: string }).artifact_id);
      await services.artifactsRest.delete(requireRepo(req).repo, id);
      return reply.status(204).send(null);
    },
  );

  app.get(
    '/repos/:owner/:repo/actions/artifacts/:artifact_id/zip',
    {
      schema: {
        operationId: 'DownloadActionArtifact',
        tags,
        description:
          "The artifact as a zip (a v4 artifact's stored zip, or a v3 artifact's files zipped on the fly; streamed). 422: a v3 artifact too large for a zip without ZIP64 (4 GiB).",
        params: artifactParams,
        response: { ...errorResponses(403, 404, 422) },
      },
      preValidation: readGuards,
    },
    async (req, reply) => {
      const id = parseIdParam((req.params as { artifact_id: string }).artifact_id);
      return sendArtifactZip(req, reply, await services.artifactsRest.openZip(requireRepo(req).repo, id));
    },
  );
}
