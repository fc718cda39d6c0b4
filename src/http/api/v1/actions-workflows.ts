// GET /repos/{o}/{r}/actions/workflows, GET …/workflows/{workflow_id},
// PUT …/workflows/{workflow_id}/disable|enable, GET …/workflows/{workflow_id}/runs
// (Gitea's routers/api/v1/api.go and repo/action.go; Forgejo has no
// workflows API). Group guards as Gitea's: a token, read access to Actions
// (so, unlike the runs list, no anonymous access); enable/disable need write
// access to Actions. The rules live in WorkflowService.
import type { FastifyReply } from 'fastify';
import { Type } from 'typebox';
import { parsePage } from '../../../modules/pagination.ts';
import { workflowRunObject } from '../../../services/webhooks/action-payloads.ts';
import { requireRepo } from '../../request-context.ts';
import type { ApiApp, RouteContext } from './route-context.ts';
import { setTotalCount } from './route-context.ts';
import { NoContent, errorResponses } from '../../../api-types/schemas.ts';
import {
  ActionWorkflow,
  ActionWorkflowResponse,
  ActionWorkflowRunsResponse,
  WorkflowParams,
} from '../../../api-types/workflow-schemas.ts';

type Query = Record<string, string | string[] | undefined>;

function all(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? value : [value];
}

function first(value: string | string[] | undefined): string {
  return all(value)[0] ?? '';
}

export function actionsWorkflowRoutes(app: ApiApp, { config, services, guards: g }: RouteContext): void {
  const readGuards = [g.scopes('repository'), g.repoAssignment, g.publicOnly, g.reqToken, g.reqRepoReader('actions')];
  const writeGuards = [...readGuards, g.reqRepoWriter('actions')];
  const repoParams = Type.Object({ owner: Type.String(), repo: Type.String() });
  const tags = ['repository'];

  app.get(
    '/repos/:owner/:repo/actions/workflows',
    {
      schema: {
        operationId: 'ActionsListRepositoryWorkflows',
        tags,
        description: 'The workflow files of the default branch head (not paginated), Gitea’s shape.',
        params: repoParams,
        response: { 200: ActionWorkflowResponse, ...errorResponses(401, 403, 404) },
      },
      preValidation: readGuards,
    },
    async (req) => {
      const { repo, owner } = requireRepo(req);
      const workflows = await services.workflows.list(repo, owner);
      return { workflows, total_count: workflows.length };
    },
  );

  app.get(
    '/repos/:owner/:repo/actions/workflows/:workflowfilename',
    {
      schema: {
        operationId: 'ActionsGetWorkflow',
        tags,
        description:
          'The workflow is named by its file name in the workflows directory (`ci.yml`), Gitea’s `workflow_id`.',
        params: WorkflowParams,
        response: { 200: ActionWorkflow, ...errorResponses(401, 403, 404) },
      },
      preValidation: readGuards,
    },
    async (req) => {
      const { repo, owner } = requireRepo(req);
      return services.workflows.get(repo, owner, req.params.workflowfilename);
    },
  );

  for (const action of ['disable', 'enable'] as const) {
    app.put(
      `/repos/:owner/:repo/actions/workflows/:workflowfilename/${action}`,
      {
        schema: {
          operationId: action === 'disable' ? 'ActionsDisableWorkflow' : 'ActionsEnableWorkflow',
          tags,
          description:
            action === 'disable'
              ? 'A disabled workflow is triggered by nothing: pushes ignore it, dispatch answers 403 `workflow is disabled`. Idempotent.'
              : 'Triggers reach the workflow again. Idempotent.',
          params: WorkflowParams,
          response: { 204: NoContent, ...errorResponses(401, 403, 404) },
        },
        preValidation: writeGuards,
      },
      async (req, reply) => {
        await services.workflows.setDisabled(requireRepo(req).repo, req.params.workflowfilename, action === 'disable');
        return (reply as FastifyReply).status(204).send();
      },
    );
  }

  app.get(
    '/repos/:owner/:repo/actions/workflows/:workflowfilename/runs',
    {
      schema: {
        operationId: 'ActionsListWorkflowRuns',
        tags,
        description:
          'Runs of one workflow newest first, Gitea’s shape and filters: `event`, `branch`, `status` (GitHub’s names, may repeat), `actor`, `head_sha`.',
        params: WorkflowParams,
        response: { 200: ActionWorkflowRunsResponse, ...errorResponses(400, 401, 403, 404) },
      },
      preValidation: readGuards,
    },
    async (req, reply) => {
      const { repo, owner } = requireRepo(req);
      const query = req.query as Query;
      const page = parsePage(req.query as Record<string, unknown>, config);
      const { runs, total } = await services.workflows.runs(
        repo,
        req.params.workflowfilename,
        {
          event: first(query.event),
          branch: first(query.branch),
          statuses: all(query.status),
          actor: first(query.actor),
          headSha: first(query.head_sha),
        },
        page,
      );
      setTotalCount(reply, total);
      const nowSec = Math.floor(Date.now() / 1000);
      return {
        workflow_runs: runs.map(({ run, triggerUser, attempt }) =>
          workflowRunObject({ repo, owner, triggerUser, rootUrl: config.rootUrl, nowSec }, run, attempt),
        ),
        total_count: total,
      };
    },
  );
}
