// What a job sees of its task: the workflow's one job, the expression
// contexts (github, env, vars, secrets, inputs, matrix, strategy, needs,
// steps, job, runner) and the standard environment variables (GITHUB_*,
// RUNNER_*, CI, with FORGEJO_*/GITEA_* twins, as forgejo-runner's act sets
// them in act/runner/run_context.go). Built from the Task the server sent
// (src/services/actions/task-payload.ts says exactly what it holds).
import os from 'node:os';
import { parse as parseYaml } from 'yaml';
import type { Task } from '../gen/runner/v1/messages_pb.ts';
import { Result } from '../gen/runner/v1/messages_pb.ts';

export type Mapping = Record<string, unknown>;

export interface JobDefinition {
  workflowName: string;
  jobId: string;
  job: Mapping;
  workflowEnv: Mapping;
  /** `defaults.run` of the job over the workflow's. */
  defaultRun: { shell?: string; 'working-directory'?: string };
  steps: Mapping[];
  runsOn: string[];
}

export class PayloadError extends Error {}

function asMapping(value: unknown): Mapping {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Mapping) : {};
}

/** The single job of the task's workflow (the server erased `needs` and collapsed the matrix). */
export function readJobDefinition(task: Task): JobDefinition {
  let doc: Mapping;
  try {
    doc = asMapping(parseYaml(new TextDecoder().decode(task.workflowPayload ?? new Uint8Array())));
  } catch (error) {
    throw new PayloadError(`the workflow payload is not YAML: ${error instanceof Error ? error.message : ''}`);
  }
  const jobs = Object.entries(asMapping(doc.jobs));
  if (jobs.length !== 1) throw new PayloadError(`the workflow payload has ${jobs.length} jobs, not one`);
  const [jobId, rawJob] = jobs[0] as [string, unknown];
  const job = asMapping(rawJob);
  const steps = Array.isArray(job.steps) ? job.steps.map(asMapping) : [];
  const runsOnRaw = job['runs-on'];
  const runsOn = Array.isArray(runsOnRaw)
    ? runsOnRaw.map(String)
    : typeof runsOnRaw === 'string'
      ? [runsOnRaw]
      : Array.isArray(asMapping(runsOnRaw).labels)
        ? (asMapping(runsOnRaw).labels as unknown[]).map(String)
        : [];
  const workflowRun = asMapping(asMapping(doc.defaults).run);
  const jobRun = asMapping(asMapping(job.defaults).run);
  const defaultRun = { ...workflowRun, ...jobRun } as JobDefinition['defaultRun'];
  return {
    workflowName: typeof doc.name === 'string' ? doc.name : '',
    jobId,
    job,
    workflowEnv: asMapping(doc.env),
    defaultRun,
    steps,
    runsOn,
  };
}

const RESULT_NAMES: Record<number, string> = {
  [Result.SUCCESS]: 'success',
  [Result.FAILURE]: 'failure',
  [Result.CANCELLED]: 'cancelled',
  [Result.SKIPPED]: 'skipped',
};

export function resultName(result: Result): string {
  return RESULT_NAMES[result] ?? '';
}

/** `needs.<id>.outputs` and `needs.<id>.result` from Task.needs. */
export function needsContext(task: Task): Mapping {
  const needs: Mapping = {};
  for (const [id, need] of Object.entries(task.needs))
    needs[id] = { outputs: { ...need.outputs }, result: resultName(need.result) };
  return needs;
}

/** strategy.matrix of the payload holds one value per key, as a one-item list. */
export function matrixContext(job: Mapping): Mapping {
  const matrix: Mapping = {};
  for (const [key, value] of Object.entries(asMapping(asMapping(job.strategy).matrix)))
    matrix[key] = Array.isArray(value) && value.length === 1 ? value[0] : value;
  return matrix;
}

export function strategyContext(job: Mapping): Mapping {
  const strategy = asMapping(job.strategy);
  return {
    'fail-fast': strategy['fail-fast'] ?? true,
    // The leg's position among its siblings is not part of the task.
    'job-index': 0,
    'job-total': 1,
    'max-parallel': strategy['max-parallel'] ?? 1,
  };
}

export interface Paths {
  workspace: string;
  temp: string;
  toolCache: string;
  eventPath: string;
}

export function runnerArch(): string {
  const arch = os.arch();
  return arch === 'x64' ? 'X64' : arch === 'arm64' ? 'ARM64' : arch === 'arm' ? 'ARM' : arch.toUpperCase();
}

export function runnerContext(name: string, paths: Paths): Mapping {
  return {
    name,
    os: 'Linux',
    arch: runnerArch(),
    temp: paths.temp,
    tool_cache: paths.toolCache,
    debug: '',
    environment: 'self-hosted',
  };
}

