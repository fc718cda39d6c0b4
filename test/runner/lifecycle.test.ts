// A job's whole life over real HTTP, as a runner and a user see it: the
// runner side through the Connect client (register with the token the REST
// API hands out, declare, fetch, stream logs with the ack-index protocol,
// report), the user side through the REST API (runs, tasks, runners, jobs
// search). Covers needs chains, failures that skip dependants, jobs no runner
// can take, ephemeral and deleted runners, server-side cancellation and the
// per-task token (Forgejo: routers/api/actions/runner/runner.go,
// services/actions/task.go, routers/api/v1/shared/runners.go).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Code, ConnectError } from '@connectrpc/connect';
import {
  actionRun,
  createCurrentUserRepo,
  deleteRepoRunner,
  dispatchWorkflow,
  getRepoRunner,
  listActionTasks,
  repoGetRunnerRegistrationToken,
} from '@llamaduck/forgejo-ts';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { lockRun } from '../../src/models/action-runs.ts';
import { closeUnfinishedSteps, finishJobOfTask, finishTask } from '../../src/models/task-reports.ts';
import { ActionStatus } from '../../src/modules/actions-status.ts';
import { answer } from '../support/actions.ts';
import { createRunnerClient, decodeTask, registerRunner } from '../support/runner-client.ts';
import type { DecodedTask, RunnerClient } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

const LOG_LINES = 10_000;
const LOG_BATCH = 1_000;

function workflow(jobs: Record<string, { runsOn: string | string[]; needs?: string[]; steps?: string[] }>): string {
  const lines = ['on: workflow_dispatch', 'jobs:'];
  for (const [id, job] of Object.entries(jobs)) {
    lines.push(`  ${id}:`);
    lines.push(`    runs-on: ${Array.isArray(job.runsOn) ? `[${job.runsOn.join(', ')}]` : job.runsOn}`);
    if (job.needs) lines.push(`    needs: [${job.needs.join(', ')}]`);
    lines.push('    steps:');
    for (const step of job.steps ?? [`echo ${id}`]) lines.push(`      - run: ${step}`);
  }
  return `${lines.join('\n')}\n`;
}

const WORKFLOWS: Record<string, string> = {
  'log.yml': workflow({ 'log-job': { runsOn: 'lifecycle-log', steps: ['echo compile', 'echo report'] } }),
  'chain.yml': workflow({
    a: { runsOn: 'lifecycle-chain' },
    b: { runsOn: 'lifecycle-chain', needs: ['a'] },
    c: { runsOn: 'lifecycle-chain', needs: ['a', 'b'] },
  }),
  'fail.yml': workflow({
    'fail-build': { runsOn: 'lifecycle-fail' },
    'fail-test': { runsOn: 'lifecycle-fail', needs: ['fail-build'] },
    'fail-deploy': { runsOn: 'lifecycle-fail', needs: ['fail-test'] },
  }),
  'gpu.yml': workflow({ train: { runsOn: ['lifecycle-gpu', 'cuda'] } }),
  'eph.yml': workflow({ 'eph-job': { runsOn: 'lifecycle-eph' } }),
  'del.yml': workflow({ 'del-job': { runsOn: 'lifecycle-del' } }),
  'cancel.yml': workflow({
    'cancel-job': { runsOn: 'lifecycle-cancel', steps: ['sleep 600', 'echo never'] },
    'cancel-after': { runsOn: 'lifecycle-cancel', needs: ['cancel-job'] },
  }),
  'token.yml': workflow({ 'token-job': { runsOn: 'lifecycle-token' } }),
};

interface RunJson {
  id: number;
  index_in_repo: number;
  status: string;
  commit_sha: string;
}

interface TaskJson {
  id: number;
  name: string;
  run_number: number;
  head_sha: string;
  status: string;
  workflow_id: string;
  event: string;
}

interface JobJson {
  id: number;
  name: string;
  runs_on: string[] | null;
  needs: string[] | null;
  task_id: number;
  status: string;
}

async function expectUnauthenticated(call: Promise<unknown>): Promise<void> {
  await assert.rejects(call, (error: unknown) => {
    assert.ok(error instanceof ConnectError, String(error));
    assert.equal(error.code, Code.Unauthenticated, error.message);
    assert.equal(error.rawMessage, 'unregistered runner');
    return true;
  });
}

