// Runners that poll at once (on PostgreSQL their claims are made together,
// src/services/actions/claim-groups.ts): each gets a task of its own, with its
// own token and its own repository's secrets, variables and needs; and a
// runner that hangs up while the others claim loses no job.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createCurrentUserRepo, dispatchWorkflow } from '@llamaduck/forgejo-ts';
import { sql } from 'kysely';
import { findRepository } from '../../src/models/repos.ts';
import { findRunnerById } from '../../src/models/runners.ts';
import type { Runner } from '../../src/models/runners.ts';
import type { Repository } from '../../src/models/repos.ts';
import { ActionStatus } from '../../src/modules/actions-status.ts';
import { repoScope, userScope } from '../../src/modules/scope.ts';
import type { TaskPayload } from '../../src/services/actions/task-payload.ts';
import { decodeTask, registerRunner } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

const LEGS = 4;

/** A build job, then LEGS matrix legs that need it, each on its own label. */
const GROUPED = `on: workflow_dispatch
jobs:
  build:
    runs-on: group-build
    steps:
      - run: echo build
  legs:
    needs: build
    runs-on: group
    strategy:
      matrix:
        n: [${Array.from({ length: LEGS }, (_, i) => i).join(', ')}]
    steps:
      - run: echo \${{ matrix.n }}
      - run: echo done
`;

const HANG_LEGS = 6;
const HANG = `on: workflow_dispatch
jobs:
  legs:
    runs-on: group-hang
    strategy:
      matrix:
        n: [${Array.from({ length: HANG_LEGS }, (_, i) => i).join(', ')}]
    steps:
      - run: echo \${{ matrix.n }}
`;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

