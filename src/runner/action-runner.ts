// Runs `uses:` steps (GitHub's "Metadata syntax for GitHub Actions"; act
// act/runner/step_action_local.go, step_action_remote.go, action.go):
// composite actions step by step with their own `inputs` and `steps`
// contexts; JavaScript actions (`node12` to `node24`) with the runner's own
// Node, their inputs as INPUT_<NAME> variables, `pre` run right before
// `main`, `post` after the job's steps (last started, first run), state
// passed along as STATE_<name>; `actions/checkout` natively when the instance
// has no such repository. Docker actions are refused with a clear message:
// gantry runner only runs jobs on the host.
import fs from 'node:fs/promises';
import path from 'node:path';
import { evaluateCondition, truthy } from './conditions.ts';
import type { JobStatus } from './conditions.ts';
import {
  ActionError,
  fetchRemoteAction,
  parseUses,
  readActionMetadata,
  resolveRemoteCommit,
} from './action-resolver.ts';
import type { ActionMetadata, FetchOptions } from './action-resolver.ts';
import { nativeCheckout } from './checkout.ts';
import { pathWithAdditions, runCommand } from './command-step.ts';
import type { JobState, StepOutcomeName } from './command-step.ts';
import type { JobExecution, StepContext, StepResult, UsesHandler } from './job-executor.ts';
import type { Mapping } from './job-context.ts';
import { shellCommand } from './shell.ts';

const NODE_RUNTIMES = new Set(['node12', 'node16', 'node20', 'node24']);
const DOCKER_REFUSED =
  'Docker actions are not supported: gantry runner runs jobs on the host, without containers (use forgejo-runner with a docker label for them)';

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** INPUT_<NAME> as the Actions toolkit reads it (spaces to underscores, upper case). */
function inputVariable(name: string): string {
  return `INPUT_${name.replace(/ /g, '_').toUpperCase()}`;
}

export class ActionRunner implements UsesHandler {
  constructor(private readonly cacheDir: string) {}

  async run(execution: JobExecution, context: StepContext): Promise<StepResult> {
    const github = execution.github;
    const instanceUrl = String(github.server_url ?? '').replace(/\/+$/, '');
    const workspace = execution.paths?.workspace ?? '';
    const uses = context.scope.interpolate(String(context.step.uses));
    const reference = parseUses(uses, instanceUrl);
    if (reference.kind === 'docker') return this.refuse(context, DOCKER_REFUSED);
    const withInputs: Record<string, string> = {};
    for (const [name, value] of Object.entries((context.step.with ?? {}) as Mapping))
      withInputs[name] = context.scope.interpolate(String(value ?? ''));
    let dir: string;
    if (reference.kind === 'local') {
      dir = path.resolve(workspace, reference.path);
    } else {
      const fetchOptions: FetchOptions = {
        cacheDir: this.cacheDir,
        token: String(github.token ?? ''),
        instanceUrl,
      };
      const url = `${reference.baseUrl}/${reference.owner}/${reference.repo}.git`;
      const commit = await resolveRemoteCommit(url, reference.ref, fetchOptions);
      if (commit === null) {
        const isCheckout =
          `${reference.owner}/${reference.repo}`.toLowerCase() === 'actions/checkout' &&
          reference.baseUrl === instanceUrl;
        if (isCheckout) {
          const inputs = { ...withInputs };
          await nativeCheckout({ inputs, github, workspace, log: context.log, signal: context.signal });
          return { outcome: 'success', outputs: {} };
        }
        return this.refuse(context, `cannot find the action ${uses} (${url} has no ref "${reference.ref}")`);
      }
      context.log(`Using ${reference.owner}/${reference.repo}@${reference.ref} (${commit})`);
      dir = path.join(await fetchRemoteAction(reference, commit, fetchOptions), reference.subpath);
    }
    const metadata = await readActionMetadata(dir);
    const inputs: Record<string, string> = {};
    for (const [name, spec] of Object.entries(metadata.inputs)) {
      const given = Object.hasOwn(withInputs, name) ? withInputs[name] : undefined;
      inputs[name] = given ?? context.scope.interpolate(String(spec?.default ?? ''));
    }
    for (const [name, value] of Object.entries(withInputs)) if (!Object.hasOwn(inputs, name)) inputs[name] = value;
    const using = String(metadata.runs.using ?? '');
    if (using === 'composite') return this.composite(execution, context, metadata, dir, inputs);
    if (NODE_RUNTIMES.has(using)) return this.javascript(execution, context, metadata, dir, inputs, uses);
    if (using === 'docker') return this.refuse(context, DOCKER_REFUSED);
    return this.refuse(context, `the action ${uses} uses "${using}", which gantry runner cannot run`);
  }

  private refuse(context: StepContext, message: string): StepResult {
    context.log(`##[error]${message}`);
    return { outcome: 'failure', outputs: {} };
  }

