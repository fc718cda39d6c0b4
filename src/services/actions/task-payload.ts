// What a runner receives for a task it claimed (Forgejo: routers/api/actions/runner/runner.go, FetchTask):
// the one-job workflow, the github context, decrypted secrets and variables
// (repository over owner), the task token, and the outputs and results of the
// jobs it needs (Forgejo: services/actions/task.go, services/actions/context.go).
import { aggregateJobStatus, isDone } from '../../modules/actions-status.ts';
import { findRunById, listJobsOfRun } from '../../models/action-runs.ts';
import type { ActionRun, ActionRunJob } from '../../models/action-runs.ts';
import type { Db, Queryable } from '../../models/database.ts';
import { findRepositoryById } from '../../models/repos.ts';
import type { Repository } from '../../models/repos.ts';
import { outputsOfTasks } from '../../models/task-claims.ts';
import type { ClaimedPayloadRefs } from '../../models/task-claims.ts';
import { findPossibleUserById } from '../../models/users.ts';
import type { RuntimeTokens } from './runtime-tokens.ts';
import type { SecretService } from './secrets.ts';
import { variablesOf } from './variables.ts';
import type { VariableService } from './variables.ts';

/** Forgejo's DEFAULT_ACTIONS_URL=github: `uses: actions/checkout` resolves on github.com. */
export const DEFAULT_ACTIONS_URL = 'https://github.com';

export interface TaskNeedPayload {
  outputs: Record<string, string>;
  /** A status number; 1–4 equal the protocol's Result values. */
  result: number;
}

/** What a runner receives for one task (the protocol's Task message, before encoding). */
export interface TaskPayload {
  id: number;
  /** The job's single-job workflow YAML. */
  workflowPayload: string;
  /** The `github` context. */
  context: Record<string, unknown>;
  secrets: Record<string, string>;
  vars: Record<string, string>;
  needs: Record<string, TaskNeedPayload>;
}

/** What a payload reads of its repository. */
type PayloadRepository = Pick<Repository, 'id' | 'ownerId' | 'ownerName' | 'name'>;

/** Short name and type of a ref (Forgejo's git.RefName ShortName/RefType). */
function describeRef(ref: string): { name: string; type: string } {
  if (ref.startsWith('refs/heads/')) return { name: ref.slice('refs/heads/'.length), type: 'branch' };
  if (ref.startsWith('refs/tags/')) return { name: ref.slice('refs/tags/'.length), type: 'tag' };
  const pull = /^refs\/pull\/(\d+)\/(head|merge)$/.exec(ref);
  if (pull) return { name: pull[1] ?? '', type: 'pull' };
  return { name: ref, type: '' };
}

/** A pull request event's base/head refs and base sha, when the payload is one. */
function pullRequestRefs(event: Record<string, unknown>): { baseRef: string; headRef: string; baseSha: string } | null {
  const pr = event.pull_request as { base?: { ref?: unknown; sha?: unknown }; head?: { ref?: unknown } } | undefined;
  if (typeof pr !== 'object' || pr === null || typeof pr.base !== 'object' || typeof pr.head !== 'object') return null;
  return { baseRef: String(pr.base.ref ?? ''), headRef: String(pr.head.ref ?? ''), baseSha: String(pr.base.sha ?? '') };
}

/** Unions matrix legs' outputs; a non-empty value wins over an empty one (Forgejo's mergeTwoOutputs). */
function mergeOutputs(into: Record<string, string>, from: ReadonlyMap<string, string>): void {
  for (const [key, value] of from) if (value !== '' || !Object.hasOwn(into, key)) into[key] = value;
}

/** Freezes a parsed JSON value and everything in it. */
function deepFreeze(value: unknown): void {
  if (typeof value !== 'object' || value === null) return;
  for (const item of Object.values(value)) deepFreeze(item);
  Object.freeze(value);
}

/** How many runs' parsed event payloads a process keeps (eventOf): the runs whose jobs are being claimed. */
const EVENTS_CACHED = 256;

export class TaskPayloadBuilder {
  private readonly events = new Map<number, { payload: string; event: Readonly<Record<string, unknown>> }>();

