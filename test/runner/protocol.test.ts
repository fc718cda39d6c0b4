// The runner protocol over real HTTP with a Connect client built from the same
// generated code (Forgejo: routers/api/actions/runner/runner.go): Ping, Register and its errors,
// authentication, Declare, FetchTask's version check and bounded long poll,
// the task payload, atomic claims under concurrency (on PostgreSQL also across
// two Gantry servers sharing the database), FetchSingleTask, request keys,
// ephemeral runners, needs, codecs and compression.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { createCurrentUserRepo, dispatchWorkflow } from '@llamaduck/forgejo-ts';
import { loadConfig } from '../../src/config.ts';
import { startServer } from '../../src/main.ts';
import type { RunningServer } from '../../src/main.ts';
import { findRepository } from '../../src/models/repos.ts';
import type { Repository } from '../../src/models/repos.ts';
import { repoScope, userScope } from '../../src/modules/scope.ts';
import { freePort } from '../support/free-port.ts';
import { createRunnerClient, decodeTask, registerRunner } from '../support/runner-client.ts';
import type { RunnerClient } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';
import { expireRequestKey } from '../support/white-box.ts';

const SECRET_KEY = 'runner-protocol-test-key-0123456789abcdef';

const BUILD = `name: Build
on: workflow_dispatch
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - name: Checkout
        uses: actions/checkout@v4
      - run: echo "\${{ secrets.SHARED }}"
      - uses: actions/setup-node@v4
      - id: last
        run: echo last
  test:
    needs: build
    runs-on: ubuntu-latest
    steps:
      - run: echo test
`;

function singleJob(label: string): string {
  return `on: workflow_dispatch
jobs:
  only:
    runs-on: ${label}
    steps:
      - run: echo ${label}
`;
}

function twoJobs(label: string): string {
  return `on: workflow_dispatch
jobs:
  first:
    runs-on: ${label}
    steps:
      - run: echo one
  second:
    runs-on: ${label}
    steps:
      - run: echo two
`;
}

/** One job with `legs` matrix legs: that many waiting jobs in one run. */
/** A workflow of `jobs` × `legs` matrix jobs (a matrix has at most 256 legs). */
function matrix(label: string, legs: number, jobs = 1): string {
  const values = Array.from({ length: legs }, (_, i) => i).join(', ');
  const job = (name: string) => `  ${name}:
    runs-on: ${label}
    strategy:
      matrix:
        n: [${values}]
    steps:
      - run: echo \${{ matrix.n }}
`;
  return `on: workflow_dispatch
jobs:
${Array.from({ length: jobs }, (_, i) => job(`leg${i}`)).join('')}`;
}

async function expectConnectError(call: Promise<unknown>, code: Code, message: string): Promise<void> {
  await assert.rejects(call, (error: unknown) => {
    assert.ok(error instanceof ConnectError, String(error));
    assert.equal(error.code, code, error.message);
    assert.equal(error.rawMessage, message);
    return true;
  });
}

/** Polls like a runner until `done()` or the deadline; returns the task ids it got. */
/**
 * Polls like act_runner: a 5 s call deadline, and a call that runs out of
 * time counts as "no task" (on a loaded machine a claim can be slow).
 */
async function pollUntil(
  client: RunnerClient,
  done: () => boolean,
  deadlineMs: number,
  onTask: (taskId: number) => void,
): Promise<void> {
  let version = 0n;
  while (!done() && Date.now() < deadlineMs) {
    let res;
    try {
      res = await client.runner.fetchTask({ tasksVersion: version }, { timeoutMs: 5000 });
    } catch (error) {
      if (error instanceof ConnectError && error.code === Code.DeadlineExceeded) continue;
      throw error;
    }
    if (res.task !== undefined) {
      onTask(Number(res.task.id));
      version = 0n;
    } else {
      version = res.tasksVersion;
    }
  }
}

