// The runs list of a repository with its workflows sidebar, enable/disable of
// a workflow and the "Run workflow" form (Forgejo: routers/web/repo/actions/actions.go
// List, manual.go ManualRunWorkflow; templates/repo/actions/list.tmpl).
// Access is the API's: the same guards as GET …/actions/runs (read),
// PUT …/workflows/{id}/enable (write) and POST …/dispatches (write).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parseStatusName } from '../../modules/actions-status.ts';
import type { ActionStatusValue } from '../../modules/actions-status.ts';
import { AppError } from '../../modules/errors.ts';
import type { RunFilter } from '../../models/action-runs.ts';
import type { Repository } from '../../models/repos.ts';
import { repoScope } from '../../modules/scope.ts';
import { requireDoer, requireRepo } from '../request-context.ts';
import type { WebContext } from './context.ts';
import { field, passes, queryParam, reqSignIn } from './context.ts';
import { sendPage, seeOther } from './render.ts';
import { chromeOf, setFlash } from './session.ts';

/** Runners read for the label warning (Forgejo's runners page shows 100 a page). */
const MAX_RUNNERS_SCANNED = 1000;

/** Runs per page (Forgejo's default page size for the runs list). */
export const RUNS_PER_PAGE = 30;

export function repoBase(req: FastifyRequest): string {
  const { owner, repo } = requireRepo(req);
  return `/${encodeURIComponent(owner.name)}/${encodeURIComponent(repo.name)}`;
}

export function actionsRoutes(app: FastifyInstance, ctx: WebContext): void {
  const { services, guards: g, cookies } = ctx;
  const readGuards = [g.repoAssignment, g.reqRepoReader('actions')];
  const writeGuards = [reqSignIn, ...readGuards, g.reqRepoWriter('actions'), g.mustNotBeArchived];

  /** The runs list filter from Forgejo's query: `workflow`, `status` (number or name), `actor` (id or name), `event`. */
  const filterOf = async (req: FastifyRequest): Promise<RunFilter | null> => {
    const filter: RunFilter = {};
    const workflow = queryParam(req, 'workflow');
    if (workflow !== '') filter.workflowId = workflow;
    const status = queryParam(req, 'status');
    if (status !== '' && status !== '0') {
      const value = /^\d+$/.test(status) ? Number(status) : parseStatusName(status);
      if (value === null || value > 7) throw AppError.invalid(`unknown status ${status}`);
      filter.statuses = [value as ActionStatusValue];
    }
    const event = queryParam(req, 'event');
    if (event !== '') filter.events = [event];
    const actor = queryParam(req, 'actor');
    if (actor !== '' && actor !== '0') {
      const user = /^\d+$/.test(actor)
        ? await services.accounts.findById(Number(actor))
        : await services.accounts.findByName(actor);
      if (user === null) return null;
      filter.triggerUserId = user.id;
    }
    return filter;
  };

  /** Labels of the online runners this repository's jobs may run on (its own, its owner's, the instance's). */
  const onlineLabels = async (repo: Repository): Promise<Set<string>> => {
    const { runners } = await services.runners.list(repoScope(repo), {
      visible: true,
      page: { limit: MAX_RUNNERS_SCANNED, offset: 0 },
    });
    const labels = new Set<string>();
    for (const runner of runners) {
      if (services.runners.status(runner) === 'offline') continue;
      for (const label of runner.labels ?? []) labels.add(label);
    }
    return labels;
  };

  app.get('/:owner/:repo/actions', { preHandler: readGuards }, async (req, reply) => {
    const { repo } = requireRepo(req);
    const filter = await filterOf(req);
    const before = Number(queryParam(req, 'before'));
    const slice = {
      limit: RUNS_PER_PAGE,
      offset: 0,
      ...(Number.isSafeInteger(before) && before > 0 ? { beforeId: before } : {}),
    };
    const { runs, total } = filter === null ? { runs: [], total: 0 } : await services.runs.list(repo, filter, slice);
    const workflows = await services.workflows.entries(repo, await onlineLabels(repo));
    const selected = queryParam(req, 'workflow');
    const canWrite = await passes(g.reqRepoWriter('actions'), req, reply);
    const last = runs[runs.length - 1];
    const query = (extra: Record<string, string>) => {
      const params = new URLSearchParams();
      for (const key of ['workflow', 'status', 'actor', 'event']) {
        const value = queryParam(req, key);
        if (value !== '') params.set(key, value);
      }
      for (const [key, value] of Object.entries(extra)) params.set(key, value);
      const text = params.toString();
      return text === '' ? '' : `?${text}`;
    };
    return sendPage(reply, 'actions', chromeOf(cookies, req, reply, `Actions · ${repo.name}`), {
      base: repoBase(req),
      repo,
      runs,
      total,
      workflows,
      selected: workflows.find((w) => w.id === selected) ?? null,
      selectedId: selected,
      filters: {
        status: queryParam(req, 'status'),
        actor: queryParam(req, 'actor'),
        event: queryParam(req, 'event'),
      },
      canWrite: canWrite && !!req.auth.doer,
      // The guard of the settings pages (the API's repository Actions settings: repository owner).
      canSettings: !!req.auth.doer && (await passes(g.reqOwner('actions'), req, reply)),
      olderUrl: runs.length === RUNS_PER_PAGE && last ? query({ before: String(last.run.id) }) : null,
      newestUrl: slice.beforeId !== undefined ? query({}) : null,
      defaultBranch: repo.defaultBranch,
    });
  });

  const toggle = (disabled: boolean) => async (req: FastifyRequest, reply: FastifyReply) => {
    const { repo } = requireRepo(req);
    const workflow = field(req.body, 'workflow') || queryParam(req, 'workflow');
    await services.workflows.setDisabled(repo, workflow, disabled);
    setFlash(reply, cookies, 'info', `Workflow ${workflow} ${disabled ? 'disabled' : 'enabled'}.`);
    return seeOther(reply, `${repoBase(req)}/actions?workflow=${encodeURIComponent(workflow)}`);
  };
  app.post('/:owner/:repo/actions/disable', { preHandler: writeGuards }, toggle(true));
  app.post('/:owner/:repo/actions/enable', { preHandler: writeGuards }, toggle(false));

  // Forgejo's form: `workflow`, `ref`, `inputs[<name>]`.
  app.post('/:owner/:repo/actions/manual', { preHandler: writeGuards }, async (req, reply) => {
    const { repo, owner } = requireRepo(req);
    const body = (req.body ?? {}) as Record<string, unknown>;
    const workflow = field(body, 'workflow');
    const inputs: Record<string, string> = {};
    for (const [key, value] of Object.entries(body)) {
      const match = /^inputs\[(.+)\]$/.exec(key);
      if (match && typeof value === 'string') inputs[match[1] as string] = value;
    }
    const back = `${repoBase(req)}/actions?workflow=${encodeURIComponent(workflow)}`;
    try {
      const created = await services.dispatch.dispatch(repo, owner, requireDoer(req), workflow, {
        ref: field(body, 'ref') || repo.defaultBranch,
        inputs,
      });
      setFlash(reply, cookies, 'info', `Workflow run #${created.run.index} was started.`);
      return seeOther(reply, `${repoBase(req)}/actions/runs/${created.run.index}`);
    } catch (error) {
      // A refusal (bad ref, missing required input, disabled workflow) is told on the form's page.
      if (!(error instanceof AppError)) throw error;
      setFlash(reply, cookies, 'error', error.message);
      return seeOther(reply, back);
    }
  });
}
