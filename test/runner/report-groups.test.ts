// Final reports that arrive at once (on PostgreSQL those that would each be
// one statement finish in one statement, src/services/actions/report-groups.ts):
// the legs of one run and of several runs finishing in one turn of the event
// loop leave every run with its final status, a webhook's events and a push
// run's commit statuses exactly once each; a cancel racing the finish leaves
// every run as its jobs are, and every runner told what its task became.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { findRepository } from '../../src/models/repos.ts';
import { findRunnerById } from '../../src/models/runners.ts';
import type { Runner } from '../../src/models/runners.ts';
import type { Repository } from '../../src/models/repos.ts';
import { ActionStatus } from '../../src/modules/actions-status.ts';
import type { TaskPayload } from '../../src/services/actions/task-payload.ts';
import { registerRunner } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { startWebhookReceiver } from '../support/webhook-receiver.ts';
import type { WebhookReceiver } from '../support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

const LEGS = 6;
const PUSH_LEGS = 3;

const matrix = (on: string, legs: number) => `on: ${on}
jobs:
  leg:
    runs-on: report-group
    strategy:
      matrix:
        n: [${Array.from({ length: legs }, (_, i) => i).join(', ')}]
    steps:
      - run: echo \${{ matrix.n }}
      - run: echo done
`;

