// Stored payloads as the outboxes write them (Forgejo's push/create/delete/
// repository and action-run payloads, Gitea's workflow_run/workflow_job),
// with user text that needs escaping, for the converter tests.
import assert from 'node:assert/strict';
import type { Converted, ConvertInput } from './converter.ts';
import type { Json } from './text.ts';

export const HOOK_URL = 'https://hooks.example.com/services/T0/B0';
export const UUID = '3f1c2b9e-8d4a-4b6e-9c1d-2a7f5e0b4c11';

const SHA1 = '1111111111111111111111111111111111111111';
const SHA2 = '2222222222222222222222222222222222222222';
const SHA3 = '3333333333333333333333333333333333333333';

export const sender = {
  id: 2,
  login: 'alice',
  username: 'alice',
  full_name: 'Alice <Admin>',
  html_url: 'https://git.example.com/alice',
  avatar_url: 'https://git.example.com/avatars/2',
};

export const repository = {
  id: 7,
  name: 'app',
  full_name: 'acme/app',
  owner: { id: 3, login: 'acme', username: 'acme' },
  html_url: 'https://git.example.com/acme/app',
  clone_url: 'https://git.example.com/acme/app.git',
  ssh_url: '',
  private: false,
  object_format_name: 'sha1',
};

function commit(id: string, message: string, author: string) {
  return {
    id,
    message,
    url: `https://git.example.com/acme/app/commit/${id}`,
    author: { name: author, email: 'dev@example.com', username: '' },
    committer: { name: author, email: 'dev@example.com', username: '' },
    verification: null,
    timestamp: '2026-01-02T03:04:05Z',
    added: [],
    removed: [],
    modified: [],
  };
}

export function pushPayload(commitCount = 2): Json {
  const all = [
    commit(SHA2, 'Fix <script> & *bold* [link](x)\n\nDetails here', 'Bob `the` <Builder>'),
    commit(SHA1, 'Initial commit', 'Alice'),
  ];
  const commits = all.slice(0, commitCount);
  return {
    ref: 'refs/heads/main',
    before: SHA1,
    after: SHA2,
    compare_url: `https://git.example.com/acme/app/compare/${SHA1}...${SHA2}`,
    commits,
    total_commits: commits.length,
    head_commit: commits[0] ?? null,
    repository,
    pusher: sender,
    sender,
  };
}

export const createPayload: Json = { ref: 'main', ref_type: 'branch', sha: SHA2, repository, sender };
export const tagCreatePayload: Json = { ref: 'v1.0', ref_type: 'tag', sha: SHA3, repository, sender };
export const deletePayload: Json = { ref: 'feature/x', ref_type: 'branch', pusher_type: 'user', repository, sender };

export function repositoryPayload(action: 'created' | 'deleted'): Json {
  return { action, repository, organization: { id: 3, username: 'acme' }, sender };
}

export function actionPayload(action: 'success' | 'failure' | 'recover'): Json {
  return {
    action,
    run: {
      id: 12,
      index_in_repo: 3,
      title: 'CI <fast> & green',
      status: action === 'failure' ? 'failure' : 'success',
      html_url: 'https://git.example.com/acme/app/actions/runs/3',
      prettyref: 'main',
      commit_sha: SHA2,
      workflow_id: 'ci.yml',
      repository,
      trigger_user: sender,
    },
    prior_status: action === 'recover' ? 'failure' : 'success',
    last_run: null,
  };
}

export const workflowRunPayload: Json = {
  action: 'completed',
  workflow: { id: 'ci.yml', name: 'CI', path: '.forgejo/workflows/ci.yml' },
  workflow_run: {
    id: 12,
    url: 'https://git.example.com/api/v1/repos/acme/app/actions/runs/12',
    html_url: 'https://git.example.com/acme/app/actions/runs/3',
    display_title: 'Fix <script>',
    path: '.forgejo/workflows/ci.yml@refs/heads/main',
    event: 'push',
    run_attempt: 1,
    run_number: 3,
    head_sha: SHA2,
    head_branch: 'main',
    status: 'completed',
    conclusion: 'success',
  },
  repository,
  organization: { id: 3, username: 'acme' },
  sender,
};

export const workflowJobPayload: Json = {
  action: 'in_progress',
  workflow_job: {
    id: 40,
    run_id: 12,
    run_url: 'https://git.example.com/api/v1/repos/acme/app/actions/runs/12',
    html_url: 'https://git.example.com/acme/app/actions/runs/3/jobs/0',
    name: 'build & test',
    labels: ['docker'],
    head_sha: SHA2,
    head_branch: 'main',
    status: 'in_progress',
    conclusion: null,
    runner_id: 1,
    runner_name: 'r1',
    steps: [],
  },
  repository,
  sender,
};

/** Every event the outboxes store, with a payload of each. */
export const EVENTS: ReadonlyArray<[string, Json]> = [
  ['push', pushPayload()],
  ['create', createPayload],
  ['delete', deletePayload],
  ['repository', repositoryPayload('created')],
  ['action_run_success', actionPayload('success')],
  ['action_run_failure', actionPayload('failure')],
  ['action_run_recover', actionPayload('recover')],
  ['workflow_run', workflowRunPayload],
  ['workflow_job', workflowJobPayload],
];

export function input(
  eventType: string,
  payload: Json,
  meta: Json = {},
  extra: Partial<ConvertInput> = {},
): ConvertInput {
  return { eventType, payload, meta, url: HOOK_URL, uuid: UUID, ...extra };
}

/** The request of a conversion that must produce one. */
export function requestOf(converted: Converted) {
  assert.equal(converted.kind, 'request', converted.kind === 'skip' ? converted.reason : '');
  if (converted.kind !== 'request') throw new Error('unreachable');
  return converted.request;
}

/** The parsed JSON body of a conversion that must produce a request. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests walk the body freely
export function bodyOf(converted: Converted): any {
  return JSON.parse(requestOf(converted).body);
}
