// Commit statuses of a repository (Forgejo's routers/api/v1/repo/status.go):
// reading needs read access to the code (anonymous works on public
// repositories); creating needs a signed-in writer.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { AccessMode } from '../../../modules/access-mode.ts';
import { linkHeader, parsePage } from '../../../modules/pagination.ts';
import { toApiCommitStatus } from '../../../services/convert-commit-statuses.ts';
import type { StatusWithCreator } from '../../../services/commit-statuses.ts';
import { toApiRepo } from '../../../services/convert.ts';
import { bindLikeGo } from '../../guards.ts';
import { requireDoer, requireRepo } from '../../request-context.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { setTotalCount, viewerOf } from './route-context.ts';
import { CombinedStatus, CommitStatus, CreateStatusOption } from '../../../api-types/status-schemas.ts';
import { errorResponses } from '../../../api-types/schemas.ts';

type Query = Record<string, string | string[] | undefined>;

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

export function commitStatusRoutes(app: ApiApp, ctx: RouteContext): void {
  const { config, services, guards: g } = ctx;
  const readGuards = [g.scopes('repository'), g.repoAssignment, g.publicOnly, g.reqRepoReader()];
  const tags = ['repository'];
  const shaParams = Type.Object({ owner: Type.String(), repo: Type.String(), sha: Type.String() });
  const refParams = Type.Object({ owner: Type.String(), repo: Type.String(), ref: Type.String() });

  const render = (req: FastifyRequest) => {
    const { repo } = requireRepo(req);
    const viewer = viewerOf(req, services);
    return (item: StatusWithCreator) => toApiCommitStatus(item, repo, viewer, config.rootUrl);
  };

  /** One page of a sha's statuses with X-Total-Count and Link (Forgejo's getCommitStatuses). */
  const listStatuses = async (req: FastifyRequest, reply: FastifyReply, sha: string) => {
    const query = req.query as Query;
    const page = parsePage(query, config);
    const state = first(query.state);
    const sort = first(query.sort);
    const { statuses, total } = await services.commitStatuses.list(requireRepo(req).repo, sha, {
      ...(state !== undefined ? { state } : {}),
      ...(sort !== undefined ? { sort } : {}),
      offset: page.offset,
      limit: page.limit,
    });
    setTotalCount(reply, total);
    const link = linkHeader(new URL(`${config.rootUrl}${req.url.slice(1)}`), page, total);
    if (link !== null) {
      reply.header('Link', link);
      reply.header('Access-Control-Expose-Headers', 'Link, X-Total-Count');
    }
    return statuses.map(render(req));
  };

  app.post(
    '/repos/:owner/:repo/statuses/:sha',
    {
      schema: {
        operationId: 'repoCreateStatus',
        tags,
        description: 'Appends a status to a commit (a full or abbreviated id). The state is stored as given.',
        params: shaParams,
        body: CreateStatusOption,
        response: { 201: CommitStatus, ...errorResponses(400, 401, 403, 404) },
      },
      preValidation: [...readGuards, g.reqToken, g.reqRepoWriter(), bindLikeGo],
    },
    async (req, reply) => {
      const { repo, owner } = requireRepo(req);
      const { sha } = req.params;
      const created = await services.commitStatuses.create(repo, owner, requireDoer(req), sha, req.body);
      return reply.status(201).send(render(req)(created));
    },
  );

  app.get(
    '/repos/:owner/:repo/statuses/:sha',
    {
      schema: {
        operationId: 'repoListStatuses',
        tags,
        description: 'Newest first unless `sort` says otherwise; `state` filters; X-Total-Count and Link.',
        params: shaParams,
        response: { 200: Type.Array(CommitStatus), ...errorResponses(403, 404) },
      },
      preValidation: readGuards,
    },
    async (req, reply) => {
      const { sha } = req.params;
      return listStatuses(req, reply, await services.commitStatuses.resolveRef(requireRepo(req).repo, sha));
    },
  );

  app.get(
    '/repos/:owner/:repo/commits/:ref/statuses',
    {
      schema: {
        operationId: 'repoListStatusesByRef',
        tags,
        description: '`ref` is a branch, a tag or a (short) commit id; one that does not resolve lists nothing.',
        params: refParams,
        response: { 200: Type.Array(CommitStatus), ...errorResponses(403, 404) },
      },
      preValidation: readGuards,
    },
    async (req, reply) => {
      const { ref } = req.params;
      return listStatuses(req, reply, await services.commitStatuses.resolveRef(requireRepo(req).repo, ref));
    },
  );

  app.get(
    '/repos/:owner/:repo/commits/:ref/status',
    {
      schema: {
        operationId: 'repoGetCombinedStatusByRef',
        tags,
        description:
          'The latest status of each context and the worst of their states; every field empty when there is none.',
        params: refParams,
        response: { 200: CombinedStatus, ...errorResponses(403, 404) },
      },
      preValidation: readGuards,
    },
    async (req, reply) => {
      const { repo, owner } = requireRepo(req);
      const { ref } = req.params;
      const sha = await services.commitStatuses.resolveRef(repo, ref);
      const page = parsePage(req.query as Query, config);
      const { state, statuses, total } = await services.commitStatuses.combined(repo, sha, page);
      setTotalCount(reply, total);
      if (statuses.length === 0)
        return { state: '', sha: '', total_count: 0, statuses: null, repository: null, commit_url: '', url: '' };
      return {
        state,
        sha,
        total_count: statuses.length,
        statuses: statuses.map(render(req)),
        // Forgejo shows the repository with read access, whoever asks (convert.ToCombinedStatus).
        repository: toApiRepo(repo, owner, AccessMode.read, viewerOf(req, services), config.rootUrl),
        commit_url: '',
        url: '',
      };
    },
  );
}