  constructor(
    private readonly db: Db,
    private readonly secrets: SecretService,
    private readonly variables: VariableService,
    /** ROOT_URL with its trailing slash (Forgejo's AppURL). */
    private readonly rootUrl: string,
    /** Signs the artifact protocols' runtime token; without it the context carries none (runners fall back to the task token). */
    private readonly runtimeTokens: RuntimeTokens | null = null,
  ) {}

  /**
   * The task payload: workflow, github context, secrets, vars, needs.
   * `claimed`: what the claim's transaction already read (the run as it left
   * it, the repository's and trigger user's names), so that only what may
   * change between tasks of a run (secrets, variables, needs) is read here.
   */
  async build(
    taskId: number,
    token: string,
    job: ActionRunJob,
    claimed?: {
      run: ActionRun | null;
      refs: ClaimedPayloadRefs | null;
      /** The job's needs, read already for its claim group (claim-groups.ts). */
      needs?: Record<string, TaskNeedPayload> | null;
    },
  ): Promise<TaskPayload> {
    const refs = claimed?.refs ?? null;
    const [run, repo] = await Promise.all([
      claimed?.run ?? findRunById(this.db, job.runId),
      refs === null
        ? findRepositoryById(this.db, job.repoId)
        : { id: job.repoId, ownerId: refs.repoOwnerId, ownerName: refs.repoOwnerName, name: refs.repoName },
    ]);
    if (run === null || repo === null)
      throw new Error(`task ${taskId}: run ${job.runId} or repository ${job.repoId} is gone`);
    const actor = refs?.triggerUserName ?? (await findPossibleUserById(this.db, run.triggerUserId)).name;
    // A fork's pull request must not read the base repository's secrets (Forgejo's GetSecretsOfTask).
    const forkWithoutTarget = run.isForkPullRequest && run.triggerEvent !== 'pull_request_target';
    // SQLite's claim statement read the secrets and variables in its transaction (refs); otherwise they are read now.
    const secrets: Record<string, string> = forkWithoutTarget
      ? {}
      : Object.fromEntries(
          refs?.secrets == null ? await this.secrets.secretsForRepo(repo) : this.secrets.secretsOf(refs.secrets),
        );
    for (const name of ['GITHUB_TOKEN', 'GITEA_TOKEN', 'FORGEJO_TOKEN']) secrets[name] = token;
    const context = this.githubContext(run, repo, job, actor, token);
    if (this.runtimeTokens !== null) {
      // `gitea_runtime_token` (act_runner) and `forgejo_runtime_token` (forgejo-runner reads it first): the runner
      // exports it as ACTIONS_RUNTIME_TOKEN for upload-artifact/download-artifact (Forgejo: services/actions/task.go).
      const runtimeToken = this.runtimeTokens.issue({ taskId, runId: job.runId, jobId: job.id });
      context.gitea_runtime_token = runtimeToken;
      context.forgejo_runtime_token = runtimeToken;
    }
    return {
      id: taskId,
      workflowPayload: job.workflowPayload,
      context,
      secrets,
      vars: Object.fromEntries(
        refs?.variables == null ? await this.variables.variablesForRepo(repo) : variablesOf(refs.variables),
      ),
      needs: claimed?.needs ?? (await this.needsOf(this.db, job)),
    };
  }

