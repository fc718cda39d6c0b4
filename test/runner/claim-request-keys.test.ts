// Runners that send x-runner-request-key (forgejo-runner releases of 2026
// send a fresh one with every FetchTask) polling at once: on PostgreSQL their
// claims are made together (src/services/actions/claim-groups.ts). Each gets a
// task of its own, recorded under its key; a key retried after its answer got
// lost gets the task claimed under it again, never a second one, whether the
// retry claims alone, among other runners, or at the same moment as the
// first call in another process; a runner deleted meanwhile gets nothing.
// Forgejo: services/actions/task.go, routers/api/actions/runner/runner.go.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createCurrentUserRepo, dispatchWorkflow } from '@llamaduck/forgejo-ts';
import { sql } from 'kysely';
import { findRunnerById } from '../../src/models/runners.ts';
import { ActionStatus } from '../../src/modules/actions-status.ts';
import type { Runner } from '../../src/models/runners.ts';
import type { FetchTasksResult } from '../../src/services/actions/runner-protocol.ts';
import type { GantryChild } from '../support/gantry-child.ts';
import { createRunnerClient, registerRunner } from '../support/runner-client.ts';
import type { RunnerClient } from '../support/runner-client.ts';
import { startSecondProcess } from '../support/second-process.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

const LEGS = 8;
const KEYED = `on: workflow_dispatch
jobs:
  legs:
    runs-on: keyed
    strategy:
      matrix:
        n: [${Array.from({ length: LEGS }, (_, i) => i).join(', ')}]
    steps:
      - run: echo \${{ matrix.n }}
`;
/** Rounds of the two-process race of one key. */
const RACE_ROUNDS = 6;

