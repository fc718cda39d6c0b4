// One process of a job — a `run:` script, or the main/pre/post script of a
// JavaScript action — with the step files and workflow commands around it:
// fresh GITHUB_OUTPUT, GITHUB_ENV, GITHUB_PATH, GITHUB_STATE and
// GITHUB_STEP_SUMMARY files for the process, read back when it ends; each
// output line passed through the workflow commands (forgejo-runner
// internal/pkg/report/reporter.go handleCommand: add-mask hides a value from
// then on and is not printed, group/endgroup become `##[group]`, debug lines
// only with ACTIONS_STEP_DEBUG, stop-commands suspends commands until its
// token comes back) before it reaches the log.
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { EnvFileError, readEnvFile, readPathFile } from './env-files.ts';
import type { Masker } from './masker.ts';
import { runProcess } from './process-step.ts';
import { parseWorkflowCommand } from './workflow-commands.ts';

/** What a job keeps across its steps. */
export interface JobState {
  masker: Masker;
  /** ACTIONS_STEP_DEBUG was set: `::debug::` lines are shown. */
  debug: boolean;
  /** Folder for the step files of this job. */
  filesDir: string;
  /** Set with GITHUB_ENV: seen by every later step. */
  exportedEnv: Map<string, string>;
  /** Added with GITHUB_PATH: put in front of PATH for every later step, last added first. */
  pathAdditions: string[];
}

export interface CommandRequest {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  log: (line: string) => void;
  signal: AbortSignal;
}

export type StepOutcomeName = 'success' | 'failure' | 'cancelled';

export interface CommandOutcome {
  outcome: StepOutcomeName;
  outputs: Record<string, string>;
  /** GITHUB_STATE and save-state: handed to the action's post script. */
  state: Record<string, string>;
}

/** Variables naming the step files, with the FORGEJO_/GITEA_ twins. */
function fileVariables(files: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, file] of Object.entries(files)) {
    env[`GITHUB_${name}`] = file;
    env[`GITEA_${name}`] = file;
    env[`FORGEJO_${name}`] = file;
  }
  return env;
}

/** PATH with the job's GITHUB_PATH additions in front. */
export function pathWithAdditions(job: JobState, base: string | undefined): string {
  return [...job.pathAdditions, ...(base ?? '').split(':').filter((dir) => dir !== '')].join(':');
}

export async function runCommand(job: JobState, request: CommandRequest): Promise<CommandOutcome> {
  const id = crypto.randomUUID();
  const files = {
    OUTPUT: path.join(job.filesDir, `output-${id}`),
    ENV: path.join(job.filesDir, `env-${id}`),
    PATH: path.join(job.filesDir, `path-${id}`),
    STATE: path.join(job.filesDir, `state-${id}`),
    STEP_SUMMARY: path.join(job.filesDir, `summary-${id}`),
  };
  await Promise.all(Object.values(files).map((file) => fs.writeFile(file, '')));
  const outputs: Record<string, string> = {};
  const state: Record<string, string> = {};
  let stopToken = '';

  const onLine = (line: string): void => {
    const command = parseWorkflowCommand(line);
    if (command === null) {
      request.log(line);
      return;
    }
    if (stopToken !== '') {
      if (command.name === stopToken) stopToken = '';
      else request.log(line);
      return;
    }
    switch (command.name) {
      case 'add-mask':
        job.masker.add(command.message);
        return;
      case 'debug':
        if (job.debug) request.log(`##[debug]${command.message}`);
        return;
      case 'group':
        request.log(`##[group]${command.message}`);
        return;
      case 'endgroup':
        request.log('##[endgroup]');
        return;
      case 'stop-commands':
        stopToken = command.message;
        return;
      case 'set-output':
        if (command.properties.name !== undefined) outputs[command.properties.name] = command.message;
        return;
      case 'save-state':
        if (command.properties.name !== undefined) state[command.properties.name] = command.message;
        return;
      case 'add-path':
        job.pathAdditions.unshift(command.message);
        return;
      default:
        // error, warning, notice and unknown commands stay in the log as written.
        request.log(line);
    }
  };

  const result = await runProcess({
    command: request.command,
    args: request.args,
    cwd: request.cwd,
    env: { ...request.env, ...fileVariables(files) },
    onLine,
    signal: request.signal,
  });

  let outcome: StepOutcomeName = 'success';
  if (result.stopped) {
    outcome = 'cancelled';
  } else if (result.spawnError !== undefined) {
    request.log(`##[error]cannot start ${request.command}: ${result.spawnError}`);
    outcome = 'failure';
  } else if (result.exitCode !== 0) {
    request.log(`##[error]Process completed with exit code ${result.exitCode ?? 'unknown'}.`);
    outcome = 'failure';
  }
  try {
    for (const [name, value] of await readEnvFile(files.OUTPUT)) outputs[name] = value;
    for (const [name, value] of await readEnvFile(files.STATE)) state[name] = value;
    for (const [name, value] of await readEnvFile(files.ENV)) job.exportedEnv.set(name, value);
    for (const dir of await readPathFile(files.PATH)) job.pathAdditions.unshift(dir);
  } catch (error) {
    if (!(error instanceof EnvFileError)) throw error;
    request.log(`##[error]${error.message}`);
    if (outcome === 'success') outcome = 'failure';
  }
  await Promise.all(Object.values(files).map((file) => fs.rm(file, { force: true })));
  return { outcome, outputs, state };
}
