// The composition root: everything the program needs, built once from the
// configuration and passed down — the database, the key ring, every service,
// the background workers and the metrics. Nothing else constructs a service,
// and nothing below reads the environment.
import { readFileSync } from 'node:fs';
import { sql } from 'kysely';
import pino from 'pino';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { acceleratedClock, systemClock } from './modules/clock.ts';
import type { Clock } from './modules/clock.ts';
import { openKeyRing } from './modules/crypto/key-ring.ts';
import { stdoutBatched } from './modules/log-destination.ts';
import { serializeRequest, serializeResponse } from './modules/log-redaction.ts';
import { migrateToLatest, openDatabase } from './models/database.ts';
import type { DatabaseHandle } from './models/database.ts';
import type { Services } from './services/index.ts';
import path from 'node:path';
import type { KeyRing } from './modules/crypto/key-ring.ts';
import type { Db } from './models/database.ts';
import { AccessTokenService } from './services/access-tokens.ts';
import { AccountService } from './services/accounts.ts';
import { DispatchService } from './services/actions/dispatch.ts';
import { PushTriggers } from './services/actions/push-triggers.ts';
import { JobLogService } from './services/actions/job-logs.ts';
import { JobQueryService } from './services/actions/jobs.ts';
import { RunCreator } from './services/actions/run-creator.ts';
import { WorkflowService } from './services/actions/workflows.ts';
import { RunControlService } from './services/actions/run-control.ts';
import { RunProgress } from './services/actions/run-progress.ts';
import { RunnerIdentityCache } from './services/actions/runner-identity-cache.ts';
import { GroupedWrites } from './models/grouped-writes.ts';
import { RunnerProtocolService } from './services/actions/runner-protocol.ts';
import { RunnerService } from './services/actions/runners.ts';
import { RunQueryService } from './services/actions/runs.ts';
import { SecretService } from './services/actions/secrets.ts';
import { TaskReportService } from './services/actions/task-reports.ts';
import { VariableService } from './services/actions/variables.ts';
import { WorkflowCatalog } from './services/actions/workflow-catalog.ts';
import { AuthenticationService } from './services/authentication.ts';
import { CredentialCache } from './services/credential-cache.ts';
import { LoginLimiter } from './services/login-limiter.ts';
import { PasswordHasher } from './modules/crypto/password.ts';
import { DomainEvents } from './services/events.ts';
import { ENCRYPTED_COLUMNS } from './services/encrypted-columns.ts';
import { GitRepositories } from './services/git-repositories.ts';
import { KeyRotationService } from './services/key-rotation.ts';
import { OrgService } from './services/orgs.ts';
import { PermissionService } from './services/permissions.ts';
import { PushService } from './services/pushes.ts';
import { WebhookService } from './services/webhooks/hooks.ts';
import { HookDeliveryService } from './services/webhooks/deliveries.ts';
import { HookTestDelivery } from './services/webhooks/test-delivery.ts';
import { createActionsWebhookOutbox } from './services/webhooks/actions-outbox.ts';
import { createWebhookOutbox } from './services/webhooks/outbox.ts';
import { RepoService } from './services/repos.ts';
import { WebSessionService } from './services/web-sessions.ts';
import { CommitStatusService } from './services/commit-statuses.ts';
import { createCommitStatusWriter } from './services/actions/commit-status-writer.ts';
import { subscribeOwnerDeletion } from './services/owner-deletion.ts';
import { ActionsHousekeeping } from './services/actions/housekeeping.ts';
import { Scheduler } from './services/actions/scheduler.ts';
import { ScheduleService } from './services/actions/schedules.ts';
import { BackgroundWork } from './services/background-work.ts';
import { createMetricsService } from './services/metrics.ts';
import type { MetricsService } from './services/metrics.ts';
import { WebhookDeliveryWorker } from './services/webhooks/delivery-worker.ts';
import { withRepositoryFiles } from './services/webhooks/payloads/repository-files.ts';
import { WebhookRetention } from './services/webhooks/retention.ts';
import { LocalObjectStorage } from './modules/storage/object-storage.ts';
import { ArtifactService } from './services/actions/artifacts.ts';
import { ArtifactRestService } from './services/actions/artifacts-rest.ts';
import { ArtifactV3Service } from './services/actions/artifacts-v3.ts';
import { ArtifactRetention } from './services/actions/artifact-retention.ts';
import { ArtifactUrlSigner } from './services/actions/artifact-urls.ts';
import { RuntimeTokens } from './services/actions/runtime-tokens.ts';

