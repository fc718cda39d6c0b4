// Workflows made real: push a repository with the system git client, see runs
// created for matching pushes only, dispatch workflows, list and read runs
// (Forgejo: routers/api/v1/repo/action.go), through the forgejo-ts client where it can express it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  actionRun,
  createCurrentUserRepo,
  dispatchWorkflow,
  listActionRuns,
  listActionTasks,
  repoAddCollaborator,
  repoEdit,
} from '@llamaduck/forgejo-ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';
import type { ActionStatusValue } from '../../src/modules/actions-status.ts';
import { forceJobs } from '../support/white-box.ts';

interface RunJson {
  id: number;
  title: string;
  workflow_id: string;
  index_in_repo: number;
  trigger_user: { login: string };
  ScheduleID: number;
  prettyref: string;
  commit_sha: string;
  event: string;
  event_payload: string;
  trigger_event: string;
  status: string;
  html_url: string;
  repository: { full_name: string };
  pre_execution_error?: string;
  duration?: number;
}

interface RunList {
  workflow_runs: RunJson[];
  total_count: number;
}

const CI = `name: CI
on:
  push:
    branches: [main]
    paths-ignore: ['docs/**']
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: echo build
  test:
    needs: build
    runs-on: \${{ matrix.os }}
    strategy:
      matrix:
        os: [linux, macos]
    steps:
      - run: echo test
`;

const RELEASE = `on:
  push:
    tags: ['v*']
jobs:
  publish:
    runs-on: docker
    steps:
      - run: echo publish
`;

const DEPLOY = `name: Deploy
on:
  workflow_dispatch:
    inputs:
      target:
        description: Where to deploy
        required: true
      debug:
        type: boolean
        default: false
      note:
        required: false
jobs:
  deploy:
    runs-on: docker
    steps:
      - run: echo \${{ inputs.target }}
  notify:
    needs: deploy
    runs-on: docker
    steps:
      - run: echo done
`;

// Hidden: .forgejo/workflows exists, so .github/workflows is never read.
const HIDDEN = `on: [push, workflow_dispatch]
jobs:
  never:
    runs-on: docker
    steps:
      - run: echo never
`;

