// The workflows API (Gitea's routers/api/v1/repo/action.go and
// services/convert/convert.go getActionWorkflowEntry, ListActionWorkflows,
// GetActionWorkflow; Forgejo has none): the workflow files of the default
// branch's head commit, their state, enable/disable, and the runs of one
// workflow.
//
// - The files are those push triggers read (modules/git/workflow-files.ts):
//   the first of .forgejo/workflows, .gitea/workflows, .github/workflows that
//   exists, recursively. A workflow's id is its path in that directory
//   (`ci.yml`), the run's workflow_id; Gitea accepts no numeric id.
// - State is stored per repository and workflow id (models/workflow-states.ts):
//   a workflow disabled and later deleted stays disabled if it comes back, as
//   Gitea's list of disabled file names does.
// - An empty repository (no default branch commit) has no workflows: the
//   list is empty where Gitea answers 500.
import { ActionStatus } from '../../modules/actions-status.ts';
import type { ActionStatusValue } from '../../modules/actions-status.ts';
import type { Clock } from '../../modules/clock.ts';
import { AppError } from '../../modules/errors.ts';
import type { RunFilter, Slice } from '../../models/action-runs.ts';
import { countRuns, listRuns, runAttempts } from '../../models/action-runs.ts';
import type { Db } from '../../models/database.ts';
import type { Repository } from '../../models/repos.ts';
import type { User } from '../../models/users.ts';
import { findAccountByName, findAccountsByIds, ghostUser } from '../../models/users.ts';
import { listDisabledWorkflows, setWorkflowDisabled } from '../../models/workflow-states.ts';
import type { ActionWorkflowJson } from '../../api-types/workflow-schemas.ts';
import { apiTime } from '../convert.ts';
import { literalRunsOn } from '../../modules/workflows/parse.ts';
import type { GitRepositories } from '../git-repositories.ts';
import type { RunWithUser } from './runs.ts';
import type { ScheduleService } from './schedules.ts';
import type { WorkflowCatalog, WorkflowFile } from './workflow-catalog.ts';

/** Go's zero time.Time, what Gitea puts in `deleted_at`. */
const GO_ZERO_TIME = '0001-01-01T00:00:00Z';

/**
 * Gitea's runs-list status vocabulary (GitHub's), routers/api/v1/shared/action.go
 * convertToInternal: each name selects one or more stored statuses.
 */
const GITEA_STATUS_FILTER: Readonly<Record<string, readonly ActionStatusValue[]>> = {
  pending: [ActionStatus.blocked],
  waiting: [ActionStatus.blocked],
  requested: [ActionStatus.blocked],
  action_required: [ActionStatus.blocked],
  queued: [ActionStatus.waiting],
  in_progress: [ActionStatus.running],
  completed: [ActionStatus.success, ActionStatus.failure, ActionStatus.skipped, ActionStatus.cancelled],
  failure: [ActionStatus.failure],
  success: [ActionStatus.success],
  skipped: [ActionStatus.skipped],
  neutral: [ActionStatus.skipped],
  cancelled: [ActionStatus.cancelled],
  timed_out: [ActionStatus.cancelled],
};

/** The query of a per-workflow runs list, as Gitea reads it. */
export interface WorkflowRunsQuery {
  event?: string;
  /** A branch name; matched as `refs/heads/<branch>`. */
  branch?: string;
  /** Gitea's names (see GITEA_STATUS_FILTER); several are OR. */
  statuses?: readonly string[];
  /** A user name. */
  actor?: string;
  headSha?: string;
}

/** One `workflow_dispatch` input as the "Run workflow" form shows it. */
export interface DispatchInputSpec {
  name: string;
  type: 'string' | 'choice' | 'boolean' | 'number' | 'environment';
  description: string;
  required: boolean;
  default: string;
  options: string[];
}

/** A workflow of the default branch as the runs page's sidebar shows it (Forgejo: routers/web/repo/actions/actions.go List). */
export interface WorkflowEntry {
  id: string;
  name: string;
  disabled: boolean;
  /** Why it would not run as it is (Forgejo's warnings: it does not parse, has no jobs, every job needs another). */
  warnings: string[];
  /** Null when the workflow has no `workflow_dispatch` trigger. */
  dispatchInputs: DispatchInputSpec[] | null;
}

function escapePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

export class WorkflowService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly catalog: WorkflowCatalog,
    private readonly git: GitRepositories,
    private readonly schedules: ScheduleService,
    private readonly rootUrl: string,
  ) {}

  /** Every workflow of the default branch, sorted by path, with its state. */
  async list(repo: Repository, owner: User): Promise<ActionWorkflowJson[]> {
    const head = await this.defaultHead(repo);
    if (head === null) return [];
    const [files, disabled] = await Promise.all([
      this.catalog.workflowsAt(this.git.reader(repo), head.oid),
      listDisabledWorkflows(this.db, repo.id),
    ]);
    return files.map((file) => this.toApi(repo, owner, file, disabled.has(file.name), head.authorSec));
  }

  /**
   * The workflows of the default branch with their warnings and dispatch
   * inputs (the console's sidebar). `onlineLabels`: the labels of the online
   * runners the repository can use; a job asking for one none has is warned about.
   */
  async entries(repo: Repository, onlineLabels: ReadonlySet<string>): Promise<WorkflowEntry[]> {
    const head = await this.defaultHead(repo);
    if (head === null) return [];
    const [files, disabled] = await Promise.all([
      this.catalog.workflowsAt(this.git.reader(repo), head.oid),
      listDisabledWorkflows(this.db, repo.id),
    ]);
    return files.map((file) => {
      const parsed = file.parsed;
      const warnings = [...parsed.errors];
      if (parsed.errors.length === 0 && parsed.jobs.length === 0) warnings.push('the workflow has no jobs');
      if (parsed.jobs.length > 0 && parsed.jobs.every((job) => job.needs.length > 0))
        warnings.push('every job needs another: none can start');
      for (const { job, labels } of literalRunsOn(parsed)) {
        const missing = labels.filter((label) => !onlineLabels.has(label));
        if (missing.length > 0) warnings.push(`job ${job}: no online runner has the label ${missing.join(', ')}`);
      }
      const dispatch = parsed.errors.length === 0 ? parsed.events.workflow_dispatch : undefined;
      const dispatchInputs =
        dispatch === undefined
          ? null
          : Object.entries(dispatch?.inputs ?? {}).map(([name, spec]) => ({
              name,
              type: (['string', 'choice', 'boolean', 'number', 'environment'].includes(String(spec.type))
                ? String(spec.type)
                : 'string') as DispatchInputSpec['type'],
              description: spec.description ?? '',
              required: spec.required === true,
              default: spec.default === undefined ? '' : String(spec.default),
              options: (spec.options ?? []).map(String),
            }));
      return {
        id: file.name,
        name: parsed.name !== undefined && parsed.name !== '' ? parsed.name : file.name,
        disabled: disabled.has(file.name),
        warnings,
        dispatchInputs,
      };
    });
  }

  /** One workflow of the default branch; 404 `workflow "<id>" not found`. */
  async get(repo: Repository, owner: User, workflowId: string): Promise<ActionWorkflowJson> {
    const found = await this.find(repo, workflowId);
    if (found === null) throw notFound(workflowId);
    const disabled = await listDisabledWorkflows(this.db, repo.id);
    return this.toApi(repo, owner, found.file, disabled.has(found.file.name), found.authorSec);
  }

  /** Gitea's EnableWorkflow/DisableWorkflow: idempotent; the workflow must exist on the default branch. */
  async setDisabled(repo: Repository, workflowId: string, disabled: boolean): Promise<void> {
    if ((await this.find(repo, workflowId)) === null) throw notFound(workflowId);
    await setWorkflowDisabled(this.db, repo.id, workflowId, disabled, this.clock.nowSec());
    // A disabled workflow's schedules go; enabling registers them again from the default branch.
    if (disabled) await this.schedules.removeWorkflow(repo.id, workflowId);
    else await this.schedules.syncRepository(repo);
  }

  /**
   * The runs of one workflow, newest first, through the repository runs list
   * (the (repo_id, workflow_id, id) index and the run counts). 404 only when
   * the file is gone from the default branch and no run of it exists (Gitea).
   */
  async runs(
    repo: Repository,
    workflowId: string,
    query: WorkflowRunsQuery,
    slice: Slice,
  ): Promise<{ runs: (RunWithUser & { attempt: number })[]; total: number }> {
    const filter: RunFilter = { workflowId };
    if (query.event !== undefined && query.event !== '') filter.events = [query.event];
    if (query.branch !== undefined && query.branch !== '') filter.ref = `refs/heads/${query.branch}`;
    if (query.headSha !== undefined && query.headSha !== '') filter.headSha = query.headSha;
    const statuses = (query.statuses ?? []).flatMap((name) => {
      const selected = GITEA_STATUS_FILTER[name];
      if (selected === undefined) throw AppError.invalid(`Invalid status ${name}`);
      return selected;
    });
    if (statuses.length > 0) filter.statuses = [...new Set(statuses)];
    // Existence first, so an unknown workflow is a 404 whatever the filters select.
    if ((await this.find(repo, workflowId)) === null) {
      const anyRun = await listRuns(this.db, repo.id, { workflowId }, { limit: 1, offset: 0 });
      if (anyRun.length === 0) throw notFound(workflowId);
    }
    if (query.actor !== undefined && query.actor !== '') {
      // Gitea answers 500 for an unknown user name; nobody by that name has runs.
      const actor = await findAccountByName(this.db, query.actor);
      if (actor === null) return { runs: [], total: 0 };
      filter.triggerUserId = actor.id;
    }
    const [runs, total] = await Promise.all([
      listRuns(this.db, repo.id, filter, slice),
      countRuns(this.db, repo.id, filter),
    ]);
    const [users, attempts] = await Promise.all([
      findAccountsByIds(
        this.db,
        runs.map((run) => run.triggerUserId),
      ),
      runAttempts(
        this.db,
        runs.map((run) => run.id),
      ),
    ]);
    return {
      runs: runs.map((run) => ({
        run,
        triggerUser: users.get(run.triggerUserId) ?? ghostUser(),
        attempt: attempts.get(run.id) ?? 1,
      })),
      total,
    };
  }

  private async defaultHead(repo: Repository): Promise<{ oid: string; authorSec: number } | null> {
    const reader = this.git.reader(repo);
    const oid = await reader.resolveCommit(`refs/heads/${repo.defaultBranch}`);
    if (oid === null) return null;
    const commit = await reader.readCommit(oid);
    return { oid, authorSec: commit?.author.timestampSec ?? 0 };
  }

  private async find(repo: Repository, workflowId: string): Promise<{ file: WorkflowFile; authorSec: number } | null> {
    if (workflowId === '') return null;
    const head = await this.defaultHead(repo);
    if (head === null) return null;
    const file = await this.catalog.workflowAt(this.git.reader(repo), head.oid, workflowId);
    return file === null ? null : { file, authorSec: head.authorSec };
  }

  private toApi(
    repo: Repository,
    owner: User,
    file: WorkflowFile,
    disabled: boolean,
    authorSec: number,
  ): ActionWorkflowJson {
    const repoPath = `${encodeURIComponent(owner.name)}/${encodeURIComponent(repo.name)}`;
    const html = `${this.rootUrl}${repoPath}`;
    const name = escapePath(file.name);
    const branch = escapePath(repo.defaultBranch);
    const time = apiTime(authorSec);
    const scheduleErrors = this.schedules.scheduleProblems(file);
    return {
      id: file.name,
      name: file.parsed.name !== undefined && file.parsed.name !== '' ? file.parsed.name : file.name,
      path: `${file.dir}/${file.name}`,
      state: disabled ? 'disabled_manually' : 'active',
      created_at: time,
      updated_at: time,
      url: `${this.rootUrl}api/v1/repos/${repoPath}/actions/workflows/${encodeURIComponent(file.name)}`,
      html_url: `${html}/src/branch/${branch}/${escapePath(file.dir)}/${name}`,
      badge_url: `${html}/actions/workflows/${encodeURIComponent(file.name)}/badge.svg?branch=${encodeURIComponent(repo.defaultBranch)}`,
      deleted_at: GO_ZERO_TIME,
      ...(scheduleErrors.length > 0 ? { schedule_errors: scheduleErrors } : {}),
    };
  }
}

function notFound(workflowId: string): AppError {
  return AppError.notFoundMessage(`workflow ${JSON.stringify(workflowId)} not found`);
}