export interface Deps {
  config: Config;
  version: string;
  logger: Logger;
  clock: Clock;
  database: DatabaseHandle;
  services: Services;
  /** Stuck-task housekeeping, webhook delivery and retention: started only by the server (main.ts). */
  background: BackgroundWork;
  /** Prometheus metrics; null unless GANTRY_METRICS_TOKEN is set (then /metrics is off and nothing is counted). */
  metrics: MetricsService | null;
  checkDatabase(): Promise<void>;
  close(): Promise<void>;
}

// The checkout's package.json: one folder up from src/ and from dist/ (the bundle) alike.
export const GANTRY_VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

export interface CreateDepsOptions {
  clock?: Clock;
  logger?: Logger;
  /** Run pending migrations first (the server does; `gantry migrate` does it explicitly). */
  migrate?: boolean;
  /** SQLite: checkpoint on a thread of its own (the server does; database.ts). */
  checkpointThread?: boolean;
}

/**
 * The process logger: JSON lines to stdout (written in batches, each line within
 * 10 ms: log-destination.ts), or to `destination` (tests capture it in a file). Fastify adds the request id (`reqId`) to every line it logs
 * for a request; `req` is serialized without credentials (log-redaction.ts).
 */
export function createLogger(config: Config, destination?: pino.DestinationStream): Logger {
  const options = {
    level: config.logLevel,
    // No header reaches the log: `req` and `res` are serialized field by
    // field (log-redaction.ts). pino's path redaction, which this replaced,
    // was half the CPU of writing a request line.
    serializers: { req: serializeRequest, res: serializeResponse },
  };
  return pino(options, destination ?? stdoutBatched());
}

export async function createDeps(config: Config, options: CreateDepsOptions = {}): Promise<Deps> {
  const logger = options.logger ?? createLogger(config);
  const clock = options.clock ?? systemClock;
  const database = openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    maxConnections: config.databaseMaxConnections,
    preparedStatements: config.databasePreparedStatements,
    checkpointThread: options.checkpointThread === true,
    onConnectionError: (error) => logger.warn({ err: error }, 'database connection dropped; the pool reconnects'),
  });
  try {
    if (options.migrate !== false) {
      const report = await migrateToLatest(database.db);
      if (report.applied.length > 0) logger.info({ migrations: report.applied }, 'applied database migrations');
    }
    const { ring } = openKeyRing(
      { dataDir: config.dataDir, configuredKey: config.secretKey, previousKeys: config.secretKeyPrevious },
      {
        onRefreshError: (error) =>
          logger.warn({ err: error }, 'could not re-read the secret keys; the keys in memory stay in use'),
      },
    );
    const services = createServices(config, database.db, clock, ring, logger);
    await services.gitRepositories.prepare();
    const background = createBackgroundWork(config, database.db, clock, services, logger);
    const metrics =
      config.metricsToken === null
        ? null
        : await createMetricsService(database.db, clock, {
            onError: (error) =>
              logger.warn(
                { err: error },
                'could not read the database gauges of /metrics; they are left out until the next read',
              ),
          });
    return {
      config,
      version: GANTRY_VERSION,
      logger,
      clock,
      database,
      services,
      background,
      metrics,
      checkDatabase: async () => {
        await sql`select 1`.execute(database.db);
      },
      close: async () => {
        await services.gitRepositories.close();
        await database.destroy();
      },
    };
  } catch (error) {
    await database.destroy();
    throw error;
  }
}

