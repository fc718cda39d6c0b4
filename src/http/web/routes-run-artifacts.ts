// A run's artifacts in the console: the list on the run page, each one's zip,
// and Delete for the users who may write Actions (Forgejo: routers/web/repo/
// actions/view.go ArtifactsView, ArtifactsDownloadView, ArtifactsDeleteView,
// under `/{owner}/{repo}/actions/runs/{run}/artifacts/{artifact_name}`).
// Forgejo's page deletes with a DELETE from its Vue component; here Delete is
// a form POST to `…/artifacts/{name}/delete`, CSRF-checked like every
// console form. What is visible, who may read, and what a zip holds are the
// API's answers (ArtifactRestService), asked through the API's guards.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../modules/errors.ts';
import type { ArtifactGroup } from '../../models/artifacts.ts';
import type { Services } from '../../services/index.ts';
import { requireRepo } from '../request-context.ts';
import { sendArtifactZip } from '../send-artifact-zip.ts';
import type { WebContext } from './context.ts';
import { pageOf, pagerOf, param, positiveInt, reqSignIn } from './context.ts';
import { seeOther } from './render.ts';
import { repoBase } from './routes-actions.ts';
import { setFlash } from './session.ts';

/** Artifacts listed per page of the run page (the rest behind Older/Newer links, `?artifacts=<page>`). */
const PAGE_SIZE = 50;
const PAGE_PARAM = 'artifacts';

export interface RunArtifactsPage {
  items: Array<{ name: string; size: number; expired: boolean; downloadUrl: string; deleteUrl: string }>;
  total: number;
  newerUrl: string | null;
  olderUrl: string | null;
}

const artifactUrl = (runUrl: string, name: string) => `${runUrl}/artifacts/${encodeURIComponent(name)}`;

/** One page of the run's artifacts, newest first, for the run page at `pageUrl`. */
export async function runArtifactsPage(
  services: Services,
  req: FastifyRequest,
  runId: number,
  runUrl: string,
  pageUrl: string,
): Promise<RunArtifactsPage> {
  const { page, ...slice } = pageOf(req, PAGE_SIZE, PAGE_PARAM);
  const { groups, total } = await services.artifactsRest.list(requireRepo(req).repo, { runId }, slice);
  const pager = pagerOf(page, PAGE_SIZE, total, pageUrl, PAGE_PARAM);
  return {
    items: groups.map((group) => ({
      name: group.name,
      size: group.size,
      expired: group.expired,
      downloadUrl: artifactUrl(runUrl, group.name),
      deleteUrl: `${artifactUrl(runUrl, group.name)}/delete`,
    })),
    total,
    newerUrl: pager.previousUrl,
    olderUrl: pager.nextUrl,
  };
}

export function runArtifactRoutes(app: FastifyInstance, ctx: WebContext): void {
  const { services, guards: g, cookies } = ctx;
  const readGuards = [g.repoAssignment, g.reqRepoReader('actions')];
  const writeGuards = [reqSignIn, ...readGuards, g.reqRepoWriter('actions')];

  /** The run of the URL and its artifact of the URL's name (confirmed or expired), or 404. */
  const artifactOf = async (req: FastifyRequest): Promise<{ runIndex: number; group: ArtifactGroup }> => {
    const { repo } = requireRepo(req);
    const { run } = await services.runs.getByIndex(repo, positiveInt(param(req, 'index')));
    const name = param(req, 'name');
    const { groups } = await services.artifactsRest.list(repo, { runId: run.id, name }, { limit: 1, offset: 0 });
    const group = groups[0];
    if (group === undefined) throw AppError.notFoundMessage('the run has no artifact of that name');
    return { runIndex: run.index, group };
  };

  app.get('/:owner/:repo/actions/runs/:index/artifacts/:name', { preHandler: readGuards }, async (req, reply) => {
    const { group } = await artifactOf(req);
    // An expired artifact's files are gone: openZip answers 404, as Forgejo's page does.
    return sendArtifactZip(req, reply, await services.artifactsRest.openZip(requireRepo(req).repo, group.id));
  });

  app.post(
    '/:owner/:repo/actions/runs/:index/artifacts/:name/delete',
    { preHandler: writeGuards },
    async (req, reply) => {
      const { runIndex, group } = await artifactOf(req);
      await services.artifactsRest.delete(requireRepo(req).repo, group.id);
      setFlash(reply, cookies, 'info', `Artifact ${group.name} was deleted.`);
      return seeOther(reply, `${repoBase(req)}/actions/runs/${runIndex}`);
    },
  );
}
