// Kysely table types: the shape of each row as stored. Flags are 0/1 integers.
import type { Generated } from 'kysely';
import type { ActionStatusValue } from '../modules/actions-status.ts';

export interface UserTable {
  id: Generated<number>;
  lower_name: string;
  name: string;
  full_name: Generated<string>;
  email: Generated<string>;
  lower_email: Generated<string>;
  passwd: Generated<string>;
  login_name: Generated<string>;
  source_id: Generated<number>;
  type: Generated<number>;
  visibility: Generated<number>;
  is_admin: Generated<number>;
  is_active: Generated<number>;
  prohibit_login: Generated<number>;
  must_change_password: Generated<number>;
  restricted: Generated<number>;
  description: Generated<string>;
  website: Generated<string>;
  location: Generated<string>;
  language: Generated<string>;
  pronouns: Generated<string>;
  repo_admin_change_team_access: Generated<number>;
  created_unix: number;
  updated_unix: number;
  last_login_unix: Generated<number>;
}

export interface AccessTokenTable {
  id: Generated<number>;
  uid: number;
  name: string;
  token_hash: string;
  token_last_eight: string;
  scope: string;
  created_unix: number;
  updated_unix: number;
}

export interface TeamTable {
  id: Generated<number>;
  org_id: number;
  lower_name: string;
  name: string;
  description: Generated<string>;
  authorize: number;
  includes_all_repositories: Generated<number>;
  can_create_org_repo: Generated<number>;
  units: Generated<string>;
  created_unix: number;
}

export interface TeamUserTable {
  id: Generated<number>;
  org_id: number;
  team_id: number;
  uid: number;
}

export interface OrgUserTable {
  id: Generated<number>;
  uid: number;
  org_id: number;
  is_public: Generated<number>;
}

export interface RepositoryTable {
  id: Generated<number>;
  owner_id: number;
  owner_name: string;
  lower_name: string;
  name: string;
  description: Generated<string>;
  website: Generated<string>;
  default_branch: string;
  object_format_name: Generated<string>;
  is_private: Generated<number>;
  is_archived: Generated<number>;
  is_empty: Generated<number>;
  is_template: Generated<number>;
  has_issues: Generated<number>;
  has_wiki: Generated<number>;
  has_pull_requests: Generated<number>;
  has_projects: Generated<number>;
  has_releases: Generated<number>;
  has_packages: Generated<number>;
  has_actions: Generated<number>;
  archived_unix: Generated<number>;
  created_unix: number;
  updated_unix: number;
}

export interface TeamRepoTable {
  id: Generated<number>;
  org_id: number;
  team_id: number;
  repo_id: number;
}

export interface CollaborationTable {
  id: Generated<number>;
  repo_id: number;
  user_id: number;
  mode: number;
  created_unix: number;
}

/**
 * A named value of one Actions scope: (owner_id, 0) for a user or organization,
 * (0, repo_id) for a repository. Both `secret` (data is ciphertext) and
 * `action_variable` (data is readable) have this shape.
 */
export interface ScopedValueTable {
  id: Generated<number>;
  owner_id: number;
  repo_id: number;
  name: string;
  data: string;
  created_unix: number;
  updated_unix: number;
}

export interface ActionRunTable {
  id: Generated<number>;
  repo_id: number;
  owner_id: number;
  index_in_repo: number;
  title: string;
  workflow_id: string;
  workflow_directory: Generated<string>;
  trigger_user_id: number;
  schedule_id: Generated<number>;
  ref: string;
  commit_sha: string;
  is_fork_pull_request: Generated<number>;
  need_approval: Generated<number>;
  approved_by: Generated<number>;
  event: string;
  event_payload: string;
  trigger_event: string;
  status: ActionStatusValue;
  pre_execution_error: Generated<string>;
  started: Generated<number>;
  stopped: Generated<number>;
  previous_duration: Generated<number>;
  /** Lowercased group ('' for runs created before groups existed). */
  concurrency_group: Generated<string>;
  /** Forgejo's ConcurrencyMode: 0 unlimited, 1 queue behind, 2 cancel in progress. */
  concurrency_type: Generated<number>;
  /** 1: some job of the run declares a job-level `concurrency:`. */
  job_concurrency: Generated<number>;
  created: number;
  updated: number;
}

export interface ActionRunIndexTable {
  repo_id: number;
  max_index: number;
}