for (const dialect of testDialects()) {
  describe(`runner protocol [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let app: Repository;
    let other: Repository;
    let work: WorkDir;
    let repoToken: string;

    const db = () => s.server.deps.database.db;
    const services = () => s.server.deps.services;

    const dispatch = async (file: string): Promise<number> => {
      const res = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'app', workflowfilename: file },
        body: { ref: 'main', inputs: {}, return_run_info: true },
      });
      assert.equal(res.status, 201, JSON.stringify(res.error));
      return (res.data as { id: number }).id;
    };

    /** The run counts still match the runs: concurrent claims of one run recompute its status one at a time. */
    const assertRunCountsMatch = async (repoId: number): Promise<void> => {
      const counted = await db()
        .selectFrom('action_run_count')
        .select(['status', 'count'])
        .where('repo_id', '=', repoId)
        .execute();
      const actual = await db().selectFrom('action_run').select('status').where('repo_id', '=', repoId).execute();
      for (const status of new Set([...actual.map((r) => r.status), ...counted.map((c) => c.status)])) {
        const sum = counted.filter((c) => c.status === status).reduce((n, c) => n + Number(c.count), 0);
        assert.equal(sum, actual.filter((r) => r.status === status).length, `runs counted with status ${status}`);
      }
    };

    const jobsOf = (runId: number) =>
      db().selectFrom('action_run_job').selectAll().where('run_id', '=', runId).orderBy('id').execute();

    before(async () => {
      // The claim races queue 500 jobs in one run: above the default cap of 256 jobs per run.
      s = await startTestServer(dialect, { GANTRY_SECRET_KEY: SECRET_KEY, GANTRY_ACTIONS_MAX_JOBS_PER_RUN: '1000' });
      alice = await s.createUser('alice');
      for (const name of ['app', 'other'])
        assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name } })).status, 201);
      const found = await Promise.all(['app', 'other'].map((name) => findRepository(db(), alice.user.id, name)));
      assert.ok(found[0] && found[1]);
      [app, other] = [found[0], found[1]];
      work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      await work.commit(
        {
          '.forgejo/workflows/build.yml': BUILD,
          '.forgejo/workflows/gpu.yml': singleJob('gpu'),
          '.forgejo/workflows/race.yml': singleJob('race'),
          // A task whose answer is over 16 KiB, as JSON and as protobuf.
          '.forgejo/workflows/zip.yml': `${singleJob('zip')}      - run: echo ${'z'.repeat(20_000)}\n`,
          '.forgejo/workflows/key.yml': singleJob('keyed'),
          '.forgejo/workflows/eph.yml': twoJobs('eph'),
          '.forgejo/workflows/single.yml': twoJobs('single'),
          '.forgejo/workflows/fresh.yml': twoJobs('fresh'),
          '.forgejo/workflows/swarm.yml': matrix('swarm', 250, 2),
          '.forgejo/workflows/swarm500.yml': matrix('swarm500', 100),
        },
        'Add workflows',
      );
      assert.equal((await work.push('main')).code, 0);
      repoToken = await services().runners.registrationToken({ ownerId: 0, repoId: app.id });
      // Secrets and variables at both levels: the repository's win.
      await services().secrets.createOrUpdate(userScope(alice.user), 'OWNER_ONLY', 'owner-secret');
      await services().secrets.createOrUpdate(userScope(alice.user), 'SHARED', 'from-owner');
      await services().secrets.createOrUpdate(repoScope(app), 'SHARED', 'from-repo');
      await services().secrets.createOrUpdate(repoScope(app), 'REPO_ONLY', 'repo-secret');
      await services().variables.create(userScope(alice.user), 'OWNER_VAR', 'o');
      await services().variables.create(userScope(alice.user), 'SHARED_VAR', 'owner');
      await services().variables.create(repoScope(app), 'SHARED_VAR', 'repo');
    });

    after(async () => {
      await work.remove();
      await s.stop();
    });

    test('Ping answers "Hello, <data>!" without authentication, in binary and JSON', async () => {
      assert.equal((await createRunnerClient(s.url).ping.ping({ data: 'gantry' })).data, 'Hello, gantry!');
      assert.equal((await createRunnerClient(s.url, { json: true }).ping.ping({ data: 'json' })).data, 'Hello, json!');
    });

    test('Register: the runner gets an id, a UUID and a 40-hex token; its scope comes from the token', async () => {
      const client = createRunnerClient(s.url);
      const res = await client.runner.register({
        name: 'reg-1',
        token: repoToken,
        version: 'v1.2.3',
        labels: ['a', 'b'],
        ephemeral: true,
      });
      const runner = res.runner;
      assert.ok(runner);
      assert.match(runner.uuid, /^[0-9a-f-]{36}$/);
      assert.match(runner.token, /^[0-9a-f]{40}$/);
      assert.equal(runner.name, 'reg-1');
      assert.equal(runner.version, 'v1.2.3');
      assert.deepEqual(runner.labels, ['a', 'b']);
      assert.equal(runner.ephemeral, true);
      const row = await db()
        .selectFrom('action_runner')
        .selectAll()
        .where('uuid', '=', runner.uuid)
        .executeTakeFirstOrThrow();
      assert.equal(row.repo_id, app.id);
      assert.equal(row.owner_id, 0);
      assert.equal(row.token_hash, createHash('sha256').update(runner.token).digest('hex'));
    });

    test('Register: old runners that send agent_labels only still get their labels', async () => {
      const res = await createRunnerClient(s.url).runner.register({
        name: 'legacy',
        token: repoToken,
        agentLabels: ['old'],
      });
      assert.deepEqual(res.runner?.labels, ['old']);
    });

    test('Register errors: missing fields, unknown token, replaced token', async () => {
      const client = createRunnerClient(s.url);
      await expectConnectError(
        client.runner.register({ name: '', token: repoToken }),
        Code.InvalidArgument,
        'missing runner token, name',
      );
      await expectConnectError(
        client.runner.register({ name: 'x', token: '' }),
        Code.InvalidArgument,
        'missing runner token, name',
      );
      await expectConnectError(
        client.runner.register({ name: 'x', token: 'no-such-token' }),
        Code.InvalidArgument,
        'runner registration token not found',
      );
      const scope = { ownerId: alice.user.id, repoId: 0 };
      const first = await services().runners.registrationToken(scope);
      assert.equal(
        (await s.api('DELETE', '/user/actions/runners/registration-token', { token: alice.token })).status,
        204,
        'rotated',
      );
      const second = await services().runners.registrationToken(scope);
      assert.notEqual(first, second);
      await expectConnectError(
        client.runner.register({ name: 'x', token: first }),
        Code.InvalidArgument,
        'runner registration token has been invalidated, please use the latest one',
      );
      assert.ok((await client.runner.register({ name: 'owner-runner', token: second })).runner);
    });

    test('every RPC but Ping and Register needs the runner headers', async () => {
      const anonymous = createRunnerClient(s.url);
      await expectConnectError(
        anonymous.runner.declare({ version: 'v1', labels: [] }),
        Code.Unauthenticated,
        'unregistered runner',
      );
      await expectConnectError(
        anonymous.runner.fetchTask({ tasksVersion: 0n }),
        Code.Unauthenticated,
        'unregistered runner',
      );
      await expectConnectError(anonymous.runner.updateLog({ taskId: 1n }), Code.Unauthenticated, 'unregistered runner');
      const real = await registerRunner(s.url, repoToken);
      const forged = createRunnerClient(s.url, {
        credentials: { id: 0, uuid: real.credentials?.uuid ?? '', token: '0'.repeat(40) },
      });
      await expectConnectError(
        forged.runner.fetchTask({ tasksVersion: 0n }),
        Code.Unauthenticated,
        'unregistered runner',
      );
    });

    test('Declare stores labels and version and answers with the runner; calls mark it online', async () => {
      const client = await registerRunner(s.url, repoToken, { labels: ['x'] });
      const res = await client.runner.declare({ version: 'v9.9.9', labels: ['linux', 'docker'] });
      assert.ok(res.runner);
      assert.equal(res.runner.uuid, client.credentials?.uuid);
      assert.equal(res.runner.version, 'v9.9.9');
      assert.deepEqual(res.runner.labels, ['linux', 'docker']);
      assert.equal(res.runner.token, '', 'the secret is only shown at registration');
      const row = await db()
        .selectFrom('action_runner')
        .selectAll()
        .where('uuid', '=', client.credentials?.uuid ?? '')
        .executeTakeFirstOrThrow();
      assert.deepEqual(JSON.parse(row.agent_labels ?? 'null'), ['linux', 'docker']);
      assert.equal(row.version, 'v9.9.9');
      assert.ok(row.last_online > 0);
      // The JSON codec answers the same.
      const json = createRunnerClient(s.url, { json: true, credentials: client.credentials ?? undefined });
      assert.deepEqual((await json.runner.declare({ version: 'v9.9.9', labels: ['linux'] })).runner?.labels, ['linux']);
    });

    test('FetchTask without work: answers within the long-poll bound with a non-zero version, and holds a runner that is up to date too', async () => {
      const client = await registerRunner(s.url, repoToken, { labels: ['nothing-here'] });
      let started = Date.now();
      const first = await client.runner.fetchTask({ tasksVersion: 0n });
      const waited = Date.now() - started;
      assert.equal(first.task, undefined);
      assert.notEqual(first.tasksVersion, 0n);
      assert.ok(waited < 4500, `answered after ${waited} ms`);
      started = Date.now();
      const second = await client.runner.fetchTask({ tasksVersion: first.tasksVersion });
      const held = Date.now() - started;
      assert.equal(second.task, undefined);
      assert.equal(second.tasksVersion, first.tasksVersion);
      assert.ok(
        held >= 2000 && held < 4500,
        `an up-to-date runner is held for the long poll, then answered (${held} ms)`,
      );
    });

    test('a waiting FetchTask is woken by a new job and gets it', async () => {
      const client = await registerRunner(s.url, repoToken, { labels: ['wake'] });
      const idle = await client.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 1000 });
      await work.commit({ '.forgejo/workflows/wake.yml': singleJob('wake') }, 'wake');
      assert.equal((await work.push('main')).code, 0);
      const started = Date.now();
      const pending = client.runner.fetchTask({ tasksVersion: 0n });
      await new Promise((resolve) => setTimeout(resolve, 300));
      await dispatch('wake.yml');
      const res = await pending;
      assert.ok(res.task, 'the job created during the wait is handed out');
      assert.ok(Date.now() - started < 3500);
      assert.notEqual(res.tasksVersion, idle.tasksVersion);
    });

    test('secrets and variables changed between two claims of one run reach the second task', async () => {
      await dispatch('fresh.yml');
      const client = await registerRunner(s.url, repoToken, { labels: ['fresh'] });
      const first = await client.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(first.task, 'the first job');
      const before = decodeTask(first.task);
      assert.equal(before.secrets.SHARED, 'from-repo');
      assert.equal(before.vars.SHARED_VAR, 'repo');
      await services().secrets.createOrUpdate(repoScope(app), 'SHARED', 'changed-between-claims');
      await services().secrets.createOrUpdate(repoScope(app), 'FRESH_ONLY', 'new-secret');
      await services().variables.update(repoScope(app), 'SHARED_VAR', { value: 'changed-var' });
      await services().variables.create(userScope(alice.user), 'FRESH_VAR', 'new-var');
      try {
        const second = await client.runner.fetchTask({ tasksVersion: 0n });
        assert.ok(second.task, 'the second job of the same run');
        const after = decodeTask(second.task);
        assert.equal(after.context.run_id, before.context.run_id);
        assert.equal(after.secrets.SHARED, 'changed-between-claims');
        assert.equal(after.secrets.FRESH_ONLY, 'new-secret');
        assert.equal(after.secrets.OWNER_ONLY, 'owner-secret');
        assert.equal(after.vars.SHARED_VAR, 'changed-var');
        assert.equal(after.vars.FRESH_VAR, 'new-var');
        assert.equal(after.vars.OWNER_VAR, 'o');
      } finally {
        // The other tests expect the values of `before`.
        await services().secrets.createOrUpdate(repoScope(app), 'SHARED', 'from-repo');
        await services().secrets.delete(repoScope(app), 'FRESH_ONLY');
        await services().variables.update(repoScope(app), 'SHARED_VAR', { value: 'repo' });
        await services().variables.delete(userScope(alice.user), 'FRESH_VAR');
      }
    });

    test('the task: one job, github context, secrets and vars with repository precedence, a fresh token', async () => {
      const runId = await dispatch('build.yml');
      const client = await registerRunner(s.url, repoToken, { labels: ['ubuntu-latest'] });
      const res = await client.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(res.task, 'a task');
      assert.notEqual(res.tasksVersion, 0n);
      const task = decodeTask(res.task);
      assert.deepEqual(Object.keys(task.workflow.jobs), ['build']);
      assert.equal(task.workflow.name, 'Build');
      const token = task.context.token as string;
      assert.match(token, /^[0-9a-f]{40}$/);
      const [build] = await jobsOf(runId);
      assert.ok(build);
      const ctx = task.context;
      assert.equal(ctx.repository, 'alice/app');
      assert.equal(ctx.repository_owner, 'alice');
      assert.equal(ctx.actor, 'alice');
      assert.equal(ctx.event_name, 'workflow_dispatch');
      assert.equal(ctx.ref, 'refs/heads/main');
      assert.equal(ctx.ref_name, 'main');
      assert.equal(ctx.ref_type, 'branch');
      assert.equal(ctx.sha, build.commit_sha);
      assert.equal(ctx.job, 'build');
      assert.equal(ctx.run_id, String(runId));
      assert.equal(typeof ctx.run_number, 'string');
      assert.equal(ctx.run_attempt, '1');
      assert.equal(ctx.workflow, 'build.yml');
      assert.equal(ctx.server_url, s.rootUrl);
      assert.equal(ctx.api_url, `${s.rootUrl}api/v1`);
      assert.equal(ctx.gitea_default_actions_url, 'https://github.com');
      assert.equal(ctx.forgejo_default_actions_url, 'https://github.com');
      assert.equal(ctx.ref_protected, false);
      assert.equal(typeof ctx.event, 'object');
      assert.equal((ctx.event as { ref?: string }).ref, 'refs/heads/main');
      assert.deepEqual(task.secrets, {
        OWNER_ONLY: 'owner-secret',
        SHARED: 'from-repo',
        REPO_ONLY: 'repo-secret',
        GITHUB_TOKEN: token,
        GITEA_TOKEN: token,
        FORGEJO_TOKEN: token,
      });
      assert.deepEqual(task.vars, { OWNER_VAR: 'o', SHARED_VAR: 'repo' });
      assert.deepEqual(task.needs, {});

      const taskRow = await db()
        .selectFrom('action_task')
        .selectAll()
        .where('id', '=', task.id)
        .executeTakeFirstOrThrow();
      assert.equal(taskRow.status, 6);
      assert.equal(taskRow.job_id, build.id);
      assert.equal(taskRow.runner_id, client.credentials?.id);
      assert.equal(taskRow.attempt, 1);
      assert.equal(taskRow.token_hash, createHash('sha256').update(token).digest('hex'));
      assert.equal(taskRow.token_last_eight, token.slice(-8));
      assert.equal(taskRow.repo_id, app.id);
      assert.equal(taskRow.owner_id, alice.user.id);
      assert.equal(build.status, 6);
      assert.equal(build.task_id, task.id);
      assert.equal(build.attempt, 1);
      assert.ok(build.started > 0);
      const steps = await db()
        .selectFrom('action_task_step')
        .selectAll()
        .where('task_id', '=', task.id)
        .orderBy('step_index')
        .execute();
      assert.deepEqual(
        steps.map((step) => [step.step_index, step.name, step.status]),
        [
          [0, 'Checkout', 5],
          [1, 'echo "${{ secrets.SHARED }}"', 5],
          [2, 'actions/setup-node@v4', 5],
          [3, 'echo last', 5],
        ],
      );
      const run = await db().selectFrom('action_run').selectAll().where('id', '=', runId).executeTakeFirstOrThrow();
      assert.equal(run.status, 6, 'the run is running');
      assert.ok(run.started > 0);

      // The dependant waits for the result; the finished job's outputs reach it as needs.
      const done = await client.runner.updateTask({
        state: {
          id: BigInt(task.id),
          result: 1,
          stoppedAt: { seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 },
        },
        outputs: { artifact: 'dist.tgz', empty: '' },
      });
      assert.equal(done.state?.result, 1);
      const next = await client.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(next.task);
      const dependant = decodeTask(next.task);
      assert.deepEqual(Object.keys(dependant.workflow.jobs), ['test']);
      assert.deepEqual(dependant.needs, { build: { outputs: { artifact: 'dist.tgz', empty: '' }, result: 1 } });
      assert.notEqual(dependant.context.token, token, 'every task has its own token');
    });

    test('a job whose labels no runner has stays waiting', async () => {
      const runId = await dispatch('gpu.yml');
      const client = await registerRunner(s.url, repoToken, { labels: ['cpu', 'ubuntu-latest-not'] });
      const res = await client.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 1500 });
      assert.equal(res.task, undefined);
      const [job] = await jobsOf(runId);
      assert.equal(job?.status, 5);
      assert.equal(job?.task_id, 0);
    });

    test("a runner of another repository does not see this repository's jobs", async () => {
      const runId = await dispatch('gpu.yml');
      const otherToken = await services().runners.registrationToken({ ownerId: 0, repoId: other.id });
      const client = await registerRunner(s.url, otherToken, { labels: ['gpu'] });
      assert.equal((await client.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 1200 })).task, undefined);
      assert.equal((await jobsOf(runId))[0]?.task_id, 0);
      // The owner's runners see the repositories of the owner.
      const ownerRunner = await registerRunner(
        s.url,
        await services().runners.registrationToken({ ownerId: alice.user.id, repoId: 0 }),
        { labels: ['gpu'] },
      );
      assert.ok((await ownerRunner.runner.fetchTask({ tasksVersion: 0n })).task);
    });

    test('two runners racing for one job: exactly one gets it', async () => {
      const runId = await dispatch('race.yml');
      const [a, b] = await Promise.all([
        registerRunner(s.url, repoToken, { labels: ['race'] }),
        registerRunner(s.url, repoToken, { labels: ['race'] }),
      ]);
      const results = await Promise.all(
        [a, b].map((c) => c.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 1500 })),
      );
      assert.equal(results.filter((r) => r.task !== undefined).length, 1);
      const tasks = await db()
        .selectFrom('action_task')
        .selectAll()
        .where('job_id', '=', (await jobsOf(runId))[0]?.id ?? 0)
        .execute();
      assert.equal(tasks.length, 1);
    });

    test('an ephemeral runner gets one task, ever', async () => {
      await dispatch('eph.yml');
      const client = await registerRunner(s.url, repoToken, { labels: ['eph'], ephemeral: true });
      const first = await client.runner.fetchTask({ tasksVersion: 0n, taskCapacity: 2n });
      assert.ok(first.task);
      assert.equal(first.additionalTasks.length, 0);
      assert.equal((await client.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 1000 })).task, undefined);
    });

    test('task_capacity hands out several tasks; FetchSingleTask takes the job named by its handle', async () => {
      const runId = await dispatch('single.yml');
      const jobs = await jobsOf(runId);
      const second = jobs[1];
      assert.ok(second);
      const client = await registerRunner(s.url, repoToken, { labels: ['single'] });
      const res = await client.runner.fetchSingleTask({ tasksVersion: 0n, handle: second.handle });
      assert.ok(res.task);
      assert.deepEqual(Object.keys(decodeTask(res.task).workflow.jobs), ['second']);
      assert.equal((await jobsOf(runId))[0]?.status, 5, 'the older job still waits');
      const capacity = await registerRunner(s.url, repoToken, { labels: ['swarm-cap'] });
      await work.commit({ '.forgejo/workflows/cap.yml': matrix('swarm-cap', 3) }, 'cap');
      assert.equal((await work.push('main')).code, 0);
      await dispatch('cap.yml');
      const batch = await capacity.runner.fetchTask({ tasksVersion: 0n, taskCapacity: 2n });
      assert.ok(batch.task);
      assert.equal(batch.additionalTasks.length, 1);
    });

    test('a FetchTask retried with the same request key gets the same task again, with a new token', async () => {
      await dispatch('key.yml');
      const client = await registerRunner(s.url, repoToken, { labels: ['keyed'] });
      client.setRequestKey('6f1c1d3e-8a0b-4d3c-9a62-6e9b7f0c2b11');
      const first = await client.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(first.task);
      const again = await client.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(again.task);
      assert.equal(again.task.id, first.task.id);
      const token = decodeTask(again.task).context.token as string;
      assert.notEqual(token, decodeTask(first.task).context.token);
      const row = await db()
        .selectFrom('action_task')
        .select(['token_hash', 'runner_request_key', 'runner_request_key_expires'])
        .where('id', '=', Number(first.task.id))
        .executeTakeFirstOrThrow();
      assert.equal(row.token_hash, createHash('sha256').update(token).digest('hex'));
      // Kept with the claim, for 10 minutes (REQUEST_KEY_TTL_SEC): then the retry finds nothing.
      assert.equal(row.runner_request_key, '6f1c1d3e-8a0b-4d3c-9a62-6e9b7f0c2b11');
      const now = Math.floor(Date.now() / 1000);
      assert.ok(
        row.runner_request_key_expires > now + 590 && row.runner_request_key_expires <= now + 600,
        String(row.runner_request_key_expires),
      );
      await expireRequestKey(db(), Number(first.task.id), now - 1);
      assert.equal((await client.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 1200 })).task, undefined);
    });

    test('answers of 16 KiB and more are gzip-compressed for clients that accept it', async () => {
      await dispatch('zip.yml');
      const client = await registerRunner(s.url, repoToken, { labels: ['zip'] });
      const res = await fetch(`${s.url}/api/actions/runner.v1.RunnerService/FetchTask`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'accept-encoding': 'gzip',
          'x-runner-uuid': client.credentials?.uuid ?? '',
          'x-runner-token': client.credentials?.token ?? '',
        },
        body: JSON.stringify({ tasksVersion: '0' }),
      });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-encoding'), 'gzip');
      const body = (await res.json()) as {
        task?: { id: string; context: { repository: string }; workflowPayload: string };
        tasksVersion: string;
      };
      assert.equal(body.task?.context.repository, 'alice/app');
      assert.match(Buffer.from(body.task?.workflowPayload ?? '', 'base64').toString('utf8'), /echo z{20000}/);
      const small = await fetch(`${s.url}/api/actions/ping.v1.PingService/Ping`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip' },
        body: JSON.stringify({ data: 'x' }),
      });
      assert.equal(small.headers.get('content-encoding'), null, 'small answers go uncompressed');
      assert.deepEqual(await small.json(), { data: 'Hello, x!' });
    });

    test('20 runners polling concurrently while 500 jobs are queued: every job is claimed exactly once', async () => {
      const runners = await Promise.all(
        Array.from({ length: 20 }, () => registerRunner(s.url, repoToken, { labels: ['swarm'] })),
      );
      const runId = await dispatch('swarm.yml');
      assert.equal((await jobsOf(runId)).length, 500);
      const claimed: number[] = [];
      const deadline = Date.now() + 60_000;
      await Promise.all(
        runners.map((client) =>
          pollUntil(
            client,
            () => claimed.length >= 500,
            deadline,
            (id) => claimed.push(id),
          ),
        ),
      );
      assert.equal(claimed.length, 500);
      assert.equal(new Set(claimed).size, 500);
      const jobs = await jobsOf(runId);
      // A claim given back because its runner gave up is claimed again as a later attempt.
      assert.ok(jobs.every((job) => job.status === 6 && job.attempt >= 1));
      assert.equal(new Set(jobs.map((job) => job.task_id)).size, 500);
      assert.deepEqual(new Set(jobs.map((job) => job.task_id)), new Set(claimed));
      const tasks = await db()
        .selectFrom('action_task')
        .select('job_id')
        .where(
          'job_id',
          'in',
          jobs.map((job) => job.id),
        )
        .execute();
      assert.equal(tasks.length, 500, 'no orphan task rows');
      await assertRunCountsMatch(app.id);
    });

    if (dialect === 'postgres') {
      test('two Gantry servers on one PostgreSQL database, 40 runners, 500 jobs: every job claimed exactly once', async () => {
        const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-second-'));
        const port = await freePort();
        let second: RunningServer | null = null;
        try {
          second = await startServer(
            loadConfig({
              GANTRY_DATA_DIR: dataDir,
              GANTRY_HTTP_ADDR: '127.0.0.1',
              GANTRY_HTTP_PORT: String(port),
              GANTRY_ROOT_URL: `http://127.0.0.1:${port}/`,
              GANTRY_LOG_LEVEL: 'silent',
              GANTRY_DATABASE_URL: s.server.deps.config.databaseUrl ?? '',
              GANTRY_SECRET_KEY: SECRET_KEY,
            }),
          );
          const secondUrl = second.url;
          const clients = await Promise.all(
            Array.from({ length: 40 }, async (_, i) => {
              const registered = await registerRunner(s.url, repoToken, { labels: ['swarm500'] });
              // Half of the runners talk to the other server, with the same credentials.
              return i % 2 === 0
                ? registered
                : createRunnerClient(secondUrl, { credentials: registered.credentials ?? undefined });
            }),
          );
          const runIds: number[] = [];
          for (let i = 0; i < 5; i += 1) runIds.push(await dispatch('swarm500.yml'));
          const claimed: number[] = [];
          const deadline = Date.now() + 120_000;
          await Promise.all(
            clients.map((client) =>
              pollUntil(
                client,
                () => claimed.length >= 500,
                deadline,
                (id) => claimed.push(id),
              ),
            ),
          );
          assert.equal(claimed.length, 500);
          assert.equal(new Set(claimed).size, 500);
          const jobs = await db().selectFrom('action_run_job').selectAll().where('run_id', 'in', runIds).execute();
          assert.equal(jobs.length, 500);
          assert.ok(jobs.every((job) => job.status === 6 && job.attempt >= 1));
          assert.deepEqual(new Set(jobs.map((job) => job.task_id)), new Set(claimed));
          const tasks = await db()
            .selectFrom('action_task')
            .select('id')
            .where(
              'job_id',
              'in',
              jobs.map((job) => job.id),
            )
            .execute();
          assert.equal(tasks.length, 500);
          const runs = await db().selectFrom('action_run').select('status').where('id', 'in', runIds).execute();
          assert.ok(runs.every((run) => run.status === 6));
          await assertRunCountsMatch(app.id);
        } finally {
          await second?.stop();
          await fs.rm(dataDir, { recursive: true, force: true });
        }
      });
    }
  });
}