for (const dialect of testDialects()) {
  describe(`runners polling at once [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    const repos: Repository[] = [];
    const works: WorkDir[] = [];
    let userToken: string;

    const db = () => s.server.deps.database.db;
    const services = () => s.server.deps.services;

    /** A runner of the user's scope with the hang tests' label, as the database holds it. */
    const hangRunner = async (): Promise<Runner> => {
      const client = await registerRunner(s.url, userToken, { labels: ['group-hang'] });
      const runner = await findRunnerById(db(), client.credentials?.id ?? 0);
      assert.ok(runner);
      return runner;
    };

    const dispatch = async (repo: string, file: string): Promise<number> => {
      const res = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo, workflowfilename: file },
        body: { ref: 'main', inputs: {}, return_run_info: true },
      });
      assert.equal(res.status, 201, JSON.stringify(res.error));
      return (res.data as { id: number }).id;
    };

    before(async () => {
      s = await startTestServer(dialect, { GANTRY_SECRET_KEY: 'claim-groups-test-key-0123456789abcdef' });
      alice = await s.createUser('alice');
      for (const name of ['app', 'lib']) {
        assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name } })).status, 201);
        const repo = await findRepository(db(), alice.user.id, name);
        assert.ok(repo);
        repos.push(repo);
        const work = await createWorkDir(remoteUrl(s.url, 'alice', name, { user: 'alice', password: alice.token }));
        works.push(work);
        await work.commit({ '.forgejo/workflows/grouped.yml': GROUPED, '.forgejo/workflows/hang.yml': HANG }, 'CI');
        assert.equal((await work.push('main')).code, 0);
        // Each repository's own secret and variable over the owner's.
        await services().secrets.createOrUpdate(repoScope(repo), 'SHARED', `secret-of-${name}`);
        await services().variables.create(repoScope(repo), 'SHARED_VAR', `var-of-${name}`);
      }
      await services().secrets.createOrUpdate(userScope(alice.user), 'SHARED', 'secret-of-owner');
      await services().secrets.createOrUpdate(userScope(alice.user), 'OWNER_ONLY', 'owner-secret');
      await services().variables.create(userScope(alice.user), 'SHARED_VAR', 'var-of-owner');
      await services().variables.create(userScope(alice.user), 'OWNER_VAR', 'owner-var');
      // Runners of alice's: they see the jobs of both repositories.
      userToken = await services().runners.registrationToken({ ownerId: alice.user.id, repoId: 0 });
    });

    after(async () => {
      for (const work of works) await work.remove();
      await s.stop();
    });

    test('runners polling at once each get a task of their own, with their repository secrets and needs', async () => {
      const builder = await registerRunner(s.url, userToken, { labels: ['group-build'] });
      for (const repo of ['app', 'lib']) await dispatch(repo, 'grouped.yml');
      // Each build finishes with an output naming its repository: the legs' needs carry it.
      for (let i = 0; i < 2; i += 1) {
        const res = await builder.runner.fetchTask({ tasksVersion: 0n });
        assert.ok(res.task);
        const build = decodeTask(res.task);
        await builder.runner.updateTask({
          state: {
            id: BigInt(build.id),
            result: 1,
            stoppedAt: { seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 },
          },
          outputs: { built: `built-${String(build.context.repository)}` },
        });
      }
      const runners = await Promise.all(
        Array.from({ length: 2 * LEGS }, () => registerRunner(s.url, userToken, { labels: ['group'] })),
      );
      // Asked in one turn of the event loop: on PostgreSQL one claim for all of them.
      const asking = await Promise.all(runners.map((client) => findRunnerById(db(), client.credentials?.id ?? 0)));
      const answers = await Promise.all(
        asking.map((runner) => {
          assert.ok(runner);
          return services().runnerProtocol.fetchTasks(runner, { tasksVersion: 0, maxWaitMs: 5000 });
        }),
      );
      const tasks = answers.map((answer) => {
        assert.equal(answer.tasks.length, 1, 'every runner got a task');
        return answer.tasks[0] as TaskPayload;
      });
      assert.equal(new Set(tasks.map((task) => task.id)).size, 2 * LEGS, 'no task handed out twice');
      for (const [i, task] of tasks.entries()) {
        const repository = String(task.context.repository);
        const name = repository.slice('alice/'.length);
        assert.ok(['app', 'lib'].includes(name), repository);
        assert.equal(task.secrets.SHARED, `secret-of-${name}`, 'the repository secret wins');
        assert.equal(task.secrets.OWNER_ONLY, 'owner-secret');
        assert.equal(task.secrets.GITHUB_TOKEN, task.context.token);
        assert.deepEqual(task.vars, { OWNER_VAR: 'owner-var', SHARED_VAR: `var-of-${name}` });
        assert.deepEqual(task.needs, { build: { outputs: { built: `built-${repository}` }, result: 1 } });
        // The task is the asking runner's, under the token it was given, with its steps.
        const row = await db()
          .selectFrom('action_task')
          .select(['runner_id', 'token_hash'])
          .where('id', '=', task.id)
          .executeTakeFirstOrThrow();
        assert.equal(row.runner_id, runners[i]?.credentials?.id);
        assert.equal(row.token_hash, sha256(String(task.context.token)));
        const steps = await db()
          .selectFrom('action_task_step')
          .select(['name', 'step_index'])
          .where('task_id', '=', task.id)
          .orderBy('step_index')
          .execute();
        assert.deepEqual(
          steps.map((step) => [step.step_index, step.name]),
          [
            [0, 'echo ${{ matrix.n }}'],
            [1, 'echo done'],
          ],
        );
      }
      // The runner that holds a task can report it.
      await Promise.all(
        tasks.map((task, i) =>
          runners[i]?.runner.updateTask({
            state: {
              id: BigInt(task.id),
              result: 1,
              stoppedAt: { seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 },
            },
          }),
        ),
      );
      const left = await db()
        .selectFrom('action_run_job')
        .select('id')
        .where('repo_id', 'in', [repos[0]?.id ?? 0, repos[1]?.id ?? 0])
        .where('status', '!=', 1)
        .execute();
      assert.deepEqual(left, [], 'every job succeeded');
    });

    test('runners polling at once in a run already running get their steps, secrets and vars; it stays running', async () => {
      const runId = await dispatch('app', 'hang.yml');
      const fetch = async (runner: Runner) => {
        const answer = await services().runnerProtocol.fetchTasks(runner, { tasksVersion: 0, maxWaitMs: 5000 });
        assert.equal(answer.tasks.length, 1, 'every runner got a task');
        return answer.tasks[0] as TaskPayload;
      };
      const runStatus = async () =>
        (await db().selectFrom('action_run').select('status').where('id', '=', runId).executeTakeFirstOrThrow()).status;
      // A claim of its own starts the run: the group then claims from a run that shows running.
      const starter = await hangRunner();
      const first = await fetch(starter);
      assert.equal(await runStatus(), ActionStatus.running);
      const runners = await Promise.all(Array.from({ length: HANG_LEGS - 1 }, hangRunner));
      const tasks = await Promise.all(runners.map(fetch));
      assert.equal(new Set([first, ...tasks].map((task) => task.id)).size, HANG_LEGS, 'no task handed out twice');
      for (const task of tasks) {
        assert.equal(task.secrets.SHARED, 'secret-of-app', 'the repository secret wins');
        assert.equal(task.secrets.OWNER_ONLY, 'owner-secret');
        assert.deepEqual(task.vars, { OWNER_VAR: 'owner-var', SHARED_VAR: 'var-of-app' });
        const steps = await db().selectFrom('action_task_step').select('name').where('task_id', '=', task.id).execute();
        assert.deepEqual(
          steps.map((step) => step.name),
          ['echo ${{ matrix.n }}'],
        );
      }
      assert.equal(await runStatus(), ActionStatus.running, 'the run still shows running');
      for (const [i, task] of [first, ...tasks].entries())
        await services().taskReports.updateTask(
          i === 0 ? starter : (runners[i - 1] as Runner),
          { id: task.id, result: 1, stoppedAt: Math.floor(Date.now() / 1000), steps: [] },
          {},
        );
      assert.equal(await runStatus(), ActionStatus.success, 'the run succeeded');
    });

    if (dialect === 'postgres')
      test('a group waiting for its run behind a report that waits for its jobs answers without a deadlock', async () => {
        const runId = await dispatch('app', 'hang.yml');
        const fetch = (runner: Runner) =>
          services().runnerProtocol.fetchTasks(runner, { tasksVersion: 0, maxWaitMs: 5000 });
        const starter = await hangRunner();
        assert.equal((await fetch(starter)).tasks.length, 1, 'a claim of its own starts the run');
        const runners = await Promise.all(Array.from({ length: HANG_LEGS - 1 }, hangRunner));
        // As a final report does: the run's row first, then its jobs' rows, which the group's claim
        // holds while it waits for the run (a cycle PostgreSQL would break after a second).
        let answers: Promise<Awaited<ReturnType<typeof fetch>>[]> | undefined;
        const started = Date.now();
        await db()
          .transaction()
          .execute(async (tx) => {
            await tx.selectFrom('action_run').select('id').where('id', '=', runId).forUpdate().execute();
            answers = Promise.all(runners.map(fetch));
            for (let i = 0; i < 500; i += 1) {
              const waiting = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
                where wait_event_type = 'Lock' and pid <> pg_backend_pid()`.execute(tx);
              if ((waiting.rows[0]?.n ?? 0) > 0) break;
              await new Promise((resolve) => setTimeout(resolve, 10));
            }
            await tx.selectFrom('action_run_job').select('id').where('run_id', '=', runId).forUpdate().execute();
          });
        const tasks = (await (answers as Promise<Awaited<ReturnType<typeof fetch>>[]>)).flatMap((a) => a.tasks);
        const elapsed = Date.now() - started;
        assert.equal(tasks.length, HANG_LEGS - 1, 'every runner of the group got a task');
        assert.ok(elapsed < 900, `answered in ${elapsed} ms, not after PostgreSQL's deadlock timeout`);
        const all = await db()
          .selectFrom('action_task')
          .select(['id', 'runner_id'])
          .where('job_id', 'in', db().selectFrom('action_run_job').select('id').where('run_id', '=', runId))
          .execute();
        for (const task of all)
          await services().taskReports.updateTask(
            [starter, ...runners].find((r) => r.id === task.runner_id) as Runner,
            { id: task.id, result: 1, stoppedAt: Math.floor(Date.now() / 1000), steps: [] },
            {},
          );
      });

    test('a runner that hangs up while the others claim loses no job', async () => {
      // Hung up at points from before its claim starts to after its claim committed: at the
      // service, whose caller would write the answer (a hang-up the server only hears once the
      // answer is on its way is the zombie sweep's, as for Forgejo).
      const hangUps: ((abort: () => void) => void)[] = [
        (abort) => abort(),
        (abort) => queueMicrotask(abort),
        (abort) => setImmediate(abort),
        ...[0, 1, 3, 8, 20].map((ms) => (abort: () => void) => void setTimeout(abort, ms)),
      ];
      for (const [round, hangUp] of hangUps.entries()) {
        const runId = await dispatch('app', 'hang.yml');
        const runners = await Promise.all(Array.from({ length: HANG_LEGS }, hangRunner));
        const received = new Map<number, Runner>();
        const fetch = async (runner: Runner, signal?: AbortSignal) => {
          const result = await services().runnerProtocol.fetchTasks(runner, {
            tasksVersion: 0,
            maxWaitMs: 1000,
            ...(signal === undefined ? {} : { signal }),
          });
          for (const task of result.tasks) received.set(task.id, runner);
        };
        const gone = new AbortController();
        const first = runners.map((runner, i) => fetch(runner, i === 0 ? gone.signal : undefined));
        hangUp(() => gone.abort());
        await Promise.all(first);
        // The others ask again until every job is taken: the one the hung-up runner lost comes back.
        const deadline = Date.now() + 15_000;
        while (received.size < HANG_LEGS && Date.now() < deadline)
          await Promise.all(runners.slice(1).map((runner) => fetch(runner)));
        const jobs = await db().selectFrom('action_run_job').select('task_id').where('run_id', '=', runId).execute();
        assert.equal(received.size, HANG_LEGS, `every job reached a runner (hang-up ${round})`);
        assert.deepEqual(new Set(jobs.map((job) => job.task_id)), new Set(received.keys()), 'each job holds its task');
        for (const [id, runner] of received)
          await services().taskReports.updateTask(
            runner,
            { id, result: 1, stoppedAt: Math.floor(Date.now() / 1000), steps: [] },
            {},
          );
      }
    });
  });
}