for (const dialect of testDialects()) {
  describe(`runners polling with request keys [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let work: WorkDir;
    let second: GantryChild | undefined;
    let registrationToken: string;

    const db = () => s.server.deps.database.db;
    const protocol = () => s.server.deps.services.runnerProtocol;

    const dispatch = async (): Promise<number> => {
      const res = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'app', workflowfilename: 'keyed.yml' },
        body: { ref: 'main', inputs: {}, return_run_info: true },
      });
      assert.equal(res.status, 201, JSON.stringify(res.error));
      return (res.data as { id: number }).id;
    };

    const register = async (count: number): Promise<{ client: RunnerClient; runner: Runner }[]> =>
      Promise.all(
        Array.from({ length: count }, async () => {
          const client = await registerRunner(s.url, registrationToken, { labels: ['keyed'] });
          const runner = await findRunnerById(db(), client.credentials?.id ?? 0);
          assert.ok(runner);
          return { client, runner };
        }),
      );

    const fetchWithKey = (runner: Runner, requestKey: string): Promise<FetchTasksResult> =>
      protocol().fetchTasks(runner, { tasksVersion: 0, maxWaitMs: 1000, requestKey });

    /** The tasks recorded under a runner's key. */
    const tasksUnderKey = async (runnerId: number, key: string): Promise<number[]> =>
      (
        await db()
          .selectFrom('action_task')
          .select('id')
          .where('runner_id', '=', runnerId)
          .where('runner_request_key', '=', key)
          .orderBy('id')
          .execute()
      ).map((row) => row.id);

    /** Finishes every task still running, so each test starts with only its own jobs waiting. */
    const finishAll = async () => {
      const running = await db()
        .selectFrom('action_task')
        .select(['id', 'runner_id'])
        .where('status', '=', ActionStatus.running)
        .execute();
      for (const task of running) {
        const runner = await findRunnerById(db(), task.runner_id);
        if (runner === null) continue;
        await s.server.deps.services.taskReports.updateTask(
          runner,
          { id: task.id, result: 1, stoppedAt: Math.floor(Date.now() / 1000), steps: [] },
          {},
        );
      }
    };

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name: 'app' } })).status, 201);
      work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      await work.commit({ '.forgejo/workflows/keyed.yml': KEYED }, 'CI');
      assert.equal((await work.push('main')).code, 0);
      registrationToken = await s.server.deps.services.runners.registrationToken({ ownerId: alice.user.id, repoId: 0 });
      second = await startSecondProcess(s);
    });

    after(async () => {
      await second?.stop();
      await work.remove();
      await s.stop();
    });

    test('runners polling at once with request keys each get a task of their own, recorded under their key', async () => {
      await dispatch();
      const runners = await register(LEGS);
      const keys = runners.map(() => randomUUID());
      const answers = await Promise.all(runners.map(({ runner }, i) => fetchWithKey(runner, keys[i] as string)));
      const ids = answers.map((answer) => {
        assert.equal(answer.tasks.length, 1, 'every runner got a task');
        return answer.tasks[0]?.id ?? 0;
      });
      assert.equal(new Set(ids).size, LEGS, 'no task handed out twice');
      for (const [i, { runner }] of runners.entries())
        assert.deepEqual(await tasksUnderKey(runner.id, keys[i] as string), [ids[i]], 'its task, under its key');
      await finishAll();
    });

    test('a request key retried after its answer got lost gets the same task, alone and among other runners', async () => {
      await dispatch();
      const [first, ...others] = await register(4);
      assert.ok(first);
      const key = randomUUID();
      const claimed = await fetchWithKey(first.runner, key);
      assert.equal(claimed.tasks.length, 1);
      const task = claimed.tasks[0];
      assert.ok(task);
      // The answer never reached the runner: it asks again with the same key, alone.
      const alone = await fetchWithKey(first.runner, key);
      assert.deepEqual(
        alone.tasks.map((t) => t.id),
        [task.id],
        'the same task again',
      );
      assert.equal(alone.tasksVersion, 0, 'answered as a recovery, with tasks version 0');
      assert.notEqual(alone.tasks[0]?.context.token, task.context.token, 'under a new token');
      // And again, together with other runners asking for work.
      const together = await Promise.all([
        fetchWithKey(first.runner, key),
        ...others.map(({ runner }) => fetchWithKey(runner, randomUUID())),
      ]);
      assert.deepEqual(
        together[0]?.tasks.map((t) => t.id),
        [task.id],
        'the same task among the others',
      );
      const othersIds = together.slice(1).map((answer) => {
        assert.equal(answer.tasks.length, 1, 'each other runner got a task');
        return answer.tasks[0]?.id ?? 0;
      });
      assert.equal(new Set([task.id, ...othersIds]).size, others.length + 1, 'no task handed out twice');
      assert.deepEqual(await tasksUnderKey(first.runner.id, key), [task.id], 'one task claimed under the key');
      const tasksOfRunner = await db()
        .selectFrom('action_task')
        .select('id')
        .where('runner_id', '=', first.runner.id)
        .execute();
      assert.equal(tasksOfRunner.length, 1, 'and none besides it for that runner');
      await finishAll();
    });

    test('a runner deleted while it polls with a request key gets no task; the others polling with it do', async () => {
      await dispatch();
      const [deleted, ...others] = await register(4);
      assert.ok(deleted);
      // Deleted (by another process, say) after this one authenticated it.
      await db().deleteFrom('action_runner').where('id', '=', deleted.runner.id).execute();
      const answers = await Promise.all([
        fetchWithKey(deleted.runner, randomUUID()),
        ...others.map(({ runner }) => fetchWithKey(runner, randomUUID())),
      ]);
      assert.deepEqual(answers[0]?.tasks, [], 'nothing for the deleted runner');
      for (const answer of answers.slice(1)) assert.equal(answer.tasks.length, 1, 'a task for each of the others');
      const ofDeleted = await db()
        .selectFrom('action_task')
        .select('id')
        .where('runner_id', '=', deleted.runner.id)
        .execute();
      assert.deepEqual(ofDeleted, [], 'no task claimed for it');
      await finishAll();
    });

    if (dialect === 'postgres')
      test('a request key claimed by another process while a group waits for its runner gets that task, not two', async () => {
        for (const alone of [false, true]) await keyClaimedMeanwhile(alone);
      });

    /**
     * Another process claims a job under the racer's key while this process's group claims for
     * the racer, among other runners, or `alone` with the queue empty once that claim commits.
     */
    const keyClaimedMeanwhile = async (alone: boolean) => {
      await dispatch();
      const [racer, ...others] = await register(alone ? LEGS : 4);
      assert.ok(racer);
      // Alone: the other runners take every job but one first.
      if (alone)
        for (const { runner } of others) assert.equal((await fetchWithKey(runner, randomUUID())).tasks.length, 1);
      const key = randomUUID();
      const now = Math.floor(Date.now() / 1000);
      let answers: Promise<FetchTasksResult[]> | undefined;
      // Another process's claim under the key, in flight: it holds the runner's row lock while
      // this process's group starts its claim, and commits once that claim waits for the lock.
      const taskId = await db()
        .transaction()
        .execute(async (tx) => {
          await tx.selectFrom('action_runner').select('id').where('id', '=', racer.runner.id).forUpdate().execute();
          const job = await tx
            .selectFrom('action_run_job')
            .selectAll()
            .where('status', '=', ActionStatus.waiting)
            .where('task_id', '=', 0)
            .orderBy('id')
            .limit(1)
            .executeTakeFirstOrThrow();
          const task = await tx
            .insertInto('action_task')
            .values({
              job_id: job.id,
              attempt: 1,
              runner_id: racer.runner.id,
              status: ActionStatus.running,
              started: now,
              repo_id: job.repo_id,
              owner_id: job.owner_id,
              commit_sha: job.commit_sha,
              is_fork_pull_request: job.is_fork_pull_request,
              token_hash: randomUUID(),
              token_last_eight: '',
              runner_request_key: key,
              runner_request_key_expires: now + 3600,
              created: now,
              updated: now,
            })
            .returning('id')
            .executeTakeFirstOrThrow();
          await tx
            .updateTable('action_run_job')
            .set({ task_id: task.id, status: ActionStatus.running, attempt: 1, started: now })
            .where('id', '=', job.id)
            .execute();
          answers = Promise.all([
            fetchWithKey(racer.runner, key),
            ...(alone ? [] : others.map(({ runner }) => fetchWithKey(runner, randomUUID()))),
          ]);
          // Until the group's claim waits for the runner's row.
          for (let i = 0; i < 500; i += 1) {
            const waiting = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
                where wait_event_type = 'Lock' and pid <> pg_backend_pid()`.execute(tx);
            if ((waiting.rows[0]?.n ?? 0) > 0) break;
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
          return task.id;
        });
      const [mine, ...rest] = await (answers as Promise<FetchTasksResult[]>);
      assert.deepEqual(
        mine?.tasks.map((t) => t.id),
        [taskId],
        'answered with the task claimed under its key',
      );
      assert.deepEqual(await tasksUnderKey(racer.runner.id, key), [taskId], 'one task claimed under the key');
      const ofRacer = await db()
        .selectFrom('action_task')
        .select('id')
        .where('runner_id', '=', racer.runner.id)
        .execute();
      assert.equal(ofRacer.length, 1, 'and none besides it for that runner');
      for (const answer of rest) assert.equal(answer.tasks.length, 1, 'each other runner got a task');
      await finishAll();
    };

    test('one request key sent to two processes at once gets one task, answered by both', async () => {
      assert.ok(second);
      for (let round = 0; round < RACE_ROUNDS; round += 1) {
        await dispatch();
        const [racer, ...others] = await register(LEGS - 1);
        assert.ok(racer);
        const key = randomUUID();
        // The same call at both processes (the runner retried at the other one before the first
        // answered), each among other runners asking with keys of their own.
        const remote = createRunnerClient(second.url, { credentials: racer.client.credentials ?? undefined });
        remote.setRequestKey(key);
        const half = Math.floor(others.length / 2);
        const remoteOthers = others.slice(half).map(({ client }) => {
          const other = createRunnerClient(second?.url ?? '', { credentials: client.credentials ?? undefined });
          other.setRequestKey(randomUUID());
          return other;
        });
        const [here, there, ...rest] = await Promise.all([
          fetchWithKey(racer.runner, key).then((answer) => answer.tasks.map((t) => t.id)),
          remote.runner.fetchTask({ tasksVersion: 0n }).then((res) => (res.task ? [Number(res.task.id)] : [])),
          ...others
            .slice(0, half)
            .map(({ runner }) => fetchWithKey(runner, randomUUID()).then((answer) => answer.tasks.map((t) => t.id))),
          ...remoteOthers.map((other) =>
            other.runner.fetchTask({ tasksVersion: 0n }).then((res) => (res.task ? [Number(res.task.id)] : [])),
          ),
        ]);
        const underKey = await tasksUnderKey(racer.runner.id, key);
        assert.equal(underKey.length, 1, `one task claimed under the key (round ${round})`);
        assert.deepEqual(here, underKey, `the first process answered it (round ${round})`);
        assert.deepEqual(there, underKey, `and so did the second (round ${round})`);
        const handedOut = [underKey[0], ...rest.flat()];
        assert.equal(new Set(handedOut).size, handedOut.length, `no task handed out twice (round ${round})`);
        const jobs = await db()
          .selectFrom('action_run_job')
          .select('task_id')
          .where('task_id', 'in', handedOut as number[])
          .execute();
        assert.equal(jobs.length, handedOut.length, 'each task holds its job');
        await finishAll();
      }
    });
  });
}
