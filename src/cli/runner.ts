// `gantry runner`: register this machine as a runner of an instance and run
// its jobs on the host, with forgejo-runner's command names and flags
// (`register --no-interactive --instance --token --name --labels`,
// `daemon`, `one-job --handle`). The runner is a client of the instance's
// /api/actions endpoint (src/runner/), nothing in-process.
import os from 'node:os';
import path from 'node:path';
import { ConnectError } from '@connectrpc/connect';
import type { Config } from '../config.ts';
import { connectToInstance, RUNNER_VERSION } from '../runner/connection.ts';
import { describeError, RunnerDaemon } from '../runner/daemon.ts';
import { formatLabel, LabelError, parseLabelList } from '../runner/labels.ts';
import { readRegistration, RegistrationFileError, writeRegistration } from '../runner/registration-file.ts';
import type { RunnerRegistration } from '../runner/registration-file.ts';
import { CliError } from './cli-error.ts';

export interface RegisterOptions {
  interactive?: boolean;
  instance?: string;
  token?: string;
  name?: string;
  labels?: string;
  runnerFile: string;
}

/** The labels a runner gets when --labels is not given. */
export const DEFAULT_LABELS = 'gantry:host';

export async function runnerRegister(options: RegisterOptions): Promise<void> {
  if (options.interactive !== false)
    throw new CliError('only non-interactive registration is supported: pass --no-interactive');
  if (options.instance === undefined || options.token === undefined)
    throw new CliError('--instance and --token are required');
  let address: string;
  try {
    const url = new URL(options.instance);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http');
    address = url.toString().replace(/\/+$/, '');
  } catch {
    throw new CliError(`--instance must be an http(s) URL, got "${options.instance}"`);
  }
  let labels;
  try {
    labels = parseLabelList(options.labels ?? DEFAULT_LABELS);
  } catch (error) {
    if (error instanceof LabelError) throw new CliError(error.message);
    throw error;
  }
  if (labels.length === 0) throw new CliError('--labels names no label');
  const name = options.name ?? os.hostname();
  const connection = connectToInstance(address);
  let res;
  try {
    res = await connection.runner.register({
      name,
      token: options.token,
      version: RUNNER_VERSION,
      labels: labels.map((label) => label.name),
      agentLabels: labels.map((label) => label.name),
    });
  } catch (error) {
    throw new CliError(
      `cannot register at ${address}: ${error instanceof ConnectError ? error.rawMessage : describeError(error)}`,
    );
  }
  const runner = res.runner;
  if (runner === undefined) throw new CliError('the instance answered Register without a runner');
  const registration: RunnerRegistration = {
    id: Number(runner.id),
    uuid: runner.uuid,
    name: runner.name || name,
    token: runner.token,
    address,
    labels: labels.map(formatLabel),
  };
  const file = path.resolve(options.runnerFile);
  await writeRegistration(file, registration);
  console.log(`runner "${registration.name}" registered (id ${registration.id}); its credentials are in ${file}`);
}

export interface DaemonCliOptions {
  runnerFile: string;
  capacity: number;
  workdir?: string;
}

async function loadRegistration(file: string): Promise<RunnerRegistration> {
  try {
    return await readRegistration(path.resolve(file));
  } catch (error) {
    if (error instanceof RegistrationFileError) throw new CliError(error.message);
    throw error;
  }
}

/** Where job folders go when --workdir is not given (forgejo-runner uses ~/.cache/act). */
export function defaultWorkdir(): string {
  return path.join(os.homedir(), '.cache', 'gantry-runner');
}

function log(message: string): void {
  console.log(`${new Date().toISOString()} ${message}`);
}

/** Stops `daemon` on SIGTERM/SIGINT (a second signal cancels at once); returns the remover. */
function stopOnSignals(daemon: RunnerDaemon): { stopped(): Promise<void> | null; remove(): void } {
  let stopped: Promise<void> | null = null;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopped !== null) {
      log(`${signal} again: cancelling running jobs now`);
      daemon.cancelAll('The runner was stopped before the job finished');
      return;
    }
    log(`${signal}: no new jobs`);
    stopped = daemon.stop();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return {
    stopped: () => stopped,
    remove() {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
    },
  };
}

export interface OneJobCliOptions {
  runnerFile: string;
  handle: string;
  workdir?: string;
}

/** `one-job --handle`: runs the job with that handle, then exits (1 if there is none). */
export async function runnerOneJob(config: Config, options: OneJobCliOptions): Promise<void> {
  const registration = await loadRegistration(options.runnerFile);
  const daemon = new RunnerDaemon({
    registration,
    capacity: 1,
    workdir: path.resolve(options.workdir ?? defaultWorkdir()),
    shutdownTimeoutMs: config.runnerShutdownTimeoutMs,
    log,
  });
  const signals = stopOnSignals(daemon);
  try {
    if (!(await daemon.runSingle(options.handle)))
      throw new CliError(`no waiting job has the handle ${options.handle} (or it is not for this runner's labels)`);
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError(describeError(error));
  } finally {
    await signals.stopped();
    signals.remove();
  }
}

/** Runs the daemon until SIGTERM/SIGINT; a second signal cancels running jobs at once. */
export async function runnerDaemon(config: Config, options: DaemonCliOptions): Promise<void> {
  const registration = await loadRegistration(options.runnerFile);
  const daemon = new RunnerDaemon({
    registration,
    capacity: options.capacity,
    workdir: path.resolve(options.workdir ?? defaultWorkdir()),
    shutdownTimeoutMs: config.runnerShutdownTimeoutMs,
    log,
  });
  const signals = stopOnSignals(daemon);
  try {
    await daemon.run();
  } catch (error) {
    signals.remove();
    throw new CliError(describeError(error));
  }
  await (signals.stopped() ?? daemon.stop());
  signals.remove();
  log('stopped');
}
