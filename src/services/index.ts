// The services of the domain: what each is for. They are built once, with
// everything else, by the composition root (src/deps.ts).
import type { KeyRing } from '../modules/crypto/key-ring.ts';
import type { AccessTokenService } from './access-tokens.ts';
import type { AccountService } from './accounts.ts';
import type { DispatchService } from './actions/dispatch.ts';
import type { JobLogService } from './actions/job-logs.ts';
import type { JobQueryService } from './actions/jobs.ts';
import type { RunControlService } from './actions/run-control.ts';
import type { RunProgress } from './actions/run-progress.ts';
import type { RunnerProtocolService } from './actions/runner-protocol.ts';
import type { RunnerService } from './actions/runners.ts';
import type { RunQueryService } from './actions/runs.ts';
import type { SecretService } from './actions/secrets.ts';
import type { TaskReportService } from './actions/task-reports.ts';
import type { VariableService } from './actions/variables.ts';
import type { WorkflowService } from './actions/workflows.ts';
import type { Scheduler } from './actions/scheduler.ts';
import type { ScheduleService } from './actions/schedules.ts';
import type { AuthenticationService } from './authentication.ts';
import type { DomainEvents } from './events.ts';
import type { GitRepositories } from './git-repositories.ts';
import type { KeyRotationService } from './key-rotation.ts';
import type { OrgService } from './orgs.ts';
import type { PermissionService } from './permissions.ts';
import type { PushService } from './pushes.ts';
import type { WebhookService } from './webhooks/hooks.ts';
import type { HookDeliveryService } from './webhooks/deliveries.ts';
import type { HookTestDelivery } from './webhooks/test-delivery.ts';
import type { RepoService } from './repos.ts';
import type { CommitStatusService } from './commit-statuses.ts';
import type { ArtifactService } from './actions/artifacts.ts';
import type { ArtifactRestService } from './actions/artifacts-rest.ts';
import type { ArtifactV3Service } from './actions/artifacts-v3.ts';
import type { ObjectStorage } from '../modules/storage/object-storage.ts';
import type { WebSessionService } from './web-sessions.ts';

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
  /** Cancel, rerun and delete of runs (the run-control API). */
  runControl: RunControlService;
  /** The v4 artifact protocol (runtime token, signed URLs). */
  artifacts: ArtifactService;
  /** The v3 artifact protocol (upload-artifact@v3: files in chunks under /api/actions_pipeline). */
  artifactsV3: ArtifactV3Service;
  /** Artifacts as the REST API shows them. */
  artifactsRest: ArtifactRestService;
  /** Where artifact files live. */
  artifactStorage: ObjectStorage;
  /** The jobs of a run and one job, as the API shows them. */
  jobs: JobQueryService;
  /** Job logs as text and a run's logs as a zip, streamed. */
  jobLogs: JobLogService;
  /** The workflows API: the default branch's workflow files, enable/disable, runs per workflow. */
  workflows: WorkflowService;
  /** `on: schedule`: registration from the default branch, and the run of one tick. */
  schedules: ScheduleService;
  /** Fires due schedule ticks (a background worker, started by the server). */
  scheduler: Scheduler;
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
  /** The commit status API (Actions writes its statuses through the subscriber on `events`). */
  commitStatuses: CommitStatusService;
  /** Sign-in sessions of the web console (stored hashed, shared by every process). */
  webSessions: WebSessionService;
  events: DomainEvents;
  /** Encrypts values at rest (secrets now, webhook secrets later). */
  keys: KeyRing;
  keyRotation: KeyRotationService;
}
