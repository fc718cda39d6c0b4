// The workflows API (Gitea's …/actions/workflows routes, run-control §3): the
// workflow files of the default branch, enable/disable, the runs of one
// workflow with Gitea's filters; and what "disabled" means to a user: a push
// does not run the workflow, dispatch answers 403 `workflow is disabled`, and
// once enabled again a push runs it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCurrentUserRepo, dispatchWorkflow, repoAddCollaborator } from '@llamaduck/forgejo-ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

interface WorkflowJson {
  id: string;
  name: string;
  path: string;
  state: string;
  created_at: string;
  updated_at: string;
  url: string;
  html_url: string;
  badge_url: string;
  deleted_at: string;
}

interface WorkflowRunJson {
  id: number;
  path: string;
  event: string;
  run_number: number;
  head_branch: string;
  head_sha: string;
  status: string;
  conclusion: string;
  url: string;
  html_url: string;
  actor: { login: string };
}

const CI = `name: CI
on: [push, workflow_dispatch]
jobs:
  build:
    runs-on: docker
    steps:
      - run: echo build
`;

const LINT = `on: push
jobs:
  lint:
    runs-on: docker
    steps:
      - run: echo lint
`;

// .forgejo/workflows exists, so .github/workflows is not read (README: "Workflows are read from the first of …").
const HIDDEN = `on: push
jobs:
  never:
    runs-on: docker
    steps:
      - run: echo never
`;

