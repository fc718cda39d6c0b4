// Manual workflow dispatch (Forgejo's DispatchWorkflow, services/actions/workflows.go):
// resolve the ref, find the workflow file at that commit, resolve the inputs,
// create the run attributed to the caller.
import { AccessMode } from '../../modules/access-mode.ts';
import { AppError } from '../../modules/errors.ts';
import type { RepositoryReader } from '../../modules/git/repository-reader.ts';
import type { Db } from '../../models/database.ts';
import type { Repository } from '../../models/repos.ts';
import { isWorkflowDisabled } from '../../models/workflow-states.ts';
import type { User } from '../../models/users.ts';
import { toApiRepo, toApiUser } from '../convert.ts';
import type { GitRepositories } from '../git-repositories.ts';
import type { CreatedRun, RunCreator } from './run-creator.ts';
import type { WorkflowCatalog, WorkflowFile } from './workflow-catalog.ts';

export interface DispatchInput {
  ref: string;
  inputs: Record<string, string>;
}

export interface DispatchResult extends CreatedRun {
  /** The workflow's top-level job ids (YAML keys), in file order. */
  jobIds: string[];
}

/** Forgejo's [actions] LIMIT_DISPATCH_INPUTS default. */
const MAX_DISPATCH_INPUTS = 100;

export class DispatchService {
  constructor(
    private readonly catalog: WorkflowCatalog,
    private readonly runs: RunCreator,
    private readonly git: GitRepositories,
    private readonly rootUrl: string,
    private readonly db: Db,
  ) {}

  async dispatch(
    repo: Repository,
    owner: User,
    doer: User,
    fileName: string,
    input: DispatchInput,
  ): Promise<DispatchResult> {
    if (input.ref === '') throw AppError.invalid('ref is empty');
    if (fileName === '') throw AppError.invalid('workflow file name is empty');
    // Before the ref is resolved, as Gitea's DispatchActionWorkflow (services/actions/workflow.go).
    if (await isWorkflowDisabled(this.db, repo.id, fileName)) throw AppError.forbidden('workflow is disabled');
    const reader = this.git.reader(repo);
    const { ref, commitSha } = await this.expandRef(reader, input.ref);
    const workflow = await this.catalog.workflowAt(reader, commitSha, fileName);
    if (workflow === null)
      throw AppError.notFoundMessage(`workflow not found: there is no workflow file '${fileName}' at ${ref}`);
    if (workflow.parsed.errors.length > 0) {
      throw AppError.invalid(`workflow '${fileName}' at ${ref} is invalid: ${workflow.parsed.errors.join('; ')}`);
    }
    const inputs = resolveInputs(workflow, input.inputs);
    const workflowPath = `${workflow.dir}/${workflow.name}`;
    const anonymous = { doer: null, isSiteAdmin: false };
    const created = await this.runs.create({
      repo,
      owner,
      triggerUser: doer,
      workflow,
      event: 'workflow_dispatch',
      triggerEvent: 'workflow_dispatch',
      ref,
      commitSha,
      inputs,
      payload: {
        inputs,
        ref,
        repository: toApiRepo(repo, owner, AccessMode.none, anonymous, this.rootUrl),
        sender: toApiUser(doer, anonymous, this.rootUrl),
        workflow: workflowPath,
      },
      defaultTitle: workflow.parsed.name ?? workflowPath,
      // A 400 rather than a failed run: the caller is there to read why (run-limits.ts).
      overLimit: 'refuse',
    });
    return { ...created, jobIds: [...new Set(workflow.parsed.jobs.map((job) => job.id))] };
  }

  /**
   * Forgejo's ExpandRef: `refs/…` as given; `heads/…`/`tags/…` under `refs/`;
   * a short name is a tag first, then a branch; anything else git can resolve
   * (a full or abbreviated commit id) is kept as given. Unknown refs are 404.
   */
  private async expandRef(reader: RepositoryReader, given: string): Promise<{ ref: string; commitSha: string }> {
    const candidates = given.startsWith('refs/')
      ? [given]
      : given.startsWith('heads/') || given.startsWith('tags/')
        ? [`refs/${given}`]
        : [`refs/tags/${given}`, `refs/heads/${given}`];
    // Both candidates in one round trip to cat-file; the first that resolves wins.
    const resolved = await Promise.all(candidates.map((ref) => reader.resolveCommit(ref)));
    for (const [i, ref] of candidates.entries()) {
      const commitSha = resolved[i];
      if (commitSha !== undefined && commitSha !== null) return { ref, commitSha };
    }
    if (given.startsWith('refs/')) throw AppError.notFoundMessage(`object does not exist [id: ${given}, rel_path: ]`);
    if (/^[0-9a-f]{4,64}$/i.test(given) || given === 'HEAD') {
      const commitSha = await reader.resolveCommit(given);
      if (commitSha !== null) return { ref: given, commitSha };
    }
    throw AppError.notFoundMessage(`could not expand reference '${given}': no such tag, branch or commit`);
  }
}

/**
 * The inputs the run receives: every declared input, the given value or else
 * its default; an empty required input is refused; booleans sent by HTML
 * forms as `on` become `true`. Undeclared keys are ignored.
 */
function resolveInputs(workflow: WorkflowFile, given: Record<string, string>): Record<string, string> {
  const declared = workflow.parsed.events.workflow_dispatch?.inputs ?? {};
  const resolved: Record<string, string> = {};
  for (const [key, spec] of Object.entries(declared)) {
    let value = Object.hasOwn(given, key) ? (given[key] ?? '') : '';
    if (value === '' && spec.default !== undefined) value = String(spec.default);
    if (value === '') {
      if (spec.required === true) throw AppError.invalid(`input required for '${spec.description || key}'`);
      continue;
    }
    if (String(spec.type) === 'boolean' && value === 'on') value = 'true';
    resolved[key] = value;
  }
  if (Object.keys(resolved).length > MAX_DISPATCH_INPUTS)
    throw AppError.invalid(`too many inputs: at most ${MAX_DISPATCH_INPUTS} are accepted`);
  return resolved;
}
