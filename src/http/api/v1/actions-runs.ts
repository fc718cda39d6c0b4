// Workflow runs, tasks and dispatch of a repository (Forgejo's
// routers/api/v1/repo/action.go: ListActionRuns, GetActionRun,
// ListActionTasks, DispatchWorkflow). Reading needs read access to the
// Actions unit (anonymous works on public repositories); dispatch needs write.
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { parseStatusName } from '../../../modules/actions-status.ts';
import { AppError } from '../../../modules/errors.ts';
import { parseIdParam, parsePage } from '../../../modules/pagination.ts';
import type { RunFilter } from '../../../models/action-runs.ts';
import { runRenderer, toApiTask } from '../../../services/convert-actions.ts';
import type { RunWithUser } from '../../../services/actions/runs.ts';
import type { Guard } from '../../guards.ts';
import { requireDoer, requireRepo } from '../../request-context.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { viewerOf } from './route-context.ts';
import {
  ActionRun,
  ActionTaskResponse,
  DispatchWorkflowOption,
  DispatchWorkflowRun,
  ListActionRunResponse,
  NoContent,
  RunDetails,
  errorResponses,
} from '../../../api-types/schemas.ts';
import type { ActionStatusValue } from '../../../modules/actions-status.ts';

type Query = Record<string, string | string[] | undefined>;