export interface CommitStatusTable {
  id: Generated<number>;
  repo_id: number;
  sha: string;
  /** The per-(repository, sha) number (Forgejo's `index`), the API's `id`. */
  index_in_sha: number;
  state: string;
  target_url: string;
  description: string;
  context: string;
  context_hash: string;
  creator_id: number;
  created: number;
  updated: number;
}

/** A web console session (migration 0016): the cookie's id is stored hashed. */
export interface WebSessionTable {
  id: Generated<number>;
  id_hash: string;
  user_id: number;
  csrf_secret: string;
  created: number;
  expires: number;
}

export interface CommitStatusIndexTable {
  repo_id: number;
  sha: string;
  max_index: number;
}

export interface ActionArtifactTable {
  id: Generated<number>;
  run_id: number;
  job_id: number;
  task_id: number;
  repo_id: number;
  owner_id: number;
  commit_sha: string;
  artifact_name: string;
  artifact_path: string;
  storage_path: string;
  file_size: Generated<number>;
  file_compressed_size: Generated<number>;
  content_encoding: Generated<string>;
  staged_size: Generated<number>;
  digest: Generated<string>;
  status: number;
  created: number;
  updated: number;
  expired_unix: number;
}

export interface ActionRunCountTable {
  id: Generated<number>;
  repo_id: number;
  workflow_id: string;
  ref: string;
  event: string;
  status: ActionStatusValue;
  count: number;
}

export interface ActionRunJobTable {
  id: Generated<number>;
  run_id: number;
  repo_id: number;
  owner_id: number;
  commit_sha: string;
  is_fork_pull_request: Generated<number>;
  name: string;
  attempt: Generated<number>;
  handle: string;
  workflow_payload: string;
  job_id: string;
  /** JSON array of job ids. */
  needs: string;
  /** JSON array of labels. */
  runs_on: string;
  has_if: Generated<number>;
  task_id: Generated<number>;
  status: ActionStatusValue;
  /** 1: `blocked` only because its run queues behind an older run of its concurrency group. */
  concurrency_held: Generated<number>;
  /** The job's `concurrency:` with the contexts of its run's creation (JSON), '' none. */
  raw_concurrency: Generated<string>;
  /** The job's evaluated group, lowercased; '' none or not evaluated yet. */
  concurrency_group: Generated<string>;
  concurrency_cancel: Generated<number>;
  /**
   * 1: `blocked` because another member of its job group runs; -1: held and
   * replaced by a newer member, its cancel pending (never released); 0 not held.
   */
  group_held: Generated<number>;
  /** Why the job's `concurrency:` did not evaluate (the job failed); '' none. */
  concurrency_error: Generated<string>;
  started: Generated<number>;
  stopped: Generated<number>;
  created: number;
  updated: number;
}

export interface ActionTaskTable {
  id: Generated<number>;
  job_id: number;
  attempt: number;
  runner_id: number;
  status: ActionStatusValue;
  started: Generated<number>;
  stopped: Generated<number>;
  repo_id: number;
  owner_id: number;
  commit_sha: string;
  is_fork_pull_request: Generated<number>;
  token_hash: string | null;
  token_last_eight: Generated<string>;
  log_filename: Generated<string>;
  log_in_storage: Generated<number>;
  log_length: Generated<number>;
  log_size: Generated<number>;
  log_expired: Generated<number>;
  /** forgejo-runner's x-runner-request-key of the FetchTask that claimed the task ('' for none). */
  runner_request_key: Generated<string>;
  /** Unix seconds after which a retry under that key no longer finds the task. */
  runner_request_key_expires: Generated<number>;
  created: number;
  updated: number;
}

export interface ActionRunnerTable {
  id: Generated<number>;
  uuid: string;
  name: string;
  version: Generated<string>;
  owner_id: Generated<number>;
  repo_id: Generated<number>;
  description: Generated<string>;
  token_hash: string;
  token_last_eight: string;
  /** JSON array of label names; null until declared. */
  agent_labels: string | null;
  ephemeral: Generated<number>;
  last_online: Generated<number>;
  last_active: Generated<number>;
  created: number;
  updated: number;
}

export interface ActionRunnerTokenTable {
  id: Generated<number>;
  owner_id: Generated<number>;
  repo_id: Generated<number>;
  token_hash: string;
  /** Key-ring ciphertext: the API shows the active token again. */
  token_encrypted: string;
  is_active: number;
  created: number;
  updated: number;
}

/** One row (id 1): bumped by triggers when a runner is deleted or its identity changes (migration 0017). */
export interface ActionRunnerVersionTable {
  id: number;
  version: number;
}