for (const dialect of testDialects()) {
  describe(`final reports arriving at once [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let receiver: WebhookReceiver;
    const works: WorkDir[] = [];
    const repos = new Map<string, Repository>();
    let runners: Runner[] = [];

    const db = () => s.server.deps.database.db;
    const services = () => s.server.deps.services;

    const dispatch = async (repo: string): Promise<number> => {
      const res = await s.api('POST', `/repos/alice/${repo}/actions/workflows/wide.yml/dispatches`, {
        token: alice.token,
        body: { ref: 'main', return_run_info: true },
      });
      assert.equal(res.status, 201, res.text);
      return (res.json as { id: number }).id;
    };

    /** Every runner asks once, in one turn: the tasks handed out, each with the runner that holds it. */
    const claimAll = async (count = runners.length): Promise<Array<{ runner: Runner; task: TaskPayload }>> => {
      const asking = runners.slice(0, count);
      const answers = await Promise.all(
        asking.map((runner) => services().runnerProtocol.fetchTasks(runner, { tasksVersion: 0, maxWaitMs: 500 })),
      );
      return answers.flatMap((answer, i) => answer.tasks.map((task) => ({ runner: asking[i] as Runner, task })));
    };

    const jobsOf = (runId: number) =>
      db()
        .selectFrom('action_run_job')
        .select(['id', 'status', 'task_id', 'stopped'])
        .where('run_id', '=', runId)
        .execute();

    const runOf = (runId: number) =>
      db()
        .selectFrom('action_run')
        .select(['status', 'stopped', 'repo_id'])
        .where('id', '=', runId)
        .executeTakeFirstOrThrow();

    const taskStatus = async (taskId: number) =>
      (await db().selectFrom('action_task').select('status').where('id', '=', taskId).executeTakeFirstOrThrow()).status;

    before(async () => {
      s = await startTestServer(dialect, { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' });
      alice = await s.createUser('alice');
      receiver = await startWebhookReceiver();
      for (const name of ['app', 'hooked', 'pushed']) {
        assert.equal((await s.api('POST', '/user/repos', { token: alice.token, body: { name } })).status, 201);
        const repo = await findRepository(db(), alice.user.id, name);
        assert.ok(repo);
        repos.set(name, repo);
      }
      const hook = await s.api('POST', '/repos/alice/hooked/hooks', {
        token: alice.token,
        body: {
          type: 'forgejo',
          config: { url: `${receiver.url}/hook`, content_type: 'json' },
          events: ['workflow_run', 'workflow_job'],
          active: true,
        },
      });
      assert.equal(hook.status, 201, hook.text);
      for (const [name, files] of [
        ['app', { '.forgejo/workflows/wide.yml': matrix('workflow_dispatch', LEGS) }],
        ['hooked', { '.forgejo/workflows/wide.yml': matrix('workflow_dispatch', LEGS) }],
      ] as const) {
        const work = await createWorkDir(remoteUrl(s.url, 'alice', name, { user: 'alice', password: alice.token }));
        works.push(work);
        await work.commit(files, 'CI');
        assert.equal((await work.push('main')).code, 0);
      }
      const token = await services().runners.registrationToken({ ownerId: alice.user.id, repoId: 0 });
      runners = await Promise.all(
        Array.from({ length: 3 * LEGS + PUSH_LEGS }, async () => {
          const client = await registerRunner(s.url, token, { labels: ['report-group'] });
          const runner = await findRunnerById(db(), client.credentials?.id ?? 0);
          assert.ok(runner);
          return runner;
        }),
      );
    });

    after(async () => {
      for (const work of works) await work.remove();
      await s?.stop();
      await receiver?.close();
    });

    test('the legs of one run and of several runs finishing in one turn: every run ends once, its events and commit statuses once', async () => {
      const plain = [await dispatch('app'), await dispatch('app')];
      const hooked = await dispatch('hooked');
      // A push run: its jobs get commit statuses.
      const work = await createWorkDir(remoteUrl(s.url, 'alice', 'pushed', { user: 'alice', password: alice.token }));
      works.push(work);
      const sha = await work.commit({ '.forgejo/workflows/push.yml': matrix('push', PUSH_LEGS) }, 'CI');
      assert.equal((await work.push('main')).code, 0);
      const pushRun = await db()
        .selectFrom('action_run')
        .select('id')
        .where('repo_id', '=', repos.get('pushed')?.id ?? 0)
        .executeTakeFirstOrThrow();
      const runIds = [...plain, hooked, pushRun.id];

      let held: Array<{ runner: Runner; task: TaskPayload }> = [];
      for (let round = 0; round < 5 && held.length < 3 * LEGS + PUSH_LEGS; round += 1)
        held = [...held, ...(await claimAll())];
      assert.equal(held.length, 3 * LEGS + PUSH_LEGS, 'every job reached a runner');

      // The runs' jobs fail where the index says, else succeed; every report sent in one turn.
      const resultOf = (i: number) => (i % 7 === 3 ? ActionStatus.failure : ActionStatus.success);
      const answers = await Promise.all(
        held.map(({ runner, task }, i) =>
          services().taskReports.updateTask(
            runner,
            {
              id: task.id,
              result: resultOf(i),
              stoppedAt: Math.floor(Date.now() / 1000),
              steps: [{ id: 0, result: ActionStatus.success, logIndex: 0, logLength: 1 }],
            },
            {},
          ),
        ),
      );
      assert.deepEqual(
        answers.map((answer) => answer.result),
        held.map((_, i) => resultOf(i)),
        'each runner is told the result it reported',
      );
      for (const [i, { task }] of held.entries()) assert.equal(await taskStatus(task.id), resultOf(i));
      for (const runId of runIds) {
        const jobs = await jobsOf(runId);
        const expected = jobs.some((job) => job.status === ActionStatus.failure)
          ? ActionStatus.failure
          : ActionStatus.success;
        for (const job of jobs) assert.ok([ActionStatus.success, ActionStatus.failure].includes(job.status as 1 | 2));
        const run = await runOf(runId);
        assert.equal(run.status, expected, `run ${runId} ends with its jobs' status`);
        assert.ok(run.stopped > 0, `run ${runId} has its end time`);
        const repo = [...repos].find(([, row]) => row.id === run.repo_id)?.[0];
        const api = await s.api('GET', `/repos/alice/${repo}/actions/runs/${runId}`, { token: alice.token });
        assert.equal(api.status, 200, api.text);
        assert.equal(
          (api.json as { status: string }).status,
          expected === ActionStatus.failure ? 'failure' : 'success',
        );
      }

      // The webhook: each job's completion once, the run's once.
      const of = (event: string) =>
        receiver.received
          .filter((d) => d.headers['x-forgejo-event'] === event)
          .map(
            (d) =>
              d.json as {
                action: string;
                workflow_job?: { id: number; run_id: number };
                workflow_run?: { id: number };
              },
          );
      await receiver.waitFor(
        () =>
          of('workflow_run').filter((p) => p.action === 'completed' && p.workflow_run?.id === hooked).length >= 1 &&
          of('workflow_job').filter((p) => p.action === 'completed' && p.workflow_job?.run_id === hooked).length >=
            LEGS,
        20_000,
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      const completedJobs = of('workflow_job')
        .filter((p) => p.action === 'completed' && p.workflow_job?.run_id === hooked)
        .map((p) => p.workflow_job?.id);
      assert.equal(completedJobs.length, LEGS, 'each job completed once');
      assert.equal(new Set(completedJobs).size, LEGS);
      assert.equal(
        of('workflow_run').filter((p) => p.action === 'completed' && p.workflow_run?.id === hooked).length,
        1,
        'the run completed once',
      );

      // The push run's commit statuses: each job's final one once.
      const deadline = Date.now() + 20_000;
      let finals: Array<{ context: string; status: string }> = [];
      while (Date.now() < deadline) {
        const res = await s.api('GET', `/repos/alice/pushed/statuses/${sha}?limit=50`, { token: alice.token });
        assert.equal(res.status, 200, res.text);
        finals = (res.json as Array<{ context: string; status: string }>).filter((st) =>
          ['success', 'failure'].includes(st.status),
        );
        if (finals.length >= PUSH_LEGS) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      await new Promise((resolve) => setTimeout(resolve, 300));
      const res = await s.api('GET', `/repos/alice/pushed/statuses/${sha}?limit=50`, { token: alice.token });
      finals = (res.json as Array<{ context: string; status: string }>).filter((st) =>
        ['success', 'failure'].includes(st.status),
      );
      assert.equal(finals.length, PUSH_LEGS, JSON.stringify(finals));
      assert.equal(new Set(finals.map((st) => st.context)).size, PUSH_LEGS, 'one final status per job');
    });

    test('a cancel racing the legs finishing in one turn: every runner is told what its task became, the run is as its jobs', async () => {
      const repo = repos.get('app');
      assert.ok(repo);
      const cancels: Array<(cancel: () => void) => void> = [
        (cancel) => cancel(),
        (cancel) => queueMicrotask(cancel),
        (cancel) => setImmediate(cancel),
        ...[0, 1, 3, 8].map((ms) => (cancel: () => void) => void setTimeout(cancel, ms)),
      ];
      for (const [round, timing] of cancels.entries()) {
        const runId = await dispatch('app');
        let held: Array<{ runner: Runner; task: TaskPayload }> = [];
        for (let attempt = 0; attempt < 5 && held.length < LEGS; attempt += 1)
          held = [...held, ...(await claimAll(LEGS))];
        assert.equal(held.length, LEGS, `every leg reached a runner (round ${round})`);
        let cancelled!: Promise<void>;
        const cancelling = new Promise<void>((resolve) =>
          timing(() => {
            cancelled = services().runControl.cancel(repo, runId);
            resolve();
          }),
        );
        const answers = await Promise.all(
          held.map(({ runner, task }) =>
            services().taskReports.updateTask(
              runner,
              { id: task.id, result: ActionStatus.success, stoppedAt: Math.floor(Date.now() / 1000), steps: [] },
              {},
            ),
          ),
        );
        await cancelling;
        await cancelled;
        const jobs = await jobsOf(runId);
        for (const [i, { task }] of held.entries()) {
          const stored = await taskStatus(task.id);
          assert.equal(answers[i]?.result, stored, `the runner is told what its task became (round ${round})`);
          assert.ok([ActionStatus.success, ActionStatus.cancelled].includes(stored as 1 | 3));
          const job = jobs.find((row) => row.task_id === task.id);
          assert.equal(job?.status, stored, `the job is as its task (round ${round})`);
        }
        const run = await runOf(runId);
        const expected = jobs.some((job) => job.status === ActionStatus.cancelled)
          ? ActionStatus.cancelled
          : ActionStatus.success;
        assert.equal(run.status, expected, `the run is as its jobs (round ${round})`);
        assert.ok(run.stopped > 0);
      }
    });

    // A claim whose SKIP LOCKED pick met a job just claimed keeps that row
    // locked to its commit, and may then wait for the run's lock a final
    // report of that job holds: PostgreSQL fails one of them as a deadlock.
    // The report is run again, not answered with an error. The deadlocks are
    // made here by a trigger failing the first two writes of a task's status
    // (the one-statement finish, then the transaction it falls back to).
    if (dialect === 'postgres')
      test('a final report that loses a deadlock is run again: the runner is told its result', async () => {
        const runId = await dispatch('app');
        const [held] = await claimAll(1);
        assert.ok(held, 'a job reached the runner');
        await sql`create sequence report_deadlocks`.execute(db());
        await sql`create function report_deadlock() returns trigger language plpgsql as $$
          begin
            -- A sequence, not a table: a failed statement does not roll it back.
            if new.status is distinct from old.status and nextval('report_deadlocks') <= 2 then
              raise exception 'deadlock detected (made by the test)' using errcode = '40P01';
            end if;
            return new;
          end $$`.execute(db());
        await sql`create trigger report_deadlock before update on action_task
          for each row execute function report_deadlock()`.execute(db());
        try {
          const answer = await services().taskReports.updateTask(
            held.runner,
            { id: held.task.id, result: ActionStatus.success, stoppedAt: Math.floor(Date.now() / 1000), steps: [] },
            {},
          );
          assert.equal(answer.result, ActionStatus.success);
          const made = await sql<{ n: string }>`select last_value as n from report_deadlocks`.execute(db());
          assert.equal(Number(made.rows[0]?.n), 3, 'two deadlocks were lost before the write went through');
        } finally {
          await sql`drop trigger report_deadlock on action_task`.execute(db());
          await sql`drop function report_deadlock()`.execute(db());
          await sql`drop sequence report_deadlocks`.execute(db());
        }
        assert.equal(await taskStatus(held.task.id), ActionStatus.success);
        const job = (await jobsOf(runId)).find((row) => row.task_id === held.task.id);
        assert.equal(job?.status, ActionStatus.success);
      });
  });
}