function all(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

function first(value: string | string[] | undefined): string {
  return all(value)[0] ?? '';
}

/** Every `status` value must be one of the eight names; the first one that is not answers 400. */
function parseStatuses(query: Query): ActionStatusValue[] {
  return all(query.status).map((name) => {
    const status = parseStatusName(name);
    if (status === null) throw AppError.invalid(`unknown status: ${name}`);
    return status;
  });
}

/** Forgejo's filters: repeated keys are OR, different keys AND; empty or unusable values are ignored. */
function parseRunFilter(query: Query): RunFilter {
  const filter: RunFilter = {};
  if (query.event !== undefined) filter.events = all(query.event);
  const statuses = parseStatuses(query);
  if (statuses.length > 0) filter.statuses = statuses;
  const runNumber = parseIdParam(first(query.run_number));
  if (runNumber > 0) filter.runNumber = runNumber;
  for (const [key, field] of [
    ['head_sha', 'headSha'],
    ['ref', 'ref'],
    ['workflow_id', 'workflowId'],
  ] as const) {
    const value = first(query[key]);
    if (value !== '') filter[field] = value;
  }
  return filter;
}

/**
 * Gitea's form binding sends inputs as `inputs[name]=value`; fold those keys
 * into the `inputs` object before validation drops them as unknown.
 */
const foldFormInputs: Guard = async (req) => {
  if (req.body === undefined || req.body === null) {
    req.body = {};
    return;
  }
  if (typeof req.body !== 'object' || Array.isArray(req.body)) return;
  const body = req.body as Record<string, unknown>;
  for (const key of Object.keys(body)) {
    const match = /^inputs\[(.+)\]$/.exec(key);
    if (match === null) continue;
    const inputs = (
      typeof body.inputs === 'object' && body.inputs !== null ? body.inputs : (body.inputs = {})
    ) as Record<string, unknown>;
    inputs[match[1] as string] = body[key];
    delete body[key];
  }
  for (const flag of ['return_run_info', 'return_run_details'] as const) {
    if (body[flag] === 'true') body[flag] = true;
    else if (body[flag] === 'false') body[flag] = false;
  }
};

function isTrue(value: string | string[] | undefined): boolean {
  return ['true', '1'].includes(first(value).toLowerCase());
}

export function actionsRunRoutes(app: ApiApp, ctx: RouteContext): void {
  const { config, services, guards: g } = ctx;
  const readGuards = [g.scopes('repository'), g.repoAssignment, g.publicOnly, g.reqRepoReader('actions')];
  const repoParams = Type.Object({ owner: Type.String(), repo: Type.String() });
  const tags = ['repository'];

  const viewRun = (req: FastifyRequest) => {
    const { repo, owner, mode } = requireRepo(req);
    const render = runRenderer(
      repo,
      owner,
      mode,
      viewerOf(req, services),
      config.rootUrl,
      Math.floor(Date.now() / 1000),
    );
    return (item: RunWithUser) => render(item.run, item.triggerUser);
  };

  app.get(
    '/repos/:owner/:repo/actions/runs',
    {
      schema: {
        operationId: 'ListActionRuns',
        tags,
        description: 'Runs newest first. `event` and `status` may repeat (OR); filters combine with AND.',
        params: repoParams,
        response: { 200: ListActionRunResponse, ...errorResponses(400, 403, 404) },
      },
      preValidation: readGuards,
    },
    async (req) => {
      const filter = parseRunFilter(req.query as Query);
      const page = parsePage(req.query as Record<string, unknown>, config);
      const { runs, total } = await services.runs.list(requireRepo(req).repo, filter, page);
      return { workflow_runs: runs.map(viewRun(req)), total_count: total };
    },
  );

  app.get(
    '/repos/:owner/:repo/actions/runs/:run_id',
    {
      schema: {
        operationId: 'GetActionRun',
        tags,
        description: '`run_id` is the global run id, not the per-repository run number.',
        params: Type.Object({ owner: Type.String(), repo: Type.String(), run_id: Type.String() }),
        response: { 200: ActionRun, ...errorResponses(403, 404) },
      },
      preValidation: readGuards,
    },
    async (req) => {
      const runId = parseIdParam(req.params.run_id);
      const run = await services.runs.get(requireRepo(req).repo, runId);
      return viewRun(req)(run);
    },
  );

  app.get(
    '/repos/:owner/:repo/actions/tasks',
    {
      schema: {
        operationId: 'ListActionTasks',
        tags,
        description: 'Tasks newest first; `status` may repeat (OR).',
        params: repoParams,
        response: { 200: ActionTaskResponse, ...errorResponses(400, 403, 404) },
      },
      preValidation: readGuards,
    },
    async (req) => {
      const statuses = parseStatuses(req.query as Query);
      const page = parsePage(req.query as Record<string, unknown>, config);
      const { repo, owner } = requireRepo(req);
      const { tasks, total } = await services.runs.tasks(repo, statuses, page);
      const repoHtmlUrl = `${config.rootUrl}${owner.name}/${repo.name}`;
      return { workflow_runs: tasks.map((task) => toApiTask(task, repoHtmlUrl)), total_count: total };
    },
  );

  app.post(
    '/repos/:owner/:repo/actions/workflows/:workflowfilename/dispatches',
    {
      schema: {
        operationId: 'DispatchWorkflow',
        tags,
        description:
          'Runs a workflow file at a ref. `return_run_info: true` answers 201 with the run (Forgejo); ' +
          '`return_run_details` (body or query) answers 200 with RunDetails (Gitea); otherwise 204.',
        params: Type.Object({ owner: Type.String(), repo: Type.String(), workflowfilename: Type.String() }),
        body: DispatchWorkflowOption,
        response: {
          200: RunDetails,
          201: DispatchWorkflowRun,
          204: NoContent,
          ...errorResponses(400, 401, 403, 404, 422, 423),
        },
      },
      preValidation: [...readGuards, g.reqToken, g.reqRepoWriter('actions'), g.mustNotBeArchived, foldFormInputs],
    },
    async (req, reply) => {
      const { repo, owner } = requireRepo(req);
      const body = req.body;
      const fileName = req.params.workflowfilename;
      const result = await services.dispatch.dispatch(repo, owner, requireDoer(req), fileName, {
        ref: body.ref ?? '',
        inputs: body.inputs ?? {},
      });
      if (body.return_run_info === true) {
        return reply.status(201).send({ id: result.run.id, run_number: result.run.index, jobs: result.jobIds });
      }
      if (body.return_run_details === true || isTrue((req.query as Query).return_run_details)) {
        const repoPath = `${owner.name}/${repo.name}`;
        return reply.status(200).send({
          workflow_run_id: result.run.id,
          run_url: `${config.rootUrl}api/v1/repos/${repoPath}/actions/runs/${result.run.id}`,
          html_url: `${config.rootUrl}${repoPath}/actions/runs/${result.run.index}`,
        });
      }
      return reply.status(204).send(null);
    },
  );
}