for (const dialect of testDialects()) {
  describe(`actions runs, push triggers and dispatch [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let bob: TestUser;
    let work: WorkDir;
    let mainSha: string;

    const runs = async (query = '', token = alice.token): Promise<RunList> => {
      const res = await s.api('GET', `/repos/alice/app/actions/runs${query}`, { token });
      assert.equal(res.status, 200, res.text);
      return res.json as RunList;
    };

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      bob = await s.createUser('bob');
      assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name: 'app' } })).status, 201);
      work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      mainSha = await work.commit(
        {
          'README.md': '# app\n',
          '.forgejo/workflows/ci.yml': CI,
          '.forgejo/workflows/release.yaml': RELEASE,
          '.forgejo/workflows/ops/deploy.yml': DEPLOY,
          '.github/workflows/hidden.yml': HIDDEN,
        },
        'Add workflows\n\nLonger body.',
      );
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
    });

    after(async () => {
      await work.remove();
      await s.stop();
    });

    test('a push to main creates one run of the matching workflow, attributed to the pusher', async () => {
      const list = await runs();
      assert.equal(list.total_count, 1);
      const [run] = list.workflow_runs;
      assert.ok(run);
      assert.equal(run.workflow_id, 'ci.yml');
      assert.equal(run.index_in_repo, 1);
      assert.equal(run.title, 'Add workflows');
      assert.equal(run.event, 'push');
      assert.equal(run.trigger_event, 'push');
      assert.equal(run.commit_sha, mainSha);
      assert.equal(run.prettyref, 'main');
      assert.equal(run.status, 'waiting');
      assert.equal(run.trigger_user.login, 'alice');
      assert.equal(run.ScheduleID, 0);
      assert.equal(run.repository.full_name, 'alice/app');
      assert.equal(run.html_url, `${s.rootUrl}alice/app/actions/runs/1`);
      assert.equal(run.duration, undefined, 'a run that never started has no duration');
      const payload = JSON.parse(run.event_payload) as {
        ref: string;
        after: string;
        pusher: { login: string };
        head_commit: { id: string };
      };
      assert.equal(payload.ref, 'refs/heads/main');
      assert.equal(payload.after, mainSha);
      assert.equal(payload.head_commit.id, mainSha);
      assert.equal(payload.pusher.login, 'alice');
    });

    test('the first push made the repository non-empty', async () => {
      const res = await s.api('GET', '/repos/alice/app', { token: alice.token });
      assert.equal((res.json as { empty: boolean }).empty, false);
    });

    test('jobs: one per job key and matrix leg, dependants blocked, runs-on evaluated', async () => {
      const [run] = (await runs()).workflow_runs;
      const jobs = await s.server.deps.database.db
        .selectFrom('action_run_job')
        .selectAll()
        .where('run_id', '=', run?.id ?? 0)
        .orderBy('id')
        .execute();
      assert.deepEqual(
        jobs.map((j) => [j.job_id, j.name, JSON.parse(j.runs_on) as string[], j.status]),
        [
          ['build', 'build', ['ubuntu-latest'], 5],
          ['test', 'test (linux)', ['linux'], 7],
          ['test', 'test (macos)', ['macos'], 7],
        ],
      );
    });

    test('as jobs finish, needs unblock dependants, a failure skips them, and the run status follows', async () => {
      // Stand-in for runners (the runner protocol drives this for real): set
      // job results, then let the run settle as UpdateTask does.
      const db = s.server.deps.database.db;
      const [run] = (await runs()).workflow_runs;
      const runId = run?.id ?? 0;
      const runJobs = (await s.api('GET', `/repos/alice/app/actions/runs/${runId}/jobs`, { token: alice.token }))
        .json as { id: number; name: string }[];
      const finish = async (jobName: string, status: ActionStatusValue) => {
        await db.transaction().execute(async (tx) => {
          await forceJobs(
            tx,
            runJobs.filter((job) => job.name === jobName).map((job) => job.id),
            { status },
          );
          await s.server.deps.services.runProgress.settle(tx, runId);
        });
        const res = await s.api('GET', `/repos/alice/app/actions/runs/${runId}`, { token: alice.token });
        return (res.json as RunJson).status;
      };
      const jobStatuses = async () =>
        (
          await db
            .selectFrom('action_run_job')
            .select(['name', 'status'])
            .where('run_id', '=', runId)
            .orderBy('id')
            .execute()
        ).map((j) => [j.name, j.status]);
      assert.equal(await finish('build', 6), 'running');
      assert.equal(await finish('build', 1), 'waiting', 'build done: both test legs are waiting');
      assert.deepEqual(await jobStatuses(), [
        ['build', 1],
        ['test (linux)', 5],
        ['test (macos)', 5],
      ]);
      await finish('test (linux)', 1);
      assert.equal(await finish('test (macos)', 2), 'failure');
      // Put the run back as the other tests expect it (waiting, jobs waiting).
      await db.transaction().execute(async (tx) => {
        await forceJobs(
          tx,
          runJobs.map((job) => job.id),
          { status: 5 },
        );
        await s.server.deps.services.runProgress.settle(tx, runId);
      });
      assert.equal(
        ((await s.api('GET', `/repos/alice/app/actions/runs/${runId}`, { token: alice.token })).json as RunJson).status,
        'waiting',
      );
    });

    test('pushes that do not match the filters create no run', async () => {
      await work.commit({ 'docs/guide.md': 'docs only\n' }, 'Docs only');
      assert.equal((await work.push('main')).code, 0);
      await work.git(['checkout', '-q', '-b', 'feature']);
      await work.commit({ 'src/a.txt': 'a\n' }, 'Feature work');
      assert.equal((await work.push('feature')).code, 0);
      await work.git(['checkout', '-q', 'main']);
      assert.equal((await runs()).total_count, 1);
    });

    test('a push that changes code on main, and a tag push, each create a run', async () => {
      const sha = await work.commit({ 'src/main.txt': 'code\n' }, 'Code change');
      await work.git(['tag', 'v1.0.0']);
      assert.equal((await work.push('main', 'v1.0.0')).code, 0);
      const list = await runs();
      assert.equal(list.total_count, 3);
      const byWorkflow = new Map(list.workflow_runs.map((r) => [r.workflow_id, r]));
      assert.equal(byWorkflow.get('release.yaml')?.prettyref, 'v1.0.0');
      assert.equal(byWorkflow.get('release.yaml')?.commit_sha, sha);
      assert.deepEqual(
        list.workflow_runs.map((r) => r.index_in_repo),
        [3, 2, 1],
      );
    });

    test('[skip ci] in the head commit message suppresses push runs', async () => {
      await work.commit({ 'src/skip.txt': 'x\n' }, 'Quiet change [skip ci]');
      assert.equal((await work.push('main')).code, 0);
      assert.equal((await runs()).total_count, 3);
    });

    test('dispatch: 204, inputs resolved with defaults, attributed to the caller', async () => {
      const res = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'app', workflowfilename: 'ops/deploy.yml' },
        body: { ref: 'main', inputs: { target: 'staging', debug: 'on', ignored: 'x' } },
      });
      assert.equal(res.status, 204);
      const [run] = (await runs('?event=workflow_dispatch')).workflow_runs;
      assert.ok(run);
      assert.equal(run.title, 'Deploy');
      assert.equal(run.event, '', "Forgejo's event field is empty for dispatch runs");
      assert.equal(run.trigger_event, 'workflow_dispatch');
      assert.equal(run.prettyref, 'main');
      const payload = JSON.parse(run.event_payload) as Record<string, unknown>;
      assert.deepEqual(payload.inputs, { target: 'staging', debug: 'true' });
      assert.equal(payload.ref, 'refs/heads/main');
      assert.equal(payload.workflow, '.forgejo/workflows/ops/deploy.yml');
      assert.equal((payload.sender as { login: string }).login, 'alice');
    });

    test('dispatch with return_run_info answers 201 with the run id, number and job ids', async () => {
      const res = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'app', workflowfilename: 'ops/deploy.yml' },
        body: { ref: 'refs/heads/main', inputs: { target: 'prod' }, return_run_info: true },
      });
      assert.equal(res.status, 201);
      const data = res.data as { id: number; run_number: number; jobs: string[] };
      assert.deepEqual([...data.jobs].sort(), ['deploy', 'notify']);
      const got = await actionRun({ client: alice.client, path: { owner: 'alice', repo: 'app', run_id: data.id } });
      assert.equal(got.status, 200);
      assert.equal((got.data as unknown as RunJson).index_in_repo, data.run_number);
    });

    test("dispatch with Gitea's return_run_details answers 200 with RunDetails", async () => {
      const res = await s.api(
        'POST',
        '/repos/alice/app/actions/workflows/ops%2Fdeploy.yml/dispatches?return_run_details=true',
        {
          token: alice.token,
          body: { ref: 'v1.0.0', inputs: { target: 'x' } },
        },
      );
      assert.equal(res.status, 200, res.text);
      const details = res.json as { workflow_run_id: number; run_url: string; html_url: string };
      assert.equal(details.run_url, `${s.rootUrl}api/v1/repos/alice/app/actions/runs/${details.workflow_run_id}`);
      const run = await s.api('GET', `/repos/alice/app/actions/runs/${details.workflow_run_id}`, {
        token: alice.token,
      });
      assert.equal((run.json as RunJson).prettyref, 'v1.0.0', 'a short name is a tag before a branch');
    });

    test('dispatch refusals: empty ref, missing required input, unknown ref or file, no token, reader, archived', async () => {
      const post = (file: string, body: unknown, token?: string) =>
        s.api('POST', `/repos/alice/app/actions/workflows/${encodeURIComponent(file)}/dispatches`, {
          ...(token ? { token } : {}),
          body,
        });
      let res = await post('ops/deploy.yml', { inputs: { target: 'x' } }, alice.token);
      assert.deepEqual([res.status, (res.json as { message: string }).message], [400, 'ref is empty']);
      res = await post('ops/deploy.yml', { ref: 'main' }, alice.token);
      assert.deepEqual(
        [res.status, (res.json as { message: string }).message],
        [400, "input required for 'Where to deploy'"],
      );
      res = await post('ops/deploy.yml', { ref: 'nope', inputs: { target: 'x' } }, alice.token);
      assert.equal(res.status, 404);
      res = await post('ops/deploy.yml', { ref: 'refs/heads/nope', inputs: { target: 'x' } }, alice.token);
      assert.deepEqual(
        [res.status, (res.json as { message: string }).message],
        [404, 'object does not exist [id: refs/heads/nope, rel_path: ]'],
      );
      res = await post('hidden.yml', { ref: 'main' }, alice.token);
      assert.equal(res.status, 404, 'a .github workflow is hidden by .forgejo/workflows');
      res = await post('ops/deploy.yml', { ref: 'main', inputs: { target: 1 } }, alice.token);
      assert.equal(res.status, 422);
      res = await post('ops/deploy.yml', { ref: 'main', inputs: { target: 'x' } });
      assert.equal(res.status, 401);
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
      res = await post('ops/deploy.yml', { ref: 'main', inputs: { target: 'x' } }, bob.token);
      assert.deepEqual(
        [res.status, (res.json as { message: string }).message],
        [403, 'user should have a permission to write to a repo'],
      );
      const before = (await runs()).total_count;
      assert.equal(
        (await repoEdit({ client: alice.client, path: { owner: 'alice', repo: 'app' }, body: { archived: true } }))
          .status,
        200,
      );
      res = await post('ops/deploy.yml', { ref: 'main', inputs: { target: 'x' } }, alice.token);
      assert.equal(res.status, 423);
      assert.equal(
        (await repoEdit({ client: alice.client, path: { owner: 'alice', repo: 'app' }, body: { archived: false } }))
          .status,
        200,
      );
      assert.equal((await runs()).total_count, before, 'no refused dispatch created a run');
    });

    test('runs list: filters, repeated keys, paging, 400 for an unknown status', async () => {
      const all = await runs();
      assert.equal(all.total_count, 6);
      assert.equal((await runs('?event=push')).total_count, 3);
      assert.equal((await runs('?event=push&event=workflow_dispatch')).total_count, 6);
      assert.equal((await runs('?event=')).total_count, 0);
      // The first push run of main was cancelled by the next push (Forgejo's auto-cancel of push runs).
      assert.equal((await runs('?status=waiting')).total_count, 5);
      assert.equal((await runs('?status=cancelled')).total_count, 1);
      assert.equal((await runs('?status=failure&status=success')).total_count, 0);
      assert.equal((await runs('?workflow_id=release.yaml')).total_count, 1);
      assert.equal((await runs(`?head_sha=${mainSha}`)).total_count, 1);
      assert.equal((await runs('?ref=refs/tags/v1.0.0&event=push')).total_count, 1);
      const second = await runs('?run_number=2');
      assert.deepEqual([second.total_count, second.workflow_runs[0]?.index_in_repo], [1, 2]);
      const page = await runs('?page=2&limit=4');
      assert.deepEqual([page.total_count, page.workflow_runs.map((r) => r.index_in_repo)], [6, [2, 1]]);
      const bad = await s.api('GET', '/repos/alice/app/actions/runs?status=waiting&status=bogus', {
        token: alice.token,
      });
      assert.deepEqual([bad.status, (bad.json as { message: string }).message], [400, 'unknown status: bogus']);
      const viaClient = await listActionRuns({
        client: alice.client,
        path: { owner: 'alice', repo: 'app' },
        query: { event: ['push'], limit: 2, page: 1 },
      });
      assert.equal(viaClient.status, 200);
      assert.equal(viaClient.data?.workflow_runs?.length, 2);
    });

    test('one run: 404 for an unknown id and for a run of another repository', async () => {
      let res = await s.api('GET', '/repos/alice/app/actions/runs/99999', { token: alice.token });
      assert.deepEqual(
        [res.status, (res.json as { message: string }).message],
        [404, 'run with id 99999: resource does not exist'],
      );
      assert.equal(
        (await createCurrentUserRepo({ client: alice.client, body: { name: 'other', auto_init: true } })).status,
        201,
      );
      const [run] = (await runs()).workflow_runs;
      res = await s.api('GET', `/repos/alice/other/actions/runs/${run?.id}`, { token: alice.token });
      assert.deepEqual([res.status, (res.json as { message: string }).message], [404, 'resource does not exist']);
      res = await s.api('GET', '/repos/alice/app/actions/runs/abc', { token: alice.token });
      assert.equal(res.status, 404);
    });

    test('tasks list: empty until runners take jobs; 400 for an unknown status', async () => {
      const res = await listActionTasks({ client: alice.client, path: { owner: 'alice', repo: 'app' } });
      assert.equal(res.status, 200);
      assert.deepEqual(res.data, { workflow_runs: [], total_count: 0 });
      const bad = await s.api('GET', '/repos/alice/app/actions/tasks?status=', { token: alice.token });
      assert.deepEqual([bad.status, (bad.json as { message: string }).message], [400, 'unknown status: ']);
    });

    test('an invalid workflow pushed creates a failed run that says why', async () => {
      await work.commit(
        {
          '.forgejo/workflows/broken.yml':
            'on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: echo\n  b:\n    needs: missing\n    runs-on: x\n    steps:\n      - run: echo\n',
        },
        'Broken workflow',
      );
      assert.equal((await work.push('main')).code, 0);
      const [run] = (await runs('?workflow_id=broken.yml')).workflow_runs;
      assert.ok(run);
      assert.equal(run.status, 'failure');
      assert.match(run.pre_execution_error ?? '', /broken\.yml.*missing/);
      const jobs = await s.server.deps.database.db
        .selectFrom('action_run_job')
        .select('id')
        .where('run_id', '=', run.id)
        .execute();
      assert.equal(jobs.length, 0);
    });

    test('concurrent dispatches get unique, gap-free run numbers', async () => {
      const before = (await runs()).workflow_runs[0]?.index_in_repo ?? 0;
      const results = await Promise.all(
        Array.from({ length: 25 }, () =>
          s.api('POST', '/repos/alice/app/actions/workflows/ops%2Fdeploy.yml/dispatches', {
            token: alice.token,
            body: { ref: 'main', inputs: { target: 'x' }, return_run_info: true },
          }),
        ),
      );
      assert.deepEqual(
        results.map((r) => r.status),
        Array(25).fill(201),
      );
      const numbers = results.map((r) => (r.json as { run_number: number }).run_number).sort((a, b) => a - b);
      assert.deepEqual(
        numbers,
        Array.from({ length: 25 }, (_, i) => before + 1 + i),
      );
    });

    test('Actions disabled: the runs list is 404', async () => {
      assert.equal(
        (
          await repoEdit({
            client: alice.client,
            path: { owner: 'alice', repo: 'other' },
            body: { has_actions: false },
          })
        ).status,
        200,
      );
      const res = await s.api('GET', '/repos/alice/other/actions/runs', { token: alice.token });
      assert.equal(res.status, 404);
    });

    test('anonymous readers see runs of public repositories only', async () => {
      assert.equal((await s.api('GET', '/repos/alice/app/actions/runs')).status, 200);
      assert.equal(
        (await repoEdit({ client: alice.client, path: { owner: 'alice', repo: 'app' }, body: { private: true } }))
          .status,
        200,
      );
      assert.equal((await s.api('GET', '/repos/alice/app/actions/runs')).status, 404);
      assert.equal(
        (await repoEdit({ client: alice.client, path: { owner: 'alice', repo: 'app' }, body: { private: false } }))
          .status,
        200,
      );
    });
  });
}
