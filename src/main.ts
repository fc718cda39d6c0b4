// Entry of the server: loadConfig → createDeps → buildApp → listen, and a
// graceful stop (in-flight requests finish) on SIGTERM/SIGINT.
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import type { Config } from './config.ts';
import { createDeps } from './deps.ts';
import { startEmbeddedRunner } from './embedded-runner.ts';
import type { EmbeddedRunner } from './embedded-runner.ts';
import { restrictUmask } from './modules/private-files.ts';
import type { CreateDepsOptions, Deps } from './deps.ts';

export interface RunningServer {
  app: FastifyInstance;
  deps: Deps;
  /** Base URL the server answers on, e.g. http://127.0.0.1:3000 */
  url: string;
  stop(): Promise<void>;
}

export async function startServer(config: Config, options: CreateDepsOptions = {}): Promise<RunningServer> {
  // Before anything is created: the data folder, the database and what git writes are owner-only.
  restrictUmask();
  const deps = await createDeps(config, { checkpointThread: true, ...options });
  let app: FastifyInstance;
  try {
    app = await buildApp(deps);
    await app.listen({ host: config.httpAddr, port: config.httpPort });
  } catch (error) {
    await deps.close();
    throw error;
  }
  // Started only by the server: CLI commands build deps too and must not run it.
  deps.background.start();
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.httpPort;
  const host = config.httpAddr === '0.0.0.0' || config.httpAddr === '::' ? '127.0.0.1' : config.httpAddr;
  let stopping: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      await app.close();
      await deps.background.stop();
      await deps.close();
    })();
    return stopping;
  };
  return { app, deps, url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`, stop };
}

/** Runs until a signal arrives, then stops gracefully and resolves. */
export async function runServerUntilSignal(config: Config): Promise<void> {
  const server = await startServer(config);
  server.deps.logger.info(
    { url: server.url, rootUrl: config.rootUrl, database: server.deps.database.dialect, dataDir: config.dataDir },
    'Gantry is ready',
  );
  let embedded: EmbeddedRunner | null = null;
  if (config.embeddedRunnerLabels.trim() !== '') {
    try {
      embedded = await startEmbeddedRunner(
        {
          url: server.url,
          instanceRegistrationToken: () => server.deps.services.runners.registrationToken({ ownerId: 0, repoId: 0 }),
          logger: server.deps.logger,
        },
        config,
      );
    } catch (error) {
      server.deps.logger.error({ err: error }, 'the embedded runner could not start');
    }
  }
  await new Promise<void>((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      server.deps.logger.info({ signal }, 'stopping: waiting for in-flight requests');
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      // Running jobs of the embedded runner are reported before the server goes away.
      (embedded?.stop() ?? Promise.resolve())
        .then(() => server.stop())
        .then(resolve, (error: unknown) => {
          server.deps.logger.error({ err: error }, 'error while stopping');
          resolve();
        });
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
  server.deps.logger.info('stopped');
}