export interface ActionTasksVersionTable {
  id: Generated<number>;
  owner_id: number;
  repo_id: number;
  version: number;
  created: number;
  updated: number;
}

export interface ActionTaskStepTable {
  id: Generated<number>;
  task_id: number;
  name: string;
  step_index: number;
  repo_id: number;
  status: ActionStatusValue;
  log_index: Generated<number>;
  log_length: Generated<number>;
  started: Generated<number>;
  stopped: Generated<number>;
  created: number;
  updated: number;
}

export interface ActionTaskOutputTable {
  id: Generated<number>;
  task_id: number;
  output_key: string;
  output_value: string;
}

/** A disabled workflow of a repository (migration 0009); no row means active. */
export interface ActionWorkflowStateTable {
  id: Generated<number>;
  repo_id: number;
  /** The run's workflow_id: path relative to the workflows directory. */
  workflow_id: string;
  created: number;
}

/** One `cron:` entry of a default-branch workflow (migration 0013). */
export interface ActionScheduleTable {
  id: Generated<number>;
  repo_id: number;
  owner_id: number;
  workflow_id: string;
  workflow_directory: string;
  /** The default branch, `refs/heads/<name>`. */
  ref: string;
  commit_sha: string;
  /** The `cron:` text as written. */
  spec: string;
  /** The `timezone:` key; '' when absent. */
  time_zone: string;
  /** Unix seconds of the next tick to fire. */
  next: number;
  /** Unix seconds of the last tick fired (0: none yet). */
  prev: number;
  created: number;
}

export interface WebhookTable {
  id: Generated<number>;
  owner_id: Generated<number>;
  repo_id: Generated<number>;
  type: string;
  url: string;
  http_method: Generated<string>;
  content_type: string;
  secret_encrypted: Generated<string>;
  authorization_header_encrypted: Generated<string>;
  /** JSON array of internal event names. */
  events: string;
  branch_filter: Generated<string>;
  /** JSON; 'null' when the type has no settings. */
  meta: Generated<string>;
  is_active: Generated<number>;
  is_system_webhook: Generated<number>;
  created: number;
  updated: number;
}

export interface HookTaskTable {
  id: Generated<number>;
  hook_id: number;
  uuid: string;
  event_type: string;
  payload_content: string;
  /** 0 pending, 1 delivering, 2 delivered, 3 failed for good. */
  status: Generated<number>;
  attempts: Generated<number>;
  /** Unix ms. */
  next_attempt_at: number;
  /** Unix ms. */
  lease_until: Generated<number>;
  lease_owner: Generated<string>;
  is_redelivery: Generated<number>;
  last_status_code: Generated<number>;
  last_duration_ms: Generated<number>;
  last_error: Generated<string>;
  /** Unix ms of the successful attempt; 0 until then. */
  delivered: Generated<number>;
  /** Unix ms, as every time of this table (seconds before migration 0012). */
  created: number;
  /** Unix ms. */
  updated: number;
}

export interface HookTaskAttemptTable {
  id: Generated<number>;
  task_id: number;
  attempt: number;
  /** Unix ms. */
  started: number;
  duration_ms: number;
  request_url: string;
  request_headers: string;
  request_body: string;
  response_status: Generated<number>;
  response_headers: Generated<string>;
  response_body: Generated<string>;
  error: Generated<string>;
}

export interface Database {
  user: UserTable;
  access_token: AccessTokenTable;
  team: TeamTable;
  team_user: TeamUserTable;
  org_user: OrgUserTable;
  repository: RepositoryTable;
  team_repo: TeamRepoTable;
  collaboration: CollaborationTable;
  secret: ScopedValueTable;
  action_variable: ScopedValueTable;
  action_run: ActionRunTable;
  action_run_index: ActionRunIndexTable;
  action_run_count: ActionRunCountTable;
  action_run_job: ActionRunJobTable;
  action_task: ActionTaskTable;
  action_runner: ActionRunnerTable;
  action_runner_token: ActionRunnerTokenTable;
  action_tasks_version: ActionTasksVersionTable;
  action_runner_version: ActionRunnerVersionTable;
  action_task_step: ActionTaskStepTable;
  action_task_output: ActionTaskOutputTable;
  action_workflow_state: ActionWorkflowStateTable;
  action_schedule: ActionScheduleTable;
  webhook: WebhookTable;
  hook_task: HookTaskTable;
  hook_task_attempt: HookTaskAttemptTable;
  commit_status: CommitStatusTable;
  commit_status_index: CommitStatusIndexTable;
  action_artifact: ActionArtifactTable;
  web_session: WebSessionTable;
}