  private async javascript(
    execution: JobExecution,
    context: StepContext,
    metadata: ActionMetadata,
    dir: string,
    inputs: Record<string, string>,
    uses: string,
  ): Promise<StepResult> {
    const jobState = execution.jobState as JobState;
    const workspace = execution.paths?.workspace ?? '';
    const inputEnv: Record<string, string> = {};
    for (const [name, value] of Object.entries(inputs)) inputEnv[inputVariable(name)] = value;
    const baseEnv: Record<string, string> = {
      ...context.env,
      ...inputEnv,
      GITHUB_ACTION_PATH: dir,
      GITHUB_ACTION: String(context.step.id ?? `__${context.index}`),
    };
    const state: Record<string, string> = {};
    const script = async (
      file: string,
      log: (line: string) => void,
      signal: AbortSignal,
    ): Promise<{ outcome: StepOutcomeName; outputs: Record<string, string> }> => {
      const stateEnv = Object.fromEntries(Object.entries(state).map(([k, v]) => [`STATE_${k}`, v]));
      const result = await runCommand(jobState, {
        command: process.execPath,
        args: [path.join(dir, file)],
        cwd: workspace,
        env: { ...baseEnv, ...stateEnv, PATH: pathWithAdditions(jobState, baseEnv.PATH) },
        log,
        signal,
      });
      Object.assign(state, result.state);
      return result;
    };
    const pre = metadata.runs.pre;
    if (typeof pre === 'string' && pre !== '') {
      const preIf = metadata.runs['pre-if'];
      if (preIf === undefined || evaluateCondition(context.scope, preIf)) {
        const result = await script(pre, context.log, context.signal);
        if (result.outcome !== 'success') return { outcome: result.outcome, outputs: {} };
      }
    }
    const main = metadata.runs.main;
    if (typeof main !== 'string' || main === '') return this.refuse(context, `the action ${uses} names no main script`);
    const result = await script(main, context.log, context.signal);
    const post = metadata.runs.post;
    if (typeof post === 'string' && post !== '') {
      const postIf = metadata.runs['post-if'] ?? 'always()';
      execution.postSteps.push(async () => {
        const scope = execution.scopeWith(context.env);
        if (!evaluateCondition(scope, postIf)) return;
        execution.jobLog(`Post ${uses}`);
        const controller = new AbortController();
        const outcome = await script(post, (line) => execution.jobLog(line), controller.signal);
        if (outcome.outcome === 'failure') execution.markFailed();
      });
    }
    return result;
  }

  private async composite(
    execution: JobExecution,
    context: StepContext,
    metadata: ActionMetadata,
    dir: string,
    inputs: Record<string, string>,
  ): Promise<StepResult> {
    const jobState = execution.jobState as JobState;
    const steps = Array.isArray(metadata.runs.steps) ? (metadata.runs.steps as Mapping[]) : [];
    const local: Record<string, { outputs: Record<string, string>; outcome: string; conclusion: string }> = {};
    let status: JobStatus = execution.jobStatus();
    const actionGithub = { ...execution.github, action_path: dir };
    for (let i = 0; i < steps.length; i++) {
      const step = steps[i] ?? {};
      const id = typeof step.id === 'string' ? step.id : `__composite_${i}`;
      if (execution.jobStatus() === 'cancelled') status = 'cancelled';
      const current = status;
      const env: Record<string, string> = {
        ...context.env,
        ...Object.fromEntries(jobState.exportedEnv),
        GITHUB_ACTION_PATH: dir,
      };
      const scopeFor = () =>
        execution.scopeWithStatus({ env, inputs, steps: local, github: actionGithub }, () => current);
      for (const [name, value] of Object.entries((step.env ?? {}) as Mapping))
        env[name] = scopeFor().interpolate(String(value));
      env.PATH = pathWithAdditions(jobState, context.env.PATH);
      const scope = scopeFor();
      if (!evaluateCondition(scope, step.if)) {
        local[id] = { outputs: {}, outcome: 'skipped', conclusion: 'skipped' };
        continue;
      }
      const nested: StepContext = { ...context, step, scope, env };
      let result: StepResult;
      try {
        if (step.uses !== undefined) {
          result = await this.run(execution, nested);
        } else if (step.run !== undefined) {
          result = await this.compositeRun(execution, nested);
        } else {
          result = this.refuse(context, 'a composite step needs `run` or `uses`');
        }
      } catch (error) {
        if (!(error instanceof ActionError) && context.signal.aborted) throw error;
        context.log(`##[error]${describe(error)}`);
        result = { outcome: context.signal.aborted ? 'cancelled' : 'failure', outputs: {} };
      }
      let conclusion = result.outcome;
      if (result.outcome === 'failure') {
        const value = step['continue-on-error'];
        if (typeof value === 'string' ? truthy(scope.evaluate(value)) : value === true) conclusion = 'success';
        else status = 'failure';
      } else if (result.outcome === 'cancelled') {
        status = 'cancelled';
      }
      local[id] = { outputs: result.outputs, outcome: result.outcome, conclusion };
    }
    const outputs: Record<string, string> = {};
    const scope = execution.scopeWithStatus(
      { env: context.env, inputs, steps: local, github: actionGithub },
      () => status,
    );
    for (const [name, spec] of Object.entries(metadata.outputs))
      outputs[name] = scope.interpolate(String((spec as { value?: unknown } | null)?.value ?? ''));
    return { outcome: status === 'success' ? 'success' : status === 'cancelled' ? 'cancelled' : 'failure', outputs };
  }

  private async compositeRun(execution: JobExecution, context: StepContext): Promise<StepResult> {
    const step = context.step;
    const workspace = execution.paths?.workspace ?? '';
    const temp = execution.paths?.temp ?? '';
    const script = context.scope.interpolate(String(step.run));
    const shell = step.shell === undefined ? 'bash' : context.scope.interpolate(String(step.shell));
    const cwd = path.resolve(
      workspace,
      step['working-directory'] === undefined ? '.' : context.scope.interpolate(String(step['working-directory'])),
    );
    const command = shellCommand(
      shell,
      (extension) => path.join(temp, `composite-${context.index}-${Date.now()}${extension}`),
      context.env.PATH ?? '',
    );
    await fs.writeFile(command.file, script);
    const outcome = await runCommand(execution.jobState as JobState, {
      command: command.command,
      args: command.args,
      cwd,
      env: context.env,
      log: context.log,
      signal: context.signal,
    });
    return { outcome: outcome.outcome, outputs: outcome.outputs };
  }
}