function createServices(config: Config, db: Db, clock: Clock, keys: KeyRing, logger: Logger): Services {
  const events = new DomainEvents((error, event) =>
    logger.error(
      { err: error, event: event.type },
      'cleanup after a committed change failed; leftover files are harmless',
    ),
  );
  const credentialCache = new CredentialCache(clock);
  const hasher = new PasswordHasher(config.passwordHashCost);
  const secrets = new SecretService(db, clock, keys);
  // One per process, shared: a runner deleted here is refused here at once.
  const runnerIdentities = new RunnerIdentityCache(db);
  const runners = new RunnerService(db, clock, keys, runnerIdentities);
  const runProgress = new RunProgress(clock, events);
  const webhooks = new WebhookService(db, clock, keys);
  const variables = new VariableService(db, clock);
  const gitRepositories = new GitRepositories(
    path.join(config.dataDir, 'git', 'repositories'),
    config.dataDir,
    config.gitMaxPushBytes,
  );
  events.subscribe(createWebhookOutbox({ clock, rootUrl: config.rootUrl }));
  events.subscribe(createActionsWebhookOutbox({ clock, rootUrl: config.rootUrl }));
  events.subscribe(createCommitStatusWriter({ clock, rootUrl: config.rootUrl }));
  const catalog = new WorkflowCatalog(config.actionsMaxWorkflowBytes);
  // ROOT_URL without its trailing slash: the github.server_url runners see.
  // Claims and task reports commit together on SQLite (grouped-writes.ts).
  const groupedWrites = new GroupedWrites(db);
  const taskReports = new TaskReportService(
    db,
    clock,
    runProgress,
    config.dataDir,
    config.actionsLogMaxBytes,
    groupedWrites,
  );
  const runControl = new RunControlService(db, clock, events, runProgress, catalog, gitRepositories, taskReports.logs);
  const runCreator = new RunCreator(
    db,
    clock,
    variables,
    events,
    config.rootUrl.replace(/\/$/, ''),
    { maxJobsPerRun: config.actionsMaxJobsPerRun, maxRunPayloadBytes: config.actionsMaxRunPayloadBytes },
    (repo, runId) => runControl.cancel(repo, runId),
    runProgress,
  );
  const scheduleClock =
    config.testSchedulerClock === null
      ? clock
      : acceleratedClock(config.testSchedulerClock.anchorMs, config.testSchedulerClock.speed, clock);
  let scheduler: Scheduler | null = null;
  const schedules = new ScheduleService(
    db,
    scheduleClock,
    catalog,
    gitRepositories,
    runCreator,
    logger,
    () => scheduler?.wake(),
    (repo, runId) => runControl.cancel(repo, runId),
  );
  scheduler = new Scheduler(db, scheduleClock, (schedule) => schedules.fire(schedule), {
    onError: (error) => logger.warn({ err: error }, 'the scheduler pass failed; it retries in a second'),
  });
  const repos = new RepoService(db, clock, gitRepositories, events, (before, after) =>
    // The edit has committed: a failure here leaves the old schedules (the next push replaces them) or runs unfinished.
    schedules.onRepositoryEdited(before, after).catch((error: unknown) => {
      logger.error({ err: error, repoId: after.id }, 'could not update the schedules after a repository edit');
    }),
  );
  const pushTriggers = new PushTriggers(db, events, catalog, runCreator, schedules, config.rootUrl, logger);
  const artifactStorage = new LocalObjectStorage(path.join(config.dataDir, 'actions_artifacts'));
  const runtimeTokens = new RuntimeTokens(db, clock, keys);
  const artifactLimits = {
    maxArtifactBytes: config.artifactMaxBytes,
    maxRunBytes: config.artifactMaxRunBytes,
    retentionDays: config.artifactRetentionDays,
  };
  subscribeOwnerDeletion(events, {
    removeRepositoryLogs: (repoId) => taskReports.logs.removeRepository(repoId),
    removeRepositoryArtifacts: (repoId) => artifactStorage.removePrefix(String(repoId)),
  });
  return {
    accounts: new AccountService(db, clock, hasher),
    accessTokens: new AccessTokenService(db, clock, credentialCache),
    authentication: new AuthenticationService(
      db,
      credentialCache,
      hasher,
      new LoginLimiter(clock, config.loginMaxFailures),
    ),
    permissions: new PermissionService(db),
    orgs: new OrgService(db, clock, events),
    repos,
    secrets,
    variables,
    gitRepositories,
    pushes: new PushService(repos, gitRepositories, pushTriggers),
    dispatch: new DispatchService(catalog, runCreator, gitRepositories, config.rootUrl, db),
    workflows: new WorkflowService(db, clock, catalog, gitRepositories, schedules, config.rootUrl),
    schedules,
    scheduler,
    runs: new RunQueryService(db),
    jobs: new JobQueryService(db),
    jobLogs: new JobLogService(db, taskReports.logs),
    runControl,
    runProgress,
    runners,
    runnerProtocol: new RunnerProtocolService(db, clock, runProgress, secrets, variables, events, config.rootUrl, {
      runtimeTokens,
      identities: runnerIdentities,
      writes: groupedWrites,
    }),
    artifacts: new ArtifactService(
      db,
      clock,
      artifactStorage,
      runtimeTokens,
      new ArtifactUrlSigner(keys, config.rootUrl),
      artifactLimits,
    ),
    artifactsV3: new ArtifactV3Service(db, clock, artifactStorage, artifactLimits, config.rootUrl),
    artifactsRest: new ArtifactRestService(db, clock, artifactStorage),
    artifactStorage,
    taskReports,
    webhooks,
    webhookDeliveries: new HookDeliveryService(db, clock, config.rootUrl),
    webhookTests: new HookTestDelivery(db, clock, config.rootUrl, gitRepositories),
    commitStatuses: new CommitStatusService(db, clock, gitRepositories, config.rootUrl),
    webSessions: new WebSessionService(db, clock),
    events,
    keys,
    keyRotation: new KeyRotationService(db, keys, ENCRYPTED_COLUMNS),
  };
}