for (const dialect of testDialects()) {
  describe(`actions workflows API [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let bob: TestUser;
    let work: WorkDir;
    let authorTime: string;

    /** `token` null: anonymous. */
    const api = async (method: string, path: string, token: string | null = alice.token) =>
      s.api(method, `/repos/alice/app/actions${path}`, token === null ? {} : { token });
    const runsOf = async (
      workflow: string,
      query = '',
    ): Promise<{ workflow_runs: WorkflowRunJson[]; total_count: number }> => {
      const res = await api('GET', `/workflows/${workflow}/runs${query}`);
      assert.equal(res.status, 200, res.text);
      return res.json as { workflow_runs: WorkflowRunJson[]; total_count: number };
    };
    const push = async (message: string): Promise<string> => {
      const sha = await work.commit({ 'README.md': `# ${message}\n` }, message);
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      return sha;
    };

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      bob = await s.createUser('bob');
      assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name: 'app' } })).status, 201);
      assert.equal(
        (
          await repoAddCollaborator({
            client: alice.client,
            path: { owner: 'alice', repo: 'app', collaborator: 'bob' },
            body: { permission: 'read' },
          })
        ).status,
        204,
      );
      work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      await work.commit(
        {
          '.forgejo/workflows/ci.yml': CI,
          '.forgejo/workflows/lint.yaml': LINT,
          '.github/workflows/hidden.yml': HIDDEN,
        },
        'Add workflows',
      );
      await work.git(['commit', '-q', '--amend', '--no-edit', '--date=2026-01-02T03:04:05Z']);
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      authorTime = '2026-01-02T03:04:05Z';
    });

    after(async () => {
      await work?.remove();
      await s?.stop();
    });

    test('the list shows the workflows of the default branch in Gitea’s ActionWorkflow shape', async () => {
      const res = await api('GET', '/workflows');
      assert.equal(res.status, 200, res.text);
      const body = res.json as { workflows: WorkflowJson[]; total_count: number };
      assert.equal(body.total_count, 2);
      assert.deepEqual(body.workflows, [
        {
          id: 'ci.yml',
          name: 'CI',
          path: '.forgejo/workflows/ci.yml',
          state: 'active',
          created_at: authorTime,
          updated_at: authorTime,
          url: `${s.rootUrl}api/v1/repos/alice/app/actions/workflows/ci.yml`,
          html_url: `${s.rootUrl}alice/app/src/branch/main/.forgejo/workflows/ci.yml`,
          badge_url: `${s.rootUrl}alice/app/actions/workflows/ci.yml/badge.svg?branch=main`,
          deleted_at: '0001-01-01T00:00:00Z',
        },
        {
          id: 'lint.yaml',
          name: 'lint.yaml',
          path: '.forgejo/workflows/lint.yaml',
          state: 'active',
          created_at: authorTime,
          updated_at: authorTime,
          url: `${s.rootUrl}api/v1/repos/alice/app/actions/workflows/lint.yaml`,
          html_url: `${s.rootUrl}alice/app/src/branch/main/.forgejo/workflows/lint.yaml`,
          badge_url: `${s.rootUrl}alice/app/actions/workflows/lint.yaml/badge.svg?branch=main`,
          deleted_at: '0001-01-01T00:00:00Z',
        },
      ]);
    });

    test('one workflow by file name; an unknown one is 404 `workflow "<id>" not found`', async () => {
      const res = await api('GET', '/workflows/ci.yml');
      assert.equal(res.status, 200, res.text);
      assert.equal((res.json as WorkflowJson).name, 'CI');
      for (const id of ['nope.yml', 'hidden.yml', '1']) {
        const missing = await api('GET', `/workflows/${id}`);
        assert.deepEqual(
          [missing.status, (missing.json as { message: string }).message],
          [404, `workflow "${id}" not found`],
        );
      }
    });

    test('permissions: a token is required, a reader may read but not disable, 404 for a private repository of someone else', async () => {
      assert.equal((await api('GET', '/workflows', null)).status, 401);
      assert.equal((await api('GET', '/workflows', bob.token)).status, 200);
      const refused = await api('PUT', '/workflows/ci.yml/disable', bob.token);
      assert.deepEqual(
        [refused.status, (refused.json as { message: string }).message],
        [403, 'user should have a permission to write to a repo'],
      );
      const carol = await s.createUser('carol');
      assert.equal(
        (await createCurrentUserRepo({ client: alice.client, body: { name: 'secret', private: true } })).status,
        201,
      );
      assert.equal((await s.api('GET', '/repos/alice/secret/actions/workflows', { token: carol.token })).status, 404);
      assert.equal((await api('PUT', '/workflows/nope.yml/disable')).status, 404);
    });

    test('a disabled workflow ignores a push and refuses dispatch; enabled again, a push runs it', async () => {
      const before = (await runsOf('ci.yml')).total_count;
      const lintBefore = (await runsOf('lint.yaml')).total_count;
      assert.equal((await api('PUT', '/workflows/ci.yml/disable')).status, 204);
      assert.equal((await api('PUT', '/workflows/ci.yml/disable')).status, 204, 'idempotent');
      assert.equal(((await api('GET', '/workflows/ci.yml')).json as WorkflowJson).state, 'disabled_manually');

      await push('while disabled');
      assert.equal((await runsOf('ci.yml')).total_count, before, 'no run of the disabled workflow');
      assert.equal((await runsOf('lint.yaml')).total_count, lintBefore + 1, 'the other workflow still runs');

      const dispatched = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'app', workflowfilename: 'ci.yml' },
        body: { ref: 'main' },
      });
      assert.equal(dispatched.status, 403);
      assert.equal((dispatched.error as { message: string }).message, 'workflow is disabled');

      assert.equal((await api('PUT', '/workflows/ci.yml/enable')).status, 204);
      assert.equal((await api('PUT', '/workflows/ci.yml/enable')).status, 204, 'idempotent');
      assert.equal(((await api('GET', '/workflows/ci.yml')).json as WorkflowJson).state, 'active');
      const sha = await push('enabled again');
      const after = await runsOf('ci.yml');
      assert.equal(after.total_count, before + 1);
      assert.equal(after.workflow_runs[0]?.head_sha, sha);
    });

    test('runs of one workflow: Gitea’s ActionWorkflowRun, newest first, with its filters and X-Total-Count', async () => {
      const dispatched = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'app', workflowfilename: 'ci.yml' },
        body: { ref: 'main' },
      });
      assert.equal(dispatched.status, 204);
      const res = await api('GET', '/workflows/ci.yml/runs');
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers.get('x-total-count'), '3');
      const list = res.json as { workflow_runs: WorkflowRunJson[]; total_count: number };
      assert.equal(list.total_count, 3);
      assert.deepEqual(
        list.workflow_runs.map((run) => [
          run.path,
          run.event,
          run.head_branch,
          run.status,
          run.conclusion,
          run.actor.login,
        ]),
        [
          ['ci.yml@refs/heads/main', 'workflow_dispatch', 'main', 'queued', '', 'alice'],
          ['ci.yml@refs/heads/main', 'push', 'main', 'queued', '', 'alice'],
          // Superseded by the next push of main (Forgejo's auto-cancel of push runs).
          ['ci.yml@refs/heads/main', 'push', 'main', 'completed', 'cancelled', 'alice'],
        ],
      );
      const [newest] = list.workflow_runs;
      assert.equal(newest?.url, `${s.rootUrl}api/v1/repos/alice/app/actions/runs/${newest?.id}`);
      assert.equal(newest?.html_url, `${s.rootUrl}alice/app/actions/runs/${newest?.run_number}`);

      assert.equal((await runsOf('ci.yml', '?event=push')).total_count, 2);
      assert.equal((await runsOf('ci.yml', '?event=push&limit=1')).workflow_runs.length, 1);
      assert.equal((await runsOf('ci.yml', '?branch=main&status=queued')).total_count, 2);
      assert.equal((await runsOf('ci.yml', '?status=completed')).total_count, 1);
      assert.equal((await runsOf('ci.yml', '?branch=other')).total_count, 0);
      assert.equal((await runsOf('ci.yml', '?actor=alice')).total_count, 3);
      assert.equal((await runsOf('ci.yml', '?actor=bob')).total_count, 0);
      assert.equal((await runsOf('ci.yml', '?actor=nobody')).total_count, 0);
      assert.equal((await runsOf('ci.yml', `?head_sha=${newest?.head_sha}`)).total_count, 2);
      const bad = await api('GET', '/workflows/ci.yml/runs?status=done');
      assert.deepEqual([bad.status, (bad.json as { message: string }).message], [400, 'Invalid status done']);
      const unknown = await api('GET', '/workflows/nope.yml/runs');
      assert.deepEqual(
        [unknown.status, (unknown.json as { message: string }).message],
        [404, 'workflow "nope.yml" not found'],
      );
    });

    test('a workflow deleted from the default branch keeps its runs list; without runs it is 404', async () => {
      await work.commit({ '.forgejo/workflows/lint.yaml': null }, 'Remove lint');
      assert.equal((await work.push('main')).code, 0);
      assert.equal((await api('GET', '/workflows/lint.yaml')).status, 404);
      assert.ok((await runsOf('lint.yaml')).total_count >= 2);
      assert.deepEqual(
        ((await api('GET', '/workflows')).json as { workflows: WorkflowJson[] }).workflows.map((w) => w.id),
        ['ci.yml'],
      );
    });
  });
}