  /** Forgejo's GenerateGiteaContext plus the task token. Strings unless noted, as the runner expects. */
  private githubContext(
    run: ActionRun,
    repo: PayloadRepository,
    job: ActionRunJob,
    actor: string,
    token: string,
  ): Record<string, unknown> {
    const event = this.eventOf(run);
    let ref = run.ref;
    let sha = run.commitSha;
    const pr = pullRequestRefs(event);
    if (pr !== null && run.triggerEvent === 'pull_request_target') {
      // pull_request_target runs in the base branch's context.
      ref = `refs/heads/${pr.baseRef}`;
      sha = pr.baseSha;
    }
    const refInfo = describeRef(ref);
    const fullName = `${repo.ownerName}/${repo.name}`;
    return {
      action: '',
      action_path: '',
      action_ref: '',
      action_repository: '',
      action_status: '',
      actor,
      actor_id: String(run.triggerUserId),
      api_url: `${this.rootUrl}api/v1`,
      base_ref: pr?.baseRef ?? '',
      env: '',
      event,
      event_name: run.triggerEvent,
      event_path: '',
      graphql_url: '',
      head_ref: pr?.headRef ?? '',
      job: job.jobId,
      path: '',
      ref,
      ref_name: refInfo.name,
      ref_protected: false,
      ref_type: refInfo.type,
      repository: fullName,
      repository_id: String(repo.id),
      repository_owner: repo.ownerName,
      repository_owner_id: String(repo.ownerId),
      repositoryUrl: `${this.rootUrl}${fullName}`,
      retention_days: '',
      run_attempt: String(job.attempt),
      run_id: String(job.runId),
      run_number: String(run.index),
      secret_source: 'Actions',
      server_url: this.rootUrl,
      sha,
      token,
      triggering_actor: '',
      workflow: run.workflowId,
      workflow_ref: `${fullName}/${run.workflowDirectory}/${run.workflowId}@${ref}`,
      workspace: '',
      gitea_default_actions_url: DEFAULT_ACTIONS_URL,
      forgejo_default_actions_url: DEFAULT_ACTIONS_URL,
    };
  }

  /**
   * The run's event payload, parsed once for all its jobs (a run's payload
   * never changes; parsing it for each leg of a large matrix was a tenth of
   * a payload's cost). Shared by the payloads of the run, and frozen: nothing can change it.
   */
  private eventOf(run: ActionRun): Readonly<Record<string, unknown>> {
    const cached = this.events.get(run.id);
    if (cached !== undefined && cached.payload === run.eventPayload) return cached.event;
    let event: Record<string, unknown> = {};
    try {
      const parsed: unknown = JSON.parse(run.eventPayload);
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed))
        event = parsed as Record<string, unknown>;
    } catch {
      // A payload that does not parse reads as an empty event.
    }
    // Frozen through and through: shared by the run's payloads, and task-encoding.ts encodes a frozen value once.
    deepFreeze(event);
    if (this.events.size >= EVENTS_CACHED) this.events.delete(this.events.keys().next().value as number);
    this.events.set(run.id, { payload: run.eventPayload, event });
    return event;
  }

  /** `job`'s needs (needsFrom), read now. */
  private async needsOf(db: Queryable, job: ActionRunJob): Promise<Record<string, TaskNeedPayload>> {
    if (job.needs.length === 0) return {};
    const jobs = await listJobsOfRun(db, job.runId);
    const outputs = await outputsOfTasks(db, neededTaskIds(job, jobs));
    return needsFrom(job, jobs, outputs);
  }
}

/** The tasks whose outputs `job`'s needs carry: those of its needed legs that are done. */
export function neededTaskIds(job: ActionRunJob, runJobs: readonly ActionRunJob[]): number[] {
  const needed = new Set(job.needs);
  return runJobs
    .filter((leg) => needed.has(leg.jobId) && leg.taskId !== 0 && isDone(leg.status))
    .map((leg) => leg.taskId);
}

/**
 * `job`'s needs from its run's jobs and their tasks' outputs (neededTaskIds'
 * at least): for each job id it needs, the outputs of its legs' tasks (legs
 * that never ran or are not done are skipped) and the legs' aggregated result
 * (Forgejo's FindTaskNeeds).
 */
export function needsFrom(
  job: ActionRunJob,
  runJobs: readonly ActionRunJob[],
  outputs: ReadonlyMap<number, ReadonlyMap<string, string>>,
): Record<string, TaskNeedPayload> {
  const needed = new Set(job.needs);
  const legsById = new Map<string, ActionRunJob[]>();
  for (const leg of runJobs)
    if (needed.has(leg.jobId)) legsById.set(leg.jobId, [...(legsById.get(leg.jobId) ?? []), leg]);
  const needs: Record<string, TaskNeedPayload> = {};
  for (const [jobId, legs] of legsById) {
    const merged: Record<string, string> = {};
    for (const leg of legs) {
      const stored = leg.taskId !== 0 && isDone(leg.status) ? outputs.get(leg.taskId) : undefined;
      if (stored !== undefined) mergeOutputs(merged, stored);
    }
    needs[jobId] = { outputs: merged, result: aggregateJobStatus(legs.map((leg) => leg.status)) };
  }
  return needs;
}