/** The github context of the task, with the runner's paths filled in. */
export function githubContext(task: Task, paths: Paths): Mapping {
  return { ...asMapping(task.context), workspace: paths.workspace, event_path: paths.eventPath };
}

/** GITHUB_* and RUNNER_* variables of a job, each GITHUB_ one also as FORGEJO_ and GITEA_. */
export function standardEnv(github: Mapping, runnerName: string, paths: Paths): Record<string, string> {
  const text = (key: string): string => {
    const value = github[key];
    return value === undefined || value === null ? '' : String(value);
  };
  const githubVars: Record<string, string> = {
    GITHUB_ACTIONS: 'true',
    GITHUB_ACTOR: text('actor'),
    GITHUB_ACTOR_ID: text('actor_id'),
    GITHUB_API_URL: text('api_url'),
    GITHUB_BASE_REF: text('base_ref'),
    GITHUB_EVENT_NAME: text('event_name'),
    GITHUB_EVENT_PATH: paths.eventPath,
    GITHUB_GRAPHQL_URL: text('graphql_url'),
    GITHUB_HEAD_REF: text('head_ref'),
    GITHUB_JOB: text('job'),
    GITHUB_REF: text('ref'),
    GITHUB_REF_NAME: text('ref_name'),
    GITHUB_REF_PROTECTED: text('ref_protected'),
    GITHUB_REF_TYPE: text('ref_type'),
    GITHUB_REPOSITORY: text('repository'),
    GITHUB_REPOSITORY_ID: text('repository_id'),
    GITHUB_REPOSITORY_OWNER: text('repository_owner'),
    GITHUB_REPOSITORY_OWNER_ID: text('repository_owner_id'),
    GITHUB_RETENTION_DAYS: text('retention_days'),
    GITHUB_RUN_ATTEMPT: text('run_attempt'),
    GITHUB_RUN_ID: text('run_id'),
    GITHUB_RUN_NUMBER: text('run_number'),
    GITHUB_SERVER_URL: text('server_url').replace(/\/+$/, ''),
    GITHUB_SHA: text('sha'),
    GITHUB_TRIGGERING_ACTOR: text('triggering_actor') || text('actor'),
    GITHUB_WORKFLOW: text('workflow'),
    GITHUB_WORKFLOW_REF: text('workflow_ref'),
    GITHUB_WORKSPACE: paths.workspace,
  };
  const env: Record<string, string> = {
    CI: 'true',
    RUNNER_ARCH: runnerArch(),
    RUNNER_NAME: runnerName,
    RUNNER_OS: 'Linux',
    RUNNER_TEMP: paths.temp,
    RUNNER_TOOL_CACHE: paths.toolCache,
    RUNNER_ENVIRONMENT: 'self-hosted',
  };
  for (const [name, value] of Object.entries(githubVars)) {
    const rest = name.slice('GITHUB_'.length);
    env[name] = value;
    env[`GITEA_${rest}`] = value;
    env[`FORGEJO_${rest}`] = value;
  }
  return env;
}

/** The token a job's artifact clients send: the task's runtime token, or its task token from a server without one. */
export function runtimeTokenOf(context: Mapping | undefined): string {
  const runtime = context?.forgejo_runtime_token ?? context?.gitea_runtime_token ?? context?.token;
  return typeof runtime === 'string' ? runtime : '';
}

/**
 * Where upload-artifact and download-artifact talk to, as forgejo-runner sets
 * it for every job: ACTIONS_RUNTIME_URL for the v3 protocol (the instance's
 * /api/actions_pipeline/), ACTIONS_RESULTS_URL for v4 (the instance itself),
 * and the runtime token both send. No ACTIONS_CACHE_URL: there is no cache
 * server (forgejo-runner runs one of its own; actions/cache misses here).
 */
export function runtimeEnv(context: Mapping | undefined, instanceUrl: string): Record<string, string> {
  const endpoint = instanceUrl.replace(/\/+$/, '');
  return {
    ACTIONS_RUNTIME_URL: `${endpoint}/api/actions_pipeline/`,
    ACTIONS_RUNTIME_TOKEN: runtimeTokenOf(context),
    ACTIONS_RESULTS_URL: endpoint,
  };
}

/**
 * The runner's own environment that a job inherits: only what a shell needs
 * to find programs and the user's locale. Everything else (in an embedded
 * runner, the server's GANTRY_* settings and key) stays out of jobs.
 */
export function inheritedEnv(source: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR', 'TERM']) {
    const value = source[name];
    if (value !== undefined) env[name] = value;
  }
  env.PATH ??= '/usr/local/bin:/usr/bin:/bin';
  return env;
}