const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });

/** A fetch that must come back empty: short, so the long poll ends quickly. */
async function fetchNothing(client: RunnerClient, why: string): Promise<void> {
  const res = await client.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 1200 });
  assert.equal(res.task, undefined, why);
}

async function fetchOne(client: RunnerClient): Promise<DecodedTask> {
  const res = await client.runner.fetchTask({ tasksVersion: 0n });
  assert.ok(res.task, 'a task');
  return decodeTask(res.task as Task);
}

function finish(client: RunnerClient, taskId: number, result: Result, outputs: Record<string, string> = {}) {
  return client.runner.updateTask({
    state: { id: BigInt(taskId), result, startedAt: now(), stoppedAt: now(), steps: [] },
    outputs,
  });
}

for (const dialect of testDialects()) {
  describe(`runner lifecycle end to end [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let work: WorkDir;
    let mainSha: string;
    let registrationToken: string;

    const db = () => s.server.deps.database.db;

    const dispatch = async (file: string): Promise<{ id: number; runNumber: number }> => {
      const res = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'app', workflowfilename: file },
        body: { ref: 'main', inputs: {}, return_run_info: true },
      });
      assert.equal(res.status, 201, JSON.stringify(res.error));
      const data = res.data as { id: number; run_number: number };
      return { id: data.id, runNumber: data.run_number };
    };

    const getRun = async (runId: number): Promise<RunJson> => {
      const res = await actionRun({ client: alice.client, path: { owner: 'alice', repo: 'app', run_id: runId } });
      assert.equal(res.status, 200);
      return res.data as unknown as RunJson;
    };

    const tasks = async (): Promise<TaskJson[]> => {
      const res = await listActionTasks({
        client: alice.client,
        path: { owner: 'alice', repo: 'app' },
        query: { limit: 50 },
      });
      assert.equal(res.status, 200);
      return (res.data?.workflow_runs ?? []) as unknown as TaskJson[];
    };

    /** The jobs search answers null, not [], when nothing matches (Forgejo's nil slice). */
    const searchJobs = async (labels?: string): Promise<JobJson[] | null> => {
      const res = await s.api(
        'GET',
        `/repos/alice/app/actions/runners/jobs${labels === undefined ? '' : `?labels=${encodeURIComponent(labels)}`}`,
        { token: alice.token },
      );
      assert.equal(res.status, 200, res.text);
      return res.json as JobJson[] | null;
    };

    const runnerStatus = async (id: number): Promise<number> =>
      (
        await answer(
          getRepoRunner({ client: alice.client, path: { owner: 'alice', repo: 'app', runner_id: String(id) } }),
        )
      ).status;

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      for (const name of ['app', 'vault']) {
        assert.equal(
          (await createCurrentUserRepo({ client: alice.client, body: { name, private: true } })).status,
          201,
        );
      }
      work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      mainSha = await work.commit(
        Object.fromEntries(Object.entries(WORKFLOWS).map(([file, text]) => [`.forgejo/workflows/${file}`, text])),
        'Add workflows',
      );
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      const res = await repoGetRunnerRegistrationToken({ client: alice.client, path: { owner: 'alice', repo: 'app' } });
      assert.equal(res.status, 200);
      registrationToken = (res.data as { token: string }).token;
      assert.match(registrationToken, /^[A-Za-z0-9_-]{43}$/);
    });

    after(async () => {
      await work.remove();
      await s.stop();
    });

    test('register, declare, fetch, 10,000 log lines with a lost ack, finish: run, tasks list and stored log agree', async () => {
      const client = createRunnerClient(s.url);
      const registered = await client.runner.register({
        name: 'lifecycle-log',
        token: registrationToken,
        version: 'v12.0.0',
        labels: [],
      });
      assert.ok(registered.runner);
      client.credentials = {
        id: Number(registered.runner.id),
        uuid: registered.runner.uuid,
        token: registered.runner.token,
      };
      // Registered without labels: nothing matches until Declare names them.
      const { id: runId, runNumber } = await dispatch('log.yml');
      await fetchNothing(client, 'a runner without labels runs nothing');
      const declared = await client.runner.declare({ version: 'v12.0.1', labels: ['lifecycle-log', 'linux'] });
      assert.deepEqual(declared.runner?.labels, ['lifecycle-log', 'linux']);

      const task = await fetchOne(client);
      assert.deepEqual(Object.keys(task.workflow.jobs), ['log-job']);
      assert.equal(task.context.run_id, String(runId));
      assert.equal(task.context.sha, mainSha);
      assert.equal((await getRun(runId)).status, 'running');

      const heartbeat = await client.runner.updateTask({
        state: {
          id: BigInt(task.id),
          result: Result.UNSPECIFIED,
          startedAt: now(),
          steps: [{ id: 0n, result: Result.UNSPECIFIED, startedAt: now(), logIndex: 0n, logLength: 0n }],
        },
      });
      assert.equal(heartbeat.state?.result, Result.UNSPECIFIED);

      const base = Math.floor(Date.now() / 1000);
      const row = (i: number) => ({
        time: { seconds: BigInt(base + Math.floor(i / 1000)), nanos: (i % 1000) * 1_000_000 },
        content: `line ${i}`,
      });
      const rows = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => row(from + k));
      const send = async (index: number, to: number, noMore = false) =>
        Number(
          (
            await client.runner.updateLog({
              taskId: BigInt(task.id),
              index: BigInt(index),
              rows: rows(index, to),
              noMore,
            })
          ).ackIndex,
        );

      let acked = 0;
      while (acked < LOG_LINES) {
        const to = Math.min(LOG_LINES, acked + LOG_BATCH);
        if (acked === 3 * LOG_BATCH) {
          // The answer to this batch is "lost": the runner still believes `acked`…
          assert.equal(await send(acked, to), to);
          // …and resends everything unacked plus the next batch, overlapping what is stored.
          const further = Math.min(LOG_LINES, to + LOG_BATCH);
          assert.equal(await send(acked, further), further, 'only the unstored tail is appended');
          // A plain duplicate of an acked batch changes nothing.
          assert.equal(await send(acked, to), further);
          acked = further;
          continue;
        }
        const last = to === LOG_LINES;
        assert.equal(await send(acked, to, last), to);
        acked = to;
      }
      // A repeated final call (its answer lost too) gets the same ack.
      assert.equal(
        Number(
          (await client.runner.updateLog({ taskId: BigInt(task.id), index: BigInt(LOG_LINES), rows: [], noMore: true }))
            .ackIndex,
        ),
        LOG_LINES,
      );

      const done = await client.runner.updateTask({
        state: {
          id: BigInt(task.id),
          result: Result.SUCCESS,
          startedAt: now(),
          stoppedAt: now(),
          steps: [
            { id: 0n, result: Result.SUCCESS, startedAt: now(), stoppedAt: now(), logIndex: 0n, logLength: 6000n },
            { id: 1n, result: Result.SUCCESS, startedAt: now(), stoppedAt: now(), logIndex: 6000n, logLength: 4000n },
          ],
        },
        outputs: { report: 'ok', lines: String(LOG_LINES) },
      });
      assert.equal(done.state?.result, Result.SUCCESS);
      assert.deepEqual(new Set(done.sentOutputs), new Set(['report', 'lines']));

      const run = await getRun(runId);
      assert.equal(run.status, 'success');
      assert.equal(run.index_in_repo, runNumber);
      const listed = (await tasks()).find((t) => t.id === task.id);
      assert.ok(listed, 'the task is listed');
      assert.deepEqual(
        [listed.status, listed.name, listed.run_number, listed.head_sha, listed.workflow_id, listed.event],
        ['success', 'log-job', runNumber, mainSha, 'log.yml', 'workflow_dispatch'],
      );
      const succeeded = await listActionTasks({
        client: alice.client,
        path: { owner: 'alice', repo: 'app' },
        query: { status: ['success'] },
      });
      assert.ok((succeeded.data?.workflow_runs ?? []).some((t) => t.id === task.id));

      const lines: string[] = [];
      for await (const line of s.server.deps.services.taskReports.readLog(task.id)) lines.push(line);
      assert.equal(lines.length, LOG_LINES);
      for (let i = 0; i < LOG_LINES; i += 1) {
        const match = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z) (.*)$/.exec(lines[i] ?? '');
        assert.ok(match, `line ${i}: ${lines[i]}`);
        if (match[2] !== `line ${i}`) assert.fail(`line ${i} is "${match[2]}"`);
      }
      // The runner's time stamps, to the millisecond sent (Forgejo's seven-digit layout).
      assert.equal(lines[1234]?.slice(0, 28), new Date((base + 1) * 1000 + 234).toISOString().replace(/Z$/, '0000Z'));
      const stored = await db()
        .selectFrom('action_task')
        .select(['log_length', 'log_in_storage'])
        .where('id', '=', task.id)
        .executeTakeFirstOrThrow();
      assert.deepEqual(
        [Number(stored.log_length), Number(stored.log_in_storage)],
        [LOG_LINES, 1],
        'archived on "no more"',
      );
    });

    test('needs chain a → b → c: each dependant waits for success and receives the outputs and results it needs', async () => {
      const { id: runId } = await dispatch('chain.yml');
      const client = await registerRunner(s.url, registrationToken, { labels: ['lifecycle-chain'] });
      const other = await registerRunner(s.url, registrationToken, { labels: ['lifecycle-chain'] });

      const a = await fetchOne(client);
      assert.deepEqual(Object.keys(a.workflow.jobs), ['a']);
      assert.deepEqual(a.needs, {});
      await fetchNothing(other, 'b waits while a runs');
      assert.deepEqual(
        (await searchJobs('lifecycle-chain'))?.map((j) => [j.name, j.status]),
        [['a', 'running']],
        'b and c are blocked, not waiting',
      );
      // A heartbeat is no result: b still waits.
      await client.runner.updateTask({
        state: { id: BigInt(a.id), result: Result.UNSPECIFIED, steps: [] },
        outputs: { early: 'yes' },
      });
      await fetchNothing(other, 'b waits for a result, not a heartbeat');

      assert.equal((await finish(client, a.id, Result.SUCCESS, { artifact: 'a.tgz' })).state?.result, Result.SUCCESS);
      const b = await fetchOne(other);
      assert.deepEqual(Object.keys(b.workflow.jobs), ['b']);
      assert.deepEqual(b.needs, { a: { outputs: { early: 'yes', artifact: 'a.tgz' }, result: Result.SUCCESS } });
      await fetchNothing(client, 'c waits while b runs');

      await finish(other, b.id, Result.SUCCESS, { digest: 'sha256:b' });
      const c = await fetchOne(client);
      assert.deepEqual(Object.keys(c.workflow.jobs), ['c']);
      assert.deepEqual(c.needs, {
        a: { outputs: { early: 'yes', artifact: 'a.tgz' }, result: Result.SUCCESS },
        b: { outputs: { digest: 'sha256:b' }, result: Result.SUCCESS },
      });
      assert.ok(a.id < b.id && b.id < c.id, 'tasks were created in order');
      assert.equal((await getRun(runId)).status, 'running');
      await finish(client, c.id, Result.SUCCESS);
      assert.equal((await getRun(runId)).status, 'success');
      const listed = (await tasks()).filter((t) => [a.id, b.id, c.id].includes(t.id));
      assert.deepEqual(listed.map((t) => [t.name, t.status]).sort(), [
        ['a', 'success'],
        ['b', 'success'],
        ['c', 'success'],
      ]);
    });

    test('a failing job skips its dependants: the run fails and they are never handed out', async () => {
      const { id: runId } = await dispatch('fail.yml');
      const client = await registerRunner(s.url, registrationToken, { labels: ['lifecycle-fail'] });
      const build = await fetchOne(client);
      assert.deepEqual(Object.keys(build.workflow.jobs), ['fail-build']);
      const reported = await client.runner.updateTask({
        state: {
          id: BigInt(build.id),
          result: Result.FAILURE,
          stoppedAt: now(),
          steps: [{ id: 0n, result: Result.FAILURE, startedAt: now(), stoppedAt: now(), logIndex: 0n, logLength: 0n }],
        },
      });
      assert.equal(reported.state?.result, Result.FAILURE);
      assert.equal((await getRun(runId)).status, 'failure');
      await fetchNothing(client, 'skipped dependants are never handed out');
      assert.equal(await searchJobs('lifecycle-fail'), null, 'nothing of the run waits or runs');
      const names = ((await searchJobs()) ?? []).map((j) => j.name);
      assert.ok(!names.includes('fail-test') && !names.includes('fail-deploy'), names.join(', '));
      const listed = (await tasks()).filter((t) => t.name.startsWith('fail-'));
      assert.deepEqual(
        listed.map((t) => [t.name, t.status]),
        [['fail-build', 'failure']],
      );
      const jobs = await db()
        .selectFrom('action_run_job')
        .select(['job_id', 'status', 'task_id'])
        .where('run_id', '=', runId)
        .orderBy('id')
        .execute();
      assert.deepEqual(
        jobs.map((j) => [j.job_id, j.status, j.task_id === 0]),
        [
          ['fail-build', ActionStatus.failure, false],
          ['fail-test', ActionStatus.skipped, true],
          ['fail-deploy', ActionStatus.skipped, true],
        ],
      );
    });

    test('a job for labels no runner has stays waiting and shows in the jobs search for its labels', async () => {
      const { id: runId } = await dispatch('gpu.yml');
      const client = await registerRunner(s.url, registrationToken, { labels: ['lifecycle-gpu', 'linux'] });
      await fetchNothing(client, 'the runner lacks "cuda"');
      assert.equal((await getRun(runId)).status, 'waiting');
      const found = await searchJobs('lifecycle-gpu,cuda');
      assert.deepEqual(
        found?.map((j) => [j.name, j.runs_on, j.needs, j.task_id, j.status]),
        [['train', ['lifecycle-gpu', 'cuda'], null, 0, 'waiting']],
      );
      assert.ok(
        !((await searchJobs('lifecycle-gpu,linux')) ?? []).some((j) => j.name === 'train'),
        "the runner's labels do not cover the job",
      );
    });

    test('an ephemeral runner disappears once its task is done', async () => {
      await dispatch('eph.yml');
      const client = await registerRunner(s.url, registrationToken, { labels: ['lifecycle-eph'], ephemeral: true });
      const id = client.credentials?.id ?? 0;
      const task = await fetchOne(client);
      assert.equal(await runnerStatus(id), 200, 'listed while it runs its task');
      assert.equal((await finish(client, task.id, Result.SUCCESS)).state?.result, Result.SUCCESS);
      assert.equal(await runnerStatus(id), 404);
      await expectUnauthenticated(client.runner.fetchTask({ tasksVersion: 0n }));
      await expectUnauthenticated(client.runner.declare({ version: 'v1', labels: ['lifecycle-eph'] }));
    });

    test('a runner deleted through the REST API can no longer fetch or report', async () => {
      await dispatch('del.yml');
      const client = await registerRunner(s.url, registrationToken, { labels: ['lifecycle-del'] });
      const id = client.credentials?.id ?? 0;
      const task = await fetchOne(client);
      const deleted = await answer(
        deleteRepoRunner({ client: alice.client, path: { owner: 'alice', repo: 'app', runner_id: String(id) } }),
      );
      assert.equal(deleted.status, 204);
      assert.equal(await runnerStatus(id), 404);
      await expectUnauthenticated(client.runner.fetchTask({ tasksVersion: 0n }));
      await expectUnauthenticated(finish(client, task.id, Result.SUCCESS));
      await expectUnauthenticated(
        client.runner.updateLog({ taskId: BigInt(task.id), index: 0n, rows: [{ content: 'late' }] }),
      );
    });

    test('a job cancelled server-side: the next UpdateTask answers RESULT_CANCELLED', async () => {
      const { id: runId } = await dispatch('cancel.yml');
      const client = await registerRunner(s.url, registrationToken, { labels: ['lifecycle-cancel'] });
      const task = await fetchOne(client);
      const token = task.secrets.GITEA_TOKEN ?? '';
      const running = await client.runner.updateTask({
        state: {
          id: BigInt(task.id),
          result: Result.UNSPECIFIED,
          startedAt: now(),
          steps: [{ id: 0n, result: Result.UNSPECIFIED, startedAt: now(), logIndex: 0n, logLength: 0n }],
        },
      });
      assert.equal(running.state?.result, Result.UNSPECIFIED);
      assert.equal((await s.api('GET', '/repos/alice/app', { token })).status, 200);

      // What Forgejo's CancelRun does to a running job (StopTask): there is no cancel endpoint in v15.
      const job = await db()
        .selectFrom('action_run_job')
        .select(['id', 'task_id'])
        .where('run_id', '=', runId)
        .where('job_id', '=', 'cancel-job')
        .executeTakeFirstOrThrow();
      assert.equal(job.task_id, task.id);
      await db()
        .transaction()
        .execute(async (tx) => {
          const at = Math.floor(Date.now() / 1000);
          await lockRun(tx, runId);
          assert.ok(await finishTask(tx, task.id, ActionStatus.cancelled, at));
          await closeUnfinishedSteps(tx, task.id, ActionStatus.cancelled, at);
          assert.ok(await finishJobOfTask(tx, job.id, task.id, ActionStatus.cancelled, at));
          await s.server.deps.services.runProgress.settle(tx, runId);
        });

      const heard = await client.runner.updateTask({
        state: {
          id: BigInt(task.id),
          result: Result.UNSPECIFIED,
          steps: [{ id: 0n, result: Result.UNSPECIFIED, startedAt: now(), logIndex: 0n, logLength: 3n }],
        },
      });
      assert.equal(heard.state?.result, Result.CANCELLED);
      // The runner winds down: its last lines and its own final report change nothing.
      assert.equal(
        Number(
          (
            await client.runner.updateLog({
              taskId: BigInt(task.id),
              index: 0n,
              rows: [{ content: 'killed' }],
              noMore: true,
            })
          ).ackIndex,
        ),
        1,
      );
      assert.equal((await finish(client, task.id, Result.FAILURE)).state?.result, Result.CANCELLED);

      assert.equal((await getRun(runId)).status, 'cancelled');
      assert.equal((await tasks()).find((t) => t.id === task.id)?.status, 'cancelled');
      await fetchNothing(client, 'the dependant of a cancelled job is skipped');
      assert.equal((await s.api('GET', '/repos/alice/app', { token })).status, 401, 'the token died with the task');
    });

    test("the task token reads the task's private repository (API and git) and nothing else, while the task runs", async () => {
      await dispatch('token.yml');
      const client = await registerRunner(s.url, registrationToken, { labels: ['lifecycle-token'] });
      const task = await fetchOne(client);
      const token = task.secrets.GITEA_TOKEN ?? '';
      assert.match(token, /^[0-9a-f]{40}$/);
      assert.equal(task.secrets.GITHUB_TOKEN, token);
      assert.equal(task.context.token, token);

      const own = await s.api('GET', '/repos/alice/app', { token });
      assert.equal(own.status, 200, own.text);
      assert.equal((own.json as { full_name: string; private: boolean }).full_name, 'alice/app');
      assert.equal(
        (await s.api('GET', '/repos/alice/vault', { token })).status,
        404,
        'another private repository of the owner is invisible',
      );
      assert.equal(
        (await s.api('GET', '/repos/alice/vault', { token: alice.token })).status,
        200,
        'while its owner sees it',
      );

      const cloneUrl = remoteUrl(s.url, 'alice', 'app', { user: 'gantry-ci', password: token });
      const checkout = await createWorkDir(remoteUrl(s.url, 'alice', 'vault', { user: 'gantry-ci', password: token }));
      try {
        const cloned = await checkout.git(['clone', '-q', cloneUrl, 'app'], { allowFailure: true });
        assert.equal(cloned.code, 0, cloned.stderr);
        assert.equal((await checkout.git(['-C', 'app', 'rev-parse', 'HEAD'])).stdout.trim(), task.context.sha);
        const vault = await checkout.git(['ls-remote', 'origin'], { allowFailure: true });
        assert.notEqual(vault.code, 0, 'the other private repository cannot be read over git either');

        await finish(client, task.id, Result.SUCCESS);
        const afterwards = await s.api('GET', '/repos/alice/app', { token });
        assert.equal(afterwards.status, 401, afterwards.text);
        const again = await checkout.git(['clone', '-q', cloneUrl, 'again'], { allowFailure: true });
        assert.notEqual(again.code, 0, 'no clone with the token of a finished task');
      } finally {
        await checkout.remove();
      }
    });
  });
}
