// The services of the domain, built once by the composition root.
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Clock } from '../modules/clock.ts';
import type { KeyRing } from '../modules/crypto/key-ring.ts';
import type { Db } from '../models/database.ts';
import { AccessTokenService } from './access-tokens.ts';
import { AccountService } from './accounts.ts';
import { DispatchService } from './actions/dispatch.ts';
import { PushTriggers } from './actions/push-triggers.ts';
import { RunCreator } from './actions/run-creator.ts';
import { RunProgress } from './actions/run-progress.ts';
import { RunnerProtocolService } from './actions/runner-protocol.ts';
import { RunnerService } from './actions/runners.ts';
import { RunQueryService } from './actions/runs.ts';
import { SecretService } from './actions/secrets.ts';
import { TaskReportService } from './actions/task-reports.ts';
import { VariableService } from './actions/variables.ts';
import { WorkflowCatalog } from './actions/workflow-catalog.ts';
import { WorkflowService } from './actions/workflows.ts';
import { AuthenticationService } from './authentication.ts';
import { CredentialCache } from './credential-cache.ts';
import { DomainEvents } from './events.ts';
import { ENCRYPTED_COLUMNS } from './encrypted-columns.ts';
import { GitRepositories } from './git-repositories.ts';
import { KeyRotationService } from './key-rotation.ts';
import { OrgService } from './orgs.ts';
import { PermissionService } from './permissions.ts';
import { PushService } from './pushes.ts';
import { WebhookService } from './webhooks/hooks.ts';
import { HookDeliveryService } from './webhooks/deliveries.ts';
import { HookTestDelivery } from './webhooks/test-delivery.ts';
import { createActionsWebhookOutbox } from './webhooks/actions-outbox.ts';
import { createWebhookOutbox } from './webhooks/outbox.ts';
import { RepoService } from './repos.ts';
import { subscribeOwnerDeletion } from './owner-deletion.ts';

export interface Services {
  accounts: AccountService;
  accessTokens: AccessTokenService;
  authentication: AuthenticationService;
  permissions: PermissionService;
  orgs: OrgService;
  repos: RepoService;
  secrets: SecretService;
  variables: VariableService;
  gitRepositories: GitRepositories;
  pushes: PushService;
  dispatch: DispatchService;
  runs: RunQueryService;
  /** The workflows API: the default branch's workflow files, enable/disable, runs per workflow. */
  workflows: WorkflowService;
  /** Unblocks jobs and recomputes a run's status after its jobs change (the runner protocol calls it). */
  runProgress: RunProgress;
  /** Registration tokens and the runners REST API. */
  runners: RunnerService;
  /** The runner protocol: registration, declaration, fetching tasks. */
  runnerProtocol: RunnerProtocolService;
  /** The runner protocol: task state and log reports, and housekeeping of stuck work. */
  taskReports: TaskReportService;
  /** Organization and repository webhooks (CRUD). */
  webhooks: WebhookService;
  /** Webhook delivery history, redelivery and pings (the outbox subscriber is registered on `events`). */
  webhookDeliveries: HookDeliveryService;
  /** The test delivery of a repository hook (POST …/hooks/{id}/tests). */
  webhookTests: HookTestDelivery;
  events: DomainEvents;
  /** Encrypts values at rest (secrets now, webhook secrets later). */
  keys: KeyRing;
  keyRotation: KeyRotationService;
}

export function createServices(config: Config, db: Db, clock: Clock, keys: KeyRing, logger: Logger): Services {
  const events = new DomainEvents((error, event) => logger.error({ err: error, event: event.type }, 'cleanup after a committed change failed; leftover files are harmless'));
  const credentialCache = new CredentialCache(clock);
  const secrets = new SecretService(db, clock, keys);
  const runners = new RunnerService(db, clock, keys);
  const runProgress = new RunProgress(clock, events);
  const webhooks = new WebhookService(db, clock, keys);
  const variables = new VariableService(db, clock);
  const gitRepositories = new GitRepositories(path.join(config.dataDir, 'git', 'repositories'), config.dataDir, config.gitMaxPushBytes);
  events.subscribe(createWebhookOutbox({ clock, rootUrl: config.rootUrl }));
  events.subscribe(createActionsWebhookOutbox({ clock, rootUrl: config.rootUrl }));
  const repos = new RepoService(db, clock, gitRepositories, events);
  const catalog = new WorkflowCatalog();
  // ROOT_URL without its trailing slash: the github.server_url runners see.
  const runCreator = new RunCreator(db, clock, variables, events, config.rootUrl.replace(/\/$/, ''));
  const pushTriggers = new PushTriggers(db, events, catalog, runCreator, config.rootUrl, logger);
  const taskReports = new TaskReportService(db, clock, runProgress, config.dataDir, config.actionsLogMaxBytes);
  subscribeOwnerDeletion(events, { removeRepositoryLogs: (repoId) => taskReports.logs.removeRepository(repoId) });
  return {
    accounts: new AccountService(db, clock),
    accessTokens: new AccessTokenService(db, clock, credentialCache),
    authentication: new AuthenticationService(db, credentialCache),
    permissions: new PermissionService(db),
    orgs: new OrgService(db, clock, events),
    repos,
    secrets,
    variables,
    gitRepositories,
    pushes: new PushService(repos, gitRepositories, pushTriggers),
    dispatch: new DispatchService(catalog, runCreator, gitRepositories, config.rootUrl, db),
    workflows: new WorkflowService(db, clock, catalog, gitRepositories, config.rootUrl),
    runs: new RunQueryService(db),
    runProgress,
    runners,
    runnerProtocol: new RunnerProtocolService(db, clock, runProgress, secrets, variables, events, config.rootUrl),
    taskReports,
    webhooks,
    webhookDeliveries: new HookDeliveryService(db, clock, config.rootUrl),
    webhookTests: new HookTestDelivery(db, clock, config.rootUrl, gitRepositories),
    events,
    keys,
    keyRotation: new KeyRotationService(db, keys, ENCRYPTED_COLUMNS),
  };
}
