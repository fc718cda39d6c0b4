// The runner `gantry web` starts by itself when GANTRY_EMBEDDED_RUNNER_LABELS
// is set (default: off). It is the same runner as `gantry runner daemon`
// (src/runner/), a client of this server's /api/actions over HTTP, not a
// shortcut into the services: only its registration uses the instance-scope
// registration token directly, as an administrator would. Its credentials
// live in <data>/embedded-runner.json (0600), so restarts keep one runner
// instead of registering a new one each time.
//
// A host runner executes whatever anyone who can push a workflow writes, as
// the user Gantry runs as: README's "Embedded runner" says when that is
// acceptable.
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { connectToInstance, RUNNER_VERSION } from './runner/connection.ts';
import { describeError, RunnerDaemon } from './runner/daemon.ts';
import { formatLabel, parseLabelList } from './runner/labels.ts';
import { readRegistration, RegistrationFileError, writeRegistration } from './runner/registration-file.ts';
import type { RunnerRegistration } from './runner/registration-file.ts';

export interface EmbeddedRunner {
  stop(): Promise<void>;
}

/** What the runner needs of the server that starts it (src/main.ts), and no more. */
export interface EmbeddedRunnerHost {
  /** Base URL the server answers on: the runner is its client over HTTP. */
  url: string;
  /** Mints an instance-scope registration token, as an administrator would. */
  instanceRegistrationToken(): Promise<string>;
  logger: Logger;
}

/** Registers the embedded runner once (instance scope), then reuses its runner file. */
async function registration(server: EmbeddedRunnerHost, config: Config): Promise<RunnerRegistration> {
  const file = path.join(config.dataDir, 'embedded-runner.json');
  const labels = parseLabelList(config.embeddedRunnerLabels);
  try {
    const existing = await readRegistration(file);
    // Declare sends the labels at every start, so a change of the setting needs no new registration.
    return { ...existing, address: server.url, labels: labels.map(formatLabel) };
  } catch (error) {
    if (!(error instanceof RegistrationFileError)) throw error;
  }
  const token = await server.instanceRegistrationToken();
  const res = await connectToInstance(server.url).runner.register({
    name: 'gantry-embedded',
    token,
    version: RUNNER_VERSION,
    labels: labels.map((label) => label.name),
  });
  if (res.runner === undefined) throw new Error('Register answered without a runner');
  const registered: RunnerRegistration = {
    id: Number(res.runner.id),
    uuid: res.runner.uuid,
    name: res.runner.name,
    token: res.runner.token,
    address: server.url,
    labels: labels.map(formatLabel),
  };
  await writeRegistration(file, registered);
  return registered;
}

export async function startEmbeddedRunner(server: EmbeddedRunnerHost, config: Config): Promise<EmbeddedRunner> {
  const logger = server.logger.child({ component: 'embedded-runner' });
  const daemon = new RunnerDaemon({
    registration: await registration(server, config),
    capacity: config.embeddedRunnerCapacity,
    workdir: path.join(config.dataDir, 'runner-work'),
    shutdownTimeoutMs: config.runnerShutdownTimeoutMs,
    log: (message) => logger.info(message),
  });
  const running = daemon.run().catch((error: unknown) => {
    logger.error(`the embedded runner stopped: ${describeError(error)}`);
  });
  return {
    async stop() {
      await daemon.stop();
      await running;
    },
  };
}