/** How often each process looks for stuck tasks and abandoned jobs; every process does, safely (conditional updates). */
const HOUSEKEEPING_INTERVAL_MS = 60_000;
/** How often each process removes the files of expired and deleted artifacts. */
const ARTIFACT_RETENTION_INTERVAL_MS = 3_600_000;
/** How often each process prunes the webhook delivery history past its retention. */
const WEBHOOK_RETENTION_INTERVAL_MS = 3_600_000;

function createBackgroundWork(
  config: Config,
  db: Db,
  clock: Clock,
  services: Services,
  logger: Logger,
): BackgroundWork {
  const housekeeping = new ActionsHousekeeping(db, clock, services.taskReports, {
    onError: (error) => logger.warn({ err: error }, 'actions housekeeping failed; it retries on its next pass'),
  });
  // Every process delivers the webhook outbox; claims are leased, so they share the work safely.
  const webhookWorker = new WebhookDeliveryWorker(
    db,
    clock,
    withRepositoryFiles(services.webhooks, services.gitRepositories),
    {
      allowedHosts: config.webhookAllowedHosts,
      timeoutMs: config.webhookDeliverTimeoutMs,
      concurrency: config.webhookConcurrency,
      retry: { maxAttempts: config.webhookMaxAttempts },
      onError: (error) =>
        logger.warn({ err: error }, 'webhook delivery failed to record; the lease expires and it is retried'),
    },
  );
  const webhookRetention = new WebhookRetention(db, clock, {
    retentionDays: config.webhookRetentionDays,
    onPruned: (deleted) =>
      logger.info({ deleted, retentionDays: config.webhookRetentionDays }, 'pruned old webhook deliveries'),
    onError: (error) =>
      logger.warn({ err: error }, 'pruning old webhook deliveries failed; it retries on its next pass'),
  });
  const artifactRetention = new ArtifactRetention(db, clock, services.artifactStorage, {
    onCleaned: (count) => logger.info({ count }, 'removed the files of expired and deleted artifacts'),
    onError: (error) => logger.warn({ err: error }, 'artifact clean-up failed; it retries on its next pass'),
  });
  return new BackgroundWork([
    { start: () => housekeeping.start(HOUSEKEEPING_INTERVAL_MS), stop: () => housekeeping.stop() },
    { start: () => webhookWorker.start(), stop: () => webhookWorker.stop() },
    { start: () => webhookRetention.start(WEBHOOK_RETENTION_INTERVAL_MS), stop: () => webhookRetention.stop() },
    // Every process fires due schedule ticks; each tick is claimed by one (services/actions/scheduler.ts).
    services.scheduler,
    { start: () => artifactRetention.start(ARTIFACT_RETENTION_INTERVAL_MS), stop: () => artifactRetention.stop() },
  ]);
}
