// Run control of a repository's workflow runs: cancel (Forgejo 16,
// routers/api/v1/repo/action.go CancelActionRun → 204), rerun on Gitea's
// paths (routers/api/v1/repo/action.go RerunWorkflowRun, RerunFailedWorkflowRun,
// RerunWorkflowJob → 201, answered with Forgejo's ActionRun for a run and
// Gitea's ActionWorkflowJob for a job) and delete (DELETE …/runs/{run_id} → 204).
// Cancel and rerun need write access to the Actions unit, delete needs
// repository admin; a run the caller may not see is 404 (the read guards run first).
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { AppError } from '../../../modules/errors.ts';
import { parseIdParam } from '../../../modules/pagination.ts';
import { runRenderer } from '../../../services/convert-actions.ts';
import { toActionWorkflowJob } from '../../../services/convert-jobs.ts';
import type { RerunSelection } from '../../../services/actions/run-control.ts';
import { requireRepo } from '../../request-context.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { viewerOf } from './route-context.ts';
import { ActionRun, NoContent, errorResponses } from '../../../api-types/schemas.ts';
import { ActionWorkflowJob } from '../../../api-types/job-schemas.ts';

const runParams = Type.Object({ owner: Type.String(), repo: Type.String(), run_id: Type.String() });

export function actionsRunControlRoutes(app: ApiApp, ctx: RouteContext): void {
  const { config, services, guards: g } = ctx;
  const readGuards = [g.scopes('repository'), g.repoAssignment, g.publicOnly, g.reqRepoReader('actions')];
  const writeGuards = [...readGuards, g.reqToken, g.reqRepoWriter('actions')];
  const tags = ['repository'];

  /** The run as GET …/runs/{run_id} shows it to this caller. */
  const renderRun = async (req: FastifyRequest, runId: number) => {
    const { repo, owner, mode } = requireRepo(req);
    const { run, triggerUser } = await services.runs.get(repo, runId);
    return runRenderer(
      repo,
      owner,
      mode,
      viewerOf(req, services),
      config.rootUrl,
      Math.floor(Date.now() / 1000),
    )(run, triggerUser);
  };

  app.post(
    '/repos/:owner/:repo/actions/runs/:run_id/cancel',
    {
      schema: {
        operationId: 'CancelActionRun',
        tags,
        description:
          'Cancels every unfinished job of the run (a running task is stopped: its runner gets RESULT_CANCELLED on its next UpdateTask); ' +
          'blocked jobs are skipped. 204 also for a finished run, which is left as it is (Forgejo 16).',
        params: runParams,
        response: { 204: NoContent, ...errorResponses(401, 403, 404) },
      },
      preValidation: writeGuards,
    },
    async (req, reply) => {
      await services.runControl.cancel(requireRepo(req).repo, parseIdParam(req.params.run_id));
      return reply.status(204).send(null);
    },
  );

  const rerunRun = (path: string, operationId: string, selection: RerunSelection, description: string) =>
    app.post(
      path,
      {
        schema: {
          operationId,
          tags,
          description,
          params: runParams,
          response: { 201: ActionRun, ...errorResponses(400, 401, 403, 404, 409) },
        },
        preValidation: writeGuards,
      },
      async (req, reply) => {
        const { run } = await services.runControl.rerun(
          requireRepo(req).repo,
          parseIdParam(req.params.run_id),
          selection,
        );
        return reply.status(201).send(await renderRun(req, run.id));
      },
    );

  rerunRun(
    '/repos/:owner/:repo/actions/runs/:run_id/rerun',
    'RerunWorkflowRun',
    { kind: 'all' },
    "Starts the next attempt of every job of a finished run (same job ids, `attempt` + 1; earlier attempts' tasks and logs are kept). " +
      '400 `this workflow run is not done` while it runs.',
  );
  rerunRun(
    '/repos/:owner/:repo/actions/runs/:run_id/rerun-failed-jobs',
    'RerunFailedWorkflowRun',
    { kind: 'failed' },
    'Starts the next attempt of the failed and cancelled jobs of a finished run and of the jobs that need them.',
  );

  app.post(
    '/repos/:owner/:repo/actions/runs/:run_id/jobs/:job_id/rerun',
    {
      schema: {
        operationId: 'RerunWorkflowJob',
        tags,
        description:
          'Starts the next attempt of one job of a finished run; the jobs that need it are blocked again until it finishes.',
        params: Type.Object({
          owner: Type.String(),
          repo: Type.String(),
          run_id: Type.String(),
          job_id: Type.String(),
        }),
        response: { 201: ActionWorkflowJob, ...errorResponses(400, 401, 403, 404, 409) },
      },
      preValidation: writeGuards,
    },
    async (req, reply) => {
      const { repo, owner } = requireRepo(req);
      const jobId = parseIdParam(req.params.job_id);
      const result = await services.runControl.rerun(repo, parseIdParam(req.params.run_id), { kind: 'job', id: jobId });
      const job = result.jobs.find((candidate) => candidate.id === jobId);
      if (job === undefined) throw AppError.notFoundMessage(`workflow job with id ${jobId}`);
      // The same ActionWorkflowJob as GET …/actions/jobs/{job_id}: the new attempt, no runner or steps yet.
      const repoPath = `${owner.name}/${repo.name}`;
      const details = await services.jobs.detailsOf(job);
      return reply
        .status(201)
        .send(
          toActionWorkflowJob(details, `${config.rootUrl}api/v1/repos/${repoPath}`, `${config.rootUrl}${repoPath}`),
        );
    },
  );

  app.delete(
    '/repos/:owner/:repo/actions/runs/:run_id',
    {
      schema: {
        operationId: 'DeleteActionRun',
        tags,
        description:
          'Deletes a finished run with its jobs, tasks and logs. 400 `this workflow run is not done` while it runs (Gitea; Forgejo answers 500). ' +
          'Needs repository admin.',
        params: runParams,
        response: { 204: NoContent, ...errorResponses(400, 401, 403, 404) },
      },
      preValidation: [...readGuards, g.reqToken, g.reqAdmin],
    },
    async (req, reply) => {
      await services.runControl.deleteRun(requireRepo(req).repo, parseIdParam(req.params.run_id));
      return reply.status(204).send(null);
    },
  );
}
