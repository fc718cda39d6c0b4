// Runs one task on the host, from the workflow payload to the final report:
// a fresh folder under the work folder (workspace, temp, tool cache, step
// files) removed afterwards; the job's `if:`; then each step in order, its
// `if:` read against the job's status (success(), failure(), always(),
// cancelled()), `continue-on-error`, `timeout-minutes`; then the job's
// outputs. Cancellation (from the API through UpdateTask, the job's timeout,
// or the daemon shutting down) kills the running step's process group at
// once and marks the job cancelled: later steps run only if their condition
// holds for a cancelled job (`always()`, `cancelled()`).
//
// Guarantees: the task is always reported with a final result — whatever
// fails here becomes a failure with its message as the log's last line;
// no secret reaches the log (the reporter masks every line); a job sees only
// its own folder and the environment this file gives it.
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Task } from '../gen/runner/v1/messages_pb.ts';
import { Result } from '../gen/runner/v1/messages_pb.ts';
import { ExpressionScope } from '../modules/workflows/expressions.ts';
import { evaluateCondition, statusFunctions, truthy } from './conditions.ts';
import { hashFilesFunction } from './hash-files.ts';
import type { JobStatus } from './conditions.ts';
import { pathWithAdditions, runCommand } from './command-step.ts';
import type { JobState, StepOutcomeName } from './command-step.ts';
import type { RunnerConnection } from './connection.ts';
import {
  githubContext,
  inheritedEnv,
  matrixContext,
  needsContext,
  readJobDefinition,
  runnerContext,
  standardEnv,
  strategyContext,
} from './job-context.ts';
import type { JobDefinition, Mapping, Paths } from './job-context.ts';
import { platformFor } from './labels.ts';
import type { RunnerLabel } from './labels.ts';
import { Masker } from './masker.ts';
import { TaskReporter } from './reporter.ts';
import { shellCommand } from './shell.ts';

export interface ExecutorSettings {
  runnerName: string;
  labels: readonly RunnerLabel[];
  /** Parent of the per-job folders. */
  workdir: string;
  reportIntervalMs: number;
  closeDeadlineMs: number;
  warn: (message: string) => void;
  /** Called as each step's process is about to start (the bench measures the runner's overhead with it). */
  onStepStart?: (taskId: bigint, index: number) => void;
}

/** GitHub's default job timeout: 360 minutes. */
const DEFAULT_JOB_TIMEOUT_MINUTES = 360;

const RESULT_OF: Record<StepOutcomeName | 'skipped', Result> = {
  success: Result.SUCCESS,
  failure: Result.FAILURE,
  cancelled: Result.CANCELLED,
  skipped: Result.SKIPPED,
};

/** Work a step does once it is decided to run; `log` writes to the step's log range. */
export interface StepContext {
  index: number;
  step: Mapping;
  scope: ExpressionScope;
  env: Record<string, string>;
  log: (line: string) => void;
  signal: AbortSignal;
}

export interface StepResult {
  outcome: StepOutcomeName;
  outputs: Record<string, string>;
}

/** Runs the `uses:` steps; the job executor itself only knows `run:`. */
export interface UsesHandler {
  run(execution: JobExecution, context: StepContext): Promise<StepResult>;
}

class StepTimeout extends Error {}

