// Entry of the server: loadConfig → createDeps → buildApp → listen, and a
// graceful stop (in-flight requests finish) on SIGTERM/SIGINT.
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.ts';
import type { Config } from './config.ts';
import { createDeps } from './deps.ts';
import { restrictUmask } from './modules/private-files.ts';
import type { CreateDepsOptions, Deps } from './deps.ts';
import { ActionsHousekeeping } from './services/actions/housekeeping.ts';
import { WebhookDeliveryWorker } from './services/webhooks/delivery-worker.ts';
import { withRepositoryFiles } from './services/webhooks/payloads/repository-files.ts';
import { WebhookRetention } from './services/webhooks/retention.ts';

/** How often each process looks for stuck tasks and abandoned jobs; every process does, safely (conditional updates). */
const HOUSEKEEPING_INTERVAL_MS = 60_000;
/** How often each process prunes the webhook delivery history past its retention. */
const WEBHOOK_RETENTION_INTERVAL_MS = 3_600_000;

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
  const deps = await createDeps(config, options);
  let app: FastifyInstance;
  try {
    app = await buildApp(deps);
    await app.listen({ host: config.httpAddr, port: config.httpPort });
  } catch (error) {
    await deps.close();
    throw error;
  }
  // Started only by the server: CLI commands build deps too and must not run it.
  const housekeeping = new ActionsHousekeeping(deps.database.db, deps.clock, deps.services.taskReports, {
    onError: (error) => deps.logger.warn({ err: error }, 'actions housekeeping failed; it retries on its next pass'),
  });
  housekeeping.start(HOUSEKEEPING_INTERVAL_MS);
  // Every process delivers the webhook outbox; claims are leased, so they share the work safely.
  const webhookWorker = new WebhookDeliveryWorker(deps.database.db, deps.clock, withRepositoryFiles(deps.services.webhooks, deps.services.gitRepositories), {
    allowedHosts: config.webhookAllowedHosts,
    timeoutMs: config.webhookDeliverTimeoutMs,
    concurrency: config.webhookConcurrency,
    retry: { maxAttempts: config.webhookMaxAttempts },
    onError: (error) => deps.logger.warn({ err: error }, 'webhook delivery failed to record; the lease expires and it is retried'),
  });
  webhookWorker.start();
  const webhookRetention = new WebhookRetention(deps.database.db, deps.clock, {
    retentionDays: config.webhookRetentionDays,
    onPruned: (deleted) => deps.logger.info({ deleted, retentionDays: config.webhookRetentionDays }, 'pruned old webhook deliveries'),
    onError: (error) => deps.logger.warn({ err: error }, 'pruning old webhook deliveries failed; it retries on its next pass'),
  });
  webhookRetention.start(WEBHOOK_RETENTION_INTERVAL_MS);
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.httpPort;
  const host = config.httpAddr === '0.0.0.0' || config.httpAddr === '::' ? '127.0.0.1' : config.httpAddr;
  let stopping: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      await app.close();
      await housekeeping.stop();
      await webhookWorker.stop();
      await webhookRetention.stop();
      await deps.close();
    })();
    return stopping;
  };
  return { app, deps, url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`, stop };
}

/** Runs until a signal arrives, then stops gracefully and resolves. */
export async function runServerUntilSignal(config: Config): Promise<void> {
  const server = await startServer(config);
  server.deps.logger.info({ url: server.url, rootUrl: config.rootUrl, database: server.deps.database.dialect, dataDir: config.dataDir }, 'Gantry is ready');
  await new Promise<void>((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      server.deps.logger.info({ signal }, 'stopping: waiting for in-flight requests');
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      server.stop().then(resolve, (error: unknown) => {
        server.deps.logger.error({ err: error }, 'error while stopping');
        resolve();
      });
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
  server.deps.logger.info('stopped');
}