function minutesOf(value: unknown, scope: ExpressionScope): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const evaluated = typeof value === 'string' ? scope.evaluate(value) : value;
  const minutes = Number(evaluated);
  return Number.isFinite(minutes) && minutes > 0 ? minutes : undefined;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export class JobExecution {
  private status: JobStatus = 'success';
  private cancelReason: string | null = null;
  private current: AbortController | null = null;
  private reporter: TaskReporter | null = null;
  readonly masker = new Masker();
  definition: JobDefinition | null = null;
  paths: Paths | null = null;
  /** hashFiles() over this job's workspace (known once the job has started). */
  private readonly hashFilesFunction = hashFilesFunction(() => {
    if (this.paths === null) throw new Error('the job has not started');
    return this.paths.workspace;
  });
  jobState: JobState | null = null;
  /** The steps context: outputs, outcome and conclusion of each step with an id. */
  readonly stepsContext: Record<string, { outputs: Record<string, string>; outcome: string; conclusion: string }> = {};
  /** Work to do after the steps, last registered first (post scripts of actions). */
  readonly postSteps: Array<() => Promise<void>> = [];
  private baseScope: ExpressionScope | null = null;
  private baseContexts: Mapping = {};
  /** The github context of the task, with this job's paths. */
  github: Mapping = {};
  private jobEnvironment: Record<string, string> = {};

  constructor(
    readonly task: Task,
    readonly connection: RunnerConnection,
    readonly settings: ExecutorSettings,
    private readonly uses: UsesHandler | null = null,
  ) {
    const token = (task.context as Mapping | undefined)?.token;
    if (typeof token === 'string') this.masker.add(token);
    for (const value of Object.values(task.secrets)) this.masker.add(value);
  }

  get taskId(): bigint {
    return this.task.id;
  }

  /** The job's status as the status functions see it. */
  jobStatus(): JobStatus {
    return this.status;
  }

  /** A post step failed: the job fails unless it was cancelled. */
  markFailed(): void {
    if (this.status !== 'cancelled') this.status = 'failure';
  }

  /** Stops the job: kills the running step's group; later steps run only if they ask to. */
  cancel(reason: string): void {
    if (this.cancelReason !== null) return;
    this.cancelReason = reason;
    this.status = 'cancelled';
    this.current?.abort();
  }

  /** A line outside the steps. */
  jobLog(line: string): void {
    this.reporter?.jobLog(line);
  }

  /** The scope expressions of the job see, with the current env and steps. */
  scopeWith(env: Record<string, string>, extra: Mapping = {}): ExpressionScope {
    if (this.baseScope === null) throw new Error('the job has not started');
    return this.baseScope.extend({ env, steps: this.stepsContext, job: { status: this.status }, ...extra });
  }

  /** A scope with its own status (a composite action's steps): `contexts` replace the job's. */
  scopeWithStatus(contexts: Mapping, status: () => JobStatus): ExpressionScope {
    return ExpressionScope.of({ ...this.baseContexts, job: { status: status() }, ...contexts }, [
      ...statusFunctions(status),
      this.hashFilesFunction,
    ]);
  }

  /**
   * The process environment of a step: inherited and standard variables, then `stepEnv`
   * (job env, GITHUB_ENV, the step's own), with GITHUB_PATH in front of PATH.
   */
  processEnv(stepEnv: Record<string, string>): Record<string, string> {
    const state = this.jobState;
    if (state === null) throw new Error('the job has not started');
    const env = { ...this.jobEnvironment, ...stepEnv };
    env.PATH = pathWithAdditions(state, env.PATH);
    return env;
  }

  private newReporter(stepCount: number): TaskReporter {
    return new TaskReporter(this.connection, this.task.id, stepCount, this.masker, {
      intervalMs: this.settings.reportIntervalMs,
      closeDeadlineMs: this.settings.closeDeadlineMs,
      warn: this.settings.warn,
      onRemoteStop: () => this.cancel('The job was cancelled'),
    });
  }

  async run(): Promise<Result> {
    let definition: JobDefinition;
    try {
      definition = readJobDefinition(this.task);
    } catch (error) {
      const reporter = this.newReporter(0);
      this.reporter = reporter;
      await reporter.close(Result.FAILURE, describe(error));
      return Result.FAILURE;
    }
    this.definition = definition;
    const stepReporter = this.newReporter(definition.steps.length);
    this.reporter = stepReporter;
    stepReporter.start();
    let jobDir: string | null = null;
    let result: Result;
    let lastWords: string | undefined;
    let jobTimer: NodeJS.Timeout | null = null;
    try {
      const platform = platformFor(definition.runsOn, this.settings.labels);
      stepReporter.jobLog(
        `gantry runner "${this.settings.runnerName}" runs job "${definition.jobId}" (task ${this.task.id}) on this host`,
      );
      if (platform !== undefined && platform.schema !== 'host')
        throw new Error(
          `label "${platform.name}" asks for ${platform.schema}:${platform.arg}, but gantry runner only runs jobs on the host; ` +
            `container execution is not supported (register the label as "${platform.name}:host", or use forgejo-runner)`,
        );
      if (definition.job.container !== undefined || definition.job.services !== undefined)
        throw new Error('this job asks for a container or services; gantry runner only runs jobs on the host');
      await fs.mkdir(this.settings.workdir, { recursive: true });
      jobDir = await fs.mkdtemp(path.join(this.settings.workdir, `task-${this.task.id}-`));
      const paths: Paths = {
        workspace: path.join(jobDir, 'workspace'),
        temp: path.join(jobDir, 'temp'),
        toolCache: path.join(jobDir, 'tool_cache'),
        eventPath: path.join(jobDir, 'event.json'),
      };
      this.paths = paths;
      const filesDir = path.join(jobDir, 'files');
      await Promise.all([paths.workspace, paths.temp, paths.toolCache, filesDir].map((d) => fs.mkdir(d)));
      const github = githubContext(this.task, paths);
      this.github = github;
      await fs.writeFile(paths.eventPath, JSON.stringify(github.event ?? {}));
      this.jobState = {
        masker: this.masker,
        debug: this.task.secrets.ACTIONS_STEP_DEBUG === 'true',
        filesDir,
        exportedEnv: new Map(),
        pathAdditions: [],
      };
      const event = (github.event ?? {}) as Mapping;
      this.baseContexts = {
        github,
        vars: { ...this.task.vars },
        secrets: { ...this.task.secrets },
        inputs: (typeof event.inputs === 'object' && event.inputs !== null ? event.inputs : {}) as Mapping,
        matrix: matrixContext(definition.job),
        strategy: strategyContext(definition.job),
        needs: needsContext(this.task),
        runner: runnerContext(this.settings.runnerName, paths),
        env: {},
        steps: {},
        job: {},
      };
      this.baseScope = ExpressionScope.of(this.baseContexts, [
        ...statusFunctions(() => this.status),
        this.hashFilesFunction,
      ]);
      // Workflow env, then job env, each evaluated with what came before it.
      const env: Record<string, string> = {};
      for (const source of [definition.workflowEnv, (definition.job.env ?? {}) as Mapping])
        for (const [name, value] of Object.entries(source)) env[name] = this.scopeWith(env).interpolate(String(value));
      this.jobEnvironment = {
        ...inheritedEnv(),
        ...standardEnv(github, this.settings.runnerName, paths),
        ...env,
      };
      this.jobEnv = env;

      // The job's own `if:`: with needs that did not all succeed, success() is false.
      const needsOk = Object.values(this.task.needs).every((need) => need.result === Result.SUCCESS);
      this.status = needsOk ? 'success' : 'failure';
      const runJob = evaluateCondition(this.scopeWith(env), definition.job.if);
      this.status = 'success';
      if (!runJob) {
        stepReporter.jobLog('Skipping the job: its condition is false');
        result = Result.SKIPPED;
      } else {
        const minutes =
          minutesOf(definition.job['timeout-minutes'], this.scopeWith(env)) ?? DEFAULT_JOB_TIMEOUT_MINUTES;
        jobTimer = setTimeout(
          () => this.cancel(`The job exceeded its timeout of ${minutes} minutes`),
          minutes * 60_000,
        );
        for (let index = 0; index < definition.steps.length; index++) await this.runStep(index);
        for (const post of this.postSteps.reverse()) await post();
        if (this.cancelReason !== null) {
          result = Result.CANCELLED;
          lastWords = this.cancelReason;
        } else {
          result = this.jobStatus() === 'failure' ? Result.FAILURE : Result.SUCCESS;
        }
        if (result === Result.SUCCESS) stepReporter.setOutputs(this.jobOutputs());
      }
    } catch (error) {
      result = this.cancelReason !== null ? Result.CANCELLED : Result.FAILURE;
      lastWords = describe(error);
    } finally {
      if (jobTimer !== null) clearTimeout(jobTimer);
    }
    if (jobDir !== null) {
      stepReporter.jobLog('Cleaning up the job folder');
      await fs.rm(jobDir, { recursive: true, force: true }).catch((error: unknown) => {
        this.settings.warn(`task ${this.task.id}: cannot remove ${jobDir}: ${describe(error)}`);
      });
    }
    await stepReporter.close(result, lastWords);
    return result;
  }

  /** The job's env (workflow and job level, evaluated): what step env starts from in expressions. */
  jobEnv: Record<string, string> = {};

  private jobOutputs(): Record<string, string> {
    const definition = this.definition;
    if (definition === null) return {};
    const outputs: Record<string, string> = {};
    const scope = this.scopeWith(this.jobEnv);
    for (const [name, template] of Object.entries((definition.job.outputs ?? {}) as Mapping)) {
      try {
        outputs[name] = scope.interpolate(String(template));
      } catch (error) {
        this.jobLog(`##[warning]output "${name}": ${describe(error)}`);
      }
    }
    return outputs;
  }

  private async runStep(index: number): Promise<void> {
    const definition = this.definition as JobDefinition;
    const reporter = this.reporter as TaskReporter;
    const step = definition.steps[index] ?? {};
    const stepId = typeof step.id === 'string' && step.id !== '' ? step.id : `__${index}`;
    const record = (outcome: StepOutcomeName | 'skipped', conclusion: StepOutcomeName | 'skipped', outputs = {}) => {
      this.stepsContext[stepId] = { outputs, outcome, conclusion };
      reporter.stepFinished(index, RESULT_OF[conclusion]);
    };
    const log = (line: string): void => reporter.stepLog(index, line);
    let stepEnv: Record<string, string> = { ...this.jobEnv, ...Object.fromEntries(this.jobState?.exportedEnv ?? []) };
    let run: boolean;
    try {
      for (const [name, value] of Object.entries((step.env ?? {}) as Mapping))
        stepEnv = { ...stepEnv, [name]: this.scopeWith(stepEnv).interpolate(String(value)) };
      run = evaluateCondition(this.scopeWith(stepEnv), step.if);
    } catch (error) {
      reporter.stepStarted(index);
      log(`##[error]${describe(error)}`);
      this.status = this.status === 'cancelled' ? 'cancelled' : 'failure';
      record('failure', 'failure');
      return;
    }
    if (!run) {
      record('skipped', 'skipped');
      return;
    }
    reporter.stepStarted(index);
    this.settings.onStepStart?.(this.task.id, index);
    const scope = this.scopeWith(stepEnv);
    const controller = new AbortController();
    this.current = controller;
    let timer: NodeJS.Timeout | null = null;
    let timedOut = false;
    let outcome: StepOutcomeName;
    let outputs: Record<string, string> = {};
    try {
      const minutes = minutesOf(step['timeout-minutes'], scope);
      if (minutes !== undefined)
        timer = setTimeout(() => {
          timedOut = true;
          controller.abort(new StepTimeout());
        }, minutes * 60_000);
      const context: StepContext = {
        index,
        step,
        scope,
        env: this.processEnv(stepEnv),
        log,
        signal: controller.signal,
      };
      const result =
        step.uses !== undefined
          ? await this.runUses(context)
          : step.run !== undefined
            ? await this.runScript(context)
            : (log('##[error]a step needs `run` or `uses`'), { outcome: 'failure' as const, outputs: {} });
      outcome = result.outcome;
      outputs = result.outputs;
      if (timedOut) {
        log(`##[error]The step exceeded its timeout of ${minutes} minutes`);
        outcome = 'failure';
      }
    } catch (error) {
      log(`##[error]${describe(error)}`);
      outcome = controller.signal.aborted && !timedOut ? 'cancelled' : 'failure';
    } finally {
      if (timer !== null) clearTimeout(timer);
      this.current = null;
    }
    let conclusion = outcome;
    if (outcome === 'failure') {
      let continueOnError = false;
      try {
        const value = step['continue-on-error'];
        continueOnError = typeof value === 'string' ? truthy(scope.evaluate(value)) : value === true;
      } catch (error) {
        log(`##[error]${describe(error)}`);
      }
      if (continueOnError) conclusion = 'success';
      else if (this.status !== 'cancelled') this.status = 'failure';
    }
    record(outcome, conclusion, outputs);
  }

  private async runScript(context: StepContext): Promise<StepResult> {
    const definition = this.definition as JobDefinition;
    const paths = this.paths as Paths;
    const step = context.step;
    const script = context.scope.interpolate(String(step.run));
    const shellValue = step.shell ?? definition.defaultRun.shell;
    const shell = shellValue === undefined ? undefined : context.scope.interpolate(String(shellValue));
    const dirValue = step['working-directory'] ?? definition.defaultRun['working-directory'];
    const cwd = path.resolve(
      paths.workspace,
      dirValue === undefined ? '.' : context.scope.interpolate(String(dirValue)),
    );
    const command = shellCommand(
      shell,
      (extension) => path.join(paths.temp, `step-${context.index}-${Date.now()}${extension}`),
      context.env.PATH ?? '',
    );
    await fs.writeFile(command.file, script);
    try {
      await fs.access(cwd);
    } catch {
      context.log(`##[error]working-directory ${cwd} does not exist`);
      return { outcome: 'failure', outputs: {} };
    }
    const outcome = await runCommand(this.jobState as JobState, {
      command: command.command,
      args: command.args,
      cwd,
      env: { ...context.env, GITHUB_ACTION: String(step.id ?? `__run_${context.index}`) },
      log: context.log,
      signal: context.signal,
    });
    return { outcome: outcome.outcome, outputs: outcome.outputs };
  }

  private async runUses(context: StepContext): Promise<StepResult> {
    if (this.uses === null) {
      context.log('##[error]`uses:` steps are not supported by this runner');
      return { outcome: 'failure', outputs: {} };
    }
    return this.uses.run(this, context);
  }
}
