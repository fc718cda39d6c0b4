// Run control as a user and a runner see it: cancel (Forgejo 16's
// POST …/runs/{run_id}/cancel), rerun on Gitea's paths with Forgejo's attempt
// model (same job ids, attempt + 1, earlier tasks kept), delete of a finished
// run, who may do which, and the webhooks an attempt sends. The runner side is
// the Connect client; the user side the REST API (forgejo-ts where it has the
// call: it has no cancel, rerun or delete, which go over raw HTTP).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import { actionRun, listActionTasks } from '@llamaduck/forgejo-ts';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { errorBody } from '../support/actions.ts';
import { createRunnerClient, decodeTask } from '../support/runner-client.ts';
import type { DecodedTask, RunnerClient } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { startWebhookReceiver } from '../support/webhook-receiver.ts';
import type { WebhookReceiver } from '../support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

function workflow(jobs: Record<string, { label: string; needs?: string[] }>): string {
  const lines = ['on: workflow_dispatch', 'jobs:'];
  for (const [id, job] of Object.entries(jobs)) {
    lines.push(`  ${id}:`, `    runs-on: ${job.label}`);
    if (job.needs) lines.push(`    needs: [${job.needs.join(', ')}]`);
    lines.push('    steps:', `      - run: echo ${id}`, '      - run: sleep 1');
  }
  return `${lines.join('\n')}\n`;
}

const WORKFLOWS: Record<string, string> = {
  'cancel.yml': workflow({ work: { label: 'rc-cancel' }, after: { label: 'rc-cancel', needs: ['work'] } }),
  'eph.yml': workflow({ work: { label: 'rc-eph' } }),
  'rerun.yml': workflow({ build: { label: 'rc-rerun' }, test: { label: 'rc-rerun', needs: ['build'] } }),
  'failed.yml': workflow({
    ok: { label: 'rc-failed' },
    bad: { label: 'rc-failed' },
    after: { label: 'rc-failed', needs: ['bad'] },
  }),
  'delete.yml': workflow({ work: { label: 'rc-delete' } }),
  'perm.yml': workflow({ work: { label: 'rc-perm' } }),
  'hooks.yml': workflow({ work: { label: 'rc-hooks' } }),
  'race.yml': workflow({ work: { label: 'rc-race' } }),
  'disabled.yml': workflow({ work: { label: 'rc-disabled' } }),
  'swarm.yml':
    'on: workflow_dispatch\njobs:\n  leg:\n    runs-on: rc-swarm\n    strategy:\n      matrix:\n        n: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]\n    steps:\n      - run: echo leg\n',
  // Does not parse: the push gives it one failed run, which cannot be rerun.
  'broken.yml': 'on: push\njobs:\n  x:\n    runs-on: rc-broken\n    steps: nope\n',
};

const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });

interface RunJson {
  id: number;
  status: string;
}

interface JobRow {
  id: number;
  job_id: string;
  attempt: number;
  task_id: number;
  status: number;
  handle: string;
}

interface Payload {
  action: string;
  workflow_run?: { id: number; run_attempt: number };
  workflow_job?: { id: number; run_id: number; run_attempt: number; status: string };
}

for (const dialect of testDialects()) {
  describe(`run control: cancel, rerun, delete [${dialect}]`, () => {
    let s: TestServer;
    let owner: TestUser;
    let reader: TestUser;
    let writer: TestUser;
    let outsider: TestUser;
    let work: WorkDir;
    let registrationToken: string;
    let receiver: WebhookReceiver;
    let repoId: number;
    const runners = new Map<string, RunnerClient>();

    const db = () => s.server.deps.database.db;

    const dispatch = async (file: string): Promise<number> => {
      const res = await s.api('POST', `/repos/acme/app/actions/workflows/${file}/dispatches`, {
        token: owner.token,
        body: { ref: 'main', return_run_info: true },
      });
      assert.equal(res.status, 201, res.text);
      return (res.json as { id: number }).id;
    };

    const getRun = async (runId: number): Promise<RunJson> => {
      const res = await actionRun({ client: owner.client, path: { owner: 'acme', repo: 'app', run_id: runId } });
      assert.equal(res.status, 200);
      return res.data as unknown as RunJson;
    };

    const taskStatuses = async (): Promise<Map<number, string>> => {
      const res = await listActionTasks({
        client: owner.client,
        path: { owner: 'acme', repo: 'app' },
        query: { limit: 50 },
      });
      assert.equal(res.status, 200);
      return new Map(
        ((res.data?.workflow_runs ?? []) as unknown as Array<{ id: number; status: string }>).map((t) => [
          t.id,
          t.status,
        ]),
      );
    };

    const jobsOf = async (runId: number): Promise<Map<string, JobRow>> => {
      const rows = await db()
        .selectFrom('action_run_job')
        .select(['id', 'job_id', 'attempt', 'task_id', 'status', 'handle'])
        .where('run_id', '=', runId)
        .orderBy('id')
        .execute();
      return new Map(rows.map((row) => [row.job_id, row]));
    };

    const runner = async (label: string, ephemeral = false): Promise<RunnerClient> => {
      const existing = runners.get(label);
      if (existing && !ephemeral) return existing;
      const client = createRunnerClient(s.url);
      const res = await client.runner.register({
        name: `runner-${label}`,
        token: registrationToken,
        version: 'v12.0.0',
        labels: [label],
        ephemeral,
      });
      assert.ok(res.runner);
      client.credentials = { id: Number(res.runner.id), uuid: res.runner.uuid, token: res.runner.token };
      if (!ephemeral) runners.set(label, client);
      return client;
    };

    const fetchOne = async (client: RunnerClient): Promise<DecodedTask> => {
      const res = await client.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(res.task, 'a task');
      return decodeTask(res.task as Task);
    };

    const heartbeat = async (client: RunnerClient, taskId: number): Promise<Result | undefined> =>
      (
        await client.runner.updateTask({
          state: {
            id: BigInt(taskId),
            result: Result.UNSPECIFIED,
            startedAt: now(),
            steps: [{ id: 0n, result: Result.UNSPECIFIED, startedAt: now(), logIndex: 0n, logLength: 0n }],
          },
        })
      ).state?.result;

    const finish = async (client: RunnerClient, taskId: number, result: Result): Promise<Result | undefined> =>
      (
        await client.runner.updateTask({
          state: { id: BigInt(taskId), result, startedAt: now(), stoppedAt: now(), steps: [] },
        })
      ).state?.result;

    /** Claims the next task of `label`, names its job and finishes it with `result`. */
    const runNext = async (label: string, results: Record<string, Result>): Promise<DecodedTask> => {
      const client = await runner(label);
      const task = await fetchOne(client);
      const jobName = Object.keys(task.workflow.jobs)[0] ?? '';
      const result = results[jobName];
      assert.ok(result !== undefined, `unexpected job ${jobName}`);
      await client.runner.updateLog({
        taskId: BigInt(task.id),
        index: 0n,
        rows: [{ time: now(), content: `${jobName} output of task ${task.id}` }],
        noMore: true,
      });
      assert.equal(await finish(client, task.id, result), result);
      return task;
    };

    before(async () => {
      s = await startTestServer(dialect, { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' });
      owner = await s.createUser('owner');
      reader = await s.createUser('reader');
      writer = await s.createUser('writer');
      outsider = await s.createUser('outsider');
      receiver = await startWebhookReceiver();
      assert.equal((await s.api('POST', '/orgs', { token: owner.token, body: { username: 'acme' } })).status, 201);
      const repo = await s.api('POST', '/orgs/acme/repos', {
        token: owner.token,
        body: { name: 'app', private: true },
      });
      assert.equal(repo.status, 201, repo.text);
      repoId = (repo.json as { id: number }).id;
      for (const [user, permission] of [
        [reader, 'read'],
        [writer, 'write'],
      ] as const) {
        assert.equal(
          (
            await s.api('PUT', `/repos/acme/app/collaborators/${user.name}`, {
              token: owner.token,
              body: { permission },
            })
          ).status,
          204,
        );
      }
      const hook = await s.api('POST', '/orgs/acme/hooks', {
        token: owner.token,
        body: {
          type: 'forgejo',
          config: { url: `${receiver.url}/hook`, content_type: 'json' },
          events: ['workflow_run', 'workflow_job'],
          active: true,
        },
      });
      assert.equal(hook.status, 201, hook.text);
      work = await createWorkDir(remoteUrl(s.url, 'acme', 'app', { user: 'owner', password: owner.password }));
      await work.commit(
        Object.fromEntries(Object.entries(WORKFLOWS).map(([file, text]) => [`.forgejo/workflows/${file}`, text])),
        'Workflows',
      );
      assert.equal((await work.push('main')).code, 0);
      const token = await s.api('GET', '/orgs/acme/actions/runners/registration-token', { token: owner.token });
      assert.equal(token.status, 200, token.text);
      registrationToken = (token.json as { token: string }).token;
    });

    after(async () => {
      await work?.remove();
      await s?.stop();
      await receiver?.close();
    });

    test('cancel stops a running task within one UpdateTask round trip; UpdateLog still acks; dependants skipped; run cancelled', async () => {
      const runId = await dispatch('cancel.yml');
      const client = await runner('rc-cancel');
      const task = await fetchOne(client);
      assert.equal(await heartbeat(client, task.id), Result.UNSPECIFIED);

      const cancelled = await s.api('POST', `/repos/acme/app/actions/runs/${runId}/cancel`, { token: owner.token });
      assert.equal(cancelled.status, 204, cancelled.text);
      assert.equal(cancelled.text, '');

      // The very next UpdateTask answer carries the stop signal.
      assert.equal(await heartbeat(client, task.id), Result.CANCELLED);
      // The runner winds down: its last lines are still acknowledged, its own final report changes nothing.
      const ack = await client.runner.updateLog({
        taskId: BigInt(task.id),
        index: 0n,
        rows: [{ time: now(), content: 'interrupted' }],
        noMore: true,
      });
      assert.equal(Number(ack.ackIndex), 1);
      assert.equal(await finish(client, task.id, Result.SUCCESS), Result.CANCELLED);

      assert.equal((await getRun(runId)).status, 'cancelled');
      assert.equal((await taskStatuses()).get(task.id), 'cancelled');
      const jobs = await jobsOf(runId);
      assert.equal(jobs.get('work')?.status, 3, 'the running job is cancelled');
      assert.equal(jobs.get('after')?.status, 4, 'its dependant is skipped');
      const none = await client.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 1200 });
      assert.equal(none.task, undefined, 'nothing of the cancelled run is handed out');

      // Cancelling a finished run: 204, nothing changes (Forgejo 16).
      assert.equal(
        (await s.api('POST', `/repos/acme/app/actions/runs/${runId}/cancel`, { token: owner.token })).status,
        204,
      );
      assert.equal((await getRun(runId)).status, 'cancelled');
      assert.equal(
        (await s.api('POST', '/repos/acme/app/actions/runs/999999/cancel', { token: owner.token })).status,
        404,
      );
    });

    test("a cancel racing the runner's final UpdateTask ends in one state the runner, the task, the job and the run agree on", async () => {
      const client = await runner('rc-race');
      const seen = new Set<string>();
      for (let i = 0; i < 6; i += 1) {
        const runId = await dispatch('race.yml');
        const task = await fetchOne(client);
        const [cancel, answer] = await Promise.all([
          s.api('POST', `/repos/acme/app/actions/runs/${runId}/cancel`, { token: owner.token }),
          finish(client, task.id, Result.SUCCESS),
        ]);
        assert.equal(cancel.status, 204);
        const job = (await jobsOf(runId)).get('work') as JobRow;
        const expected = answer === Result.SUCCESS ? 'success' : 'cancelled';
        assert.ok(answer === Result.SUCCESS || answer === Result.CANCELLED, `answer ${answer}`);
        assert.equal(job.status, answer === Result.SUCCESS ? 1 : 3, 'the job agrees with the runner');
        assert.equal((await taskStatuses()).get(task.id), expected, 'the task agrees with the runner');
        assert.equal((await getRun(runId)).status, expected, 'the run agrees with its job');
        // Asking again changes nothing.
        assert.equal(await finish(client, task.id, Result.FAILURE), answer);
        seen.add(expected);
      }
      assert.ok(seen.size >= 1);
    });

    test("a cancel racing runners that claim the run's jobs leaves no job or task unfinished", async () => {
      const runId = await dispatch('swarm.yml');
      const clients = await Promise.all(
        [1, 2, 3, 4].map(async (n) => {
          const client = createRunnerClient(s.url);
          const res = await client.runner.register({
            name: `swarm-${n}`,
            token: registrationToken,
            version: 'v12.0.0',
            labels: ['rc-swarm'],
          });
          assert.ok(res.runner);
          client.credentials = { id: Number(res.runner.id), uuid: res.runner.uuid, token: res.runner.token };
          return client;
        }),
      );
      let cancelled = false;
      const claimed: number[] = [];
      const loops = clients.map(async (client) => {
        while (!cancelled) {
          const res = await client.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 2000 }).catch(() => null);
          if (res?.task) claimed.push(Number(res.task.id));
        }
      });
      await new Promise((resolve) => setTimeout(resolve, 30));
      const cancel = await s.api('POST', `/repos/acme/app/actions/runs/${runId}/cancel`, { token: owner.token });
      cancelled = true;
      assert.equal(cancel.status, 204, cancel.text);
      await Promise.all(loops);
      assert.equal((await getRun(runId)).status, 'cancelled');
      const jobs = await db()
        .selectFrom('action_run_job')
        .select(['status', 'task_id'])
        .where('run_id', '=', runId)
        .execute();
      assert.equal(jobs.length, 20);
      assert.ok(
        jobs.every((job) => job.status === 3),
        `every job cancelled: ${JSON.stringify(jobs)}`,
      );
      const statuses = await taskStatuses();
      for (const id of claimed)
        assert.equal(statuses.get(id), 'cancelled', `task ${id} claimed before the cancel is cancelled`);
    });

    test('cancelling a waiting run cancels its jobs before any runner takes them', async () => {
      const runId = await dispatch('cancel.yml');
      assert.equal(
        (await s.api('POST', `/repos/acme/app/actions/runs/${runId}/cancel`, { token: owner.token })).status,
        204,
      );
      assert.equal((await getRun(runId)).status, 'cancelled');
      const jobs = await jobsOf(runId);
      assert.deepEqual([jobs.get('work')?.status, jobs.get('work')?.task_id, jobs.get('after')?.status], [3, 0, 4]);
    });

    test('cancel removes the ephemeral runner that owned the task: its next call fails authentication', async () => {
      const runId = await dispatch('eph.yml');
      const client = await runner('rc-eph', true);
      const task = await fetchOne(client);
      assert.equal(
        (await s.api('POST', `/repos/acme/app/actions/runs/${runId}/cancel`, { token: owner.token })).status,
        204,
      );
      await assert.rejects(
        heartbeat(client, task.id),
        (error: unknown) => error instanceof ConnectError && error.code === Code.Unauthenticated,
      );
      assert.equal((await taskStatuses()).get(task.id), 'cancelled');
    });

    test('rerun of a failed job: attempt 2 with a new task, its own log and github.run_attempt 2; attempt 1 stays listed and its log readable; dependants blocked until it finishes', async () => {
      const runId = await dispatch('rerun.yml');
      const first = await runNext('rc-rerun', { build: Result.FAILURE });
      assert.equal(first.context.run_attempt, '1');
      assert.equal((await getRun(runId)).status, 'failure');
      const before = await jobsOf(runId);
      const build = before.get('build') as JobRow;
      assert.deepEqual([build.attempt, build.task_id], [1, first.id]);
      assert.equal(before.get('test')?.status, 4, 'skipped after the failure');

      const unknown = await s.api('POST', `/repos/acme/app/actions/runs/${runId}/jobs/999999/rerun`, {
        token: owner.token,
      });
      assert.deepEqual(
        [unknown.status, (unknown.json as { message: string }).message],
        [404, 'workflow job with id 999999'],
        'a job of another run or none',
      );
      const rerun = await s.api('POST', `/repos/acme/app/actions/runs/${runId}/jobs/${build.id}/rerun`, {
        token: owner.token,
      });
      assert.equal(rerun.status, 201, rerun.text);
      const body = rerun.json as {
        id: number;
        run_id: number;
        run_attempt: number;
        status: string;
        conclusion: string;
        name: string;
        url: string;
      };
      assert.deepEqual(
        [body.id, body.run_id, body.run_attempt, body.status, body.name],
        [build.id, runId, 2, 'queued', 'build'],
      );
      assert.equal(body.url, `${s.rootUrl}api/v1/repos/acme/app/actions/jobs/${build.id}`);
      const waiting = await jobsOf(runId);
      assert.deepEqual(
        [waiting.get('build')?.attempt, waiting.get('build')?.task_id, waiting.get('build')?.status],
        [2, 0, 5],
      );
      assert.notEqual(waiting.get('build')?.handle, build.handle, 'a new handle names the new attempt');
      assert.deepEqual(
        [waiting.get('test')?.attempt, waiting.get('test')?.status],
        [2, 7],
        'the dependant is blocked again',
      );
      assert.equal((await getRun(runId)).status, 'waiting');

      const second = await runNext('rc-rerun', { build: Result.SUCCESS });
      assert.notEqual(second.id, first.id);
      assert.equal(second.context.run_attempt, '2', 'github.run_attempt is the job attempt');
      const claimed = await jobsOf(runId);
      assert.deepEqual([claimed.get('build')?.attempt, claimed.get('build')?.task_id], [2, second.id]);
      const third = await runNext('rc-rerun', { test: Result.SUCCESS });
      assert.equal(third.context.run_attempt, '2');
      assert.equal((await getRun(runId)).status, 'success');

      const statuses = await taskStatuses();
      assert.equal(statuses.get(first.id), 'failure', 'the first attempt is still listed');
      assert.equal(statuses.get(second.id), 'success');
      const attempts = await db()
        .selectFrom('action_task')
        .select(['id', 'attempt'])
        .where('job_id', '=', build.id)
        .orderBy('id')
        .execute();
      assert.deepEqual(attempts, [
        { id: first.id, attempt: 1 },
        { id: second.id, attempt: 2 },
      ]);
      // Each attempt keeps its own log: ?attempt=1 reads the first task's, the default the current one's.
      const logOf = async (query: string) => {
        const res = await s.api('GET', `/repos/acme/app/actions/jobs/${build.id}/logs${query}`, { token: owner.token });
        assert.equal(res.status, 200, `${query}: ${res.text}`);
        return res.text;
      };
      assert.match(await logOf('?attempt=1'), new RegExp(`Z build output of task ${first.id}\n$`));
      assert.match(await logOf('?attempt=2'), new RegExp(`Z build output of task ${second.id}\n$`));
      assert.equal(await logOf(''), await logOf('?attempt=2'), 'without ?attempt, the current attempt');
    });

    test('rerun-failed-jobs reruns failed and cancelled jobs and their dependants only; rerun reruns all', async () => {
      const runId = await dispatch('failed.yml');
      const results = { ok: Result.SUCCESS, bad: Result.FAILURE };
      await runNext('rc-failed', results);
      await runNext('rc-failed', results);
      assert.equal((await getRun(runId)).status, 'failure');
      const before = await jobsOf(runId);

      const failed = await s.api('POST', `/repos/acme/app/actions/runs/${runId}/rerun-failed-jobs`, {
        token: writer.token,
      });
      assert.equal(failed.status, 201, failed.text);
      assert.deepEqual([(failed.json as RunJson).id, (failed.json as RunJson).status], [runId, 'waiting']);
      const jobs = await jobsOf(runId);
      assert.deepEqual(
        ['ok', 'bad', 'after'].map((id) => [id, jobs.get(id)?.attempt, jobs.get(id)?.status, jobs.get(id)?.task_id]),
        [
          ['ok', 1, 1, before.get('ok')?.task_id],
          ['bad', 2, 5, 0],
          ['after', 2, 7, 0],
        ],
      );
      // Nothing failed any more: the same call is refused once the run is done again.
      await runNext('rc-failed', { bad: Result.SUCCESS });
      await runNext('rc-failed', { after: Result.SUCCESS });
      assert.equal((await getRun(runId)).status, 'success');
      const none = await s.api('POST', `/repos/acme/app/actions/runs/${runId}/rerun-failed-jobs`, {
        token: owner.token,
      });
      assert.deepEqual(
        [none.status, none.json],
        [400, errorBody(s.rootUrl, 'this workflow run has no failed jobs to re-run')],
      );

      const all = await s.api('POST', `/repos/acme/app/actions/runs/${runId}/rerun`, { token: owner.token });
      assert.equal(all.status, 201, all.text);
      const again = await jobsOf(runId);
      assert.deepEqual(
        ['ok', 'bad', 'after'].map((id) => [id, again.get(id)?.attempt, again.get(id)?.status]),
        [
          ['ok', 2, 5],
          ['bad', 3, 5],
          ['after', 3, 7],
        ],
      );
    });

    test('rerun or delete of an unfinished run is refused with 400; delete of a finished run removes it, its jobs, tasks and log files', async () => {
      const runId = await dispatch('delete.yml');
      for (const [method, suffix] of [
        ['POST', '/rerun'],
        ['POST', '/rerun-failed-jobs'],
        ['DELETE', ''],
      ] as const) {
        const res = await s.api(method, `/repos/acme/app/actions/runs/${runId}${suffix}`, { token: owner.token });
        assert.deepEqual(
          [res.status, res.json],
          [400, errorBody(s.rootUrl, 'this workflow run is not done')],
          `${method} ${suffix} of a waiting run`,
        );
      }
      const client = await runner('rc-delete');
      const task = await fetchOne(client);
      const job = (await jobsOf(runId)).get('work') as JobRow;
      const jobRerun = await s.api('POST', `/repos/acme/app/actions/runs/${runId}/jobs/${job.id}/rerun`, {
        token: owner.token,
      });
      assert.deepEqual([jobRerun.status, jobRerun.json], [400, errorBody(s.rootUrl, 'this workflow run is not done')]);
      assert.equal(
        (await s.api('DELETE', `/repos/acme/app/actions/runs/${runId}`, { token: owner.token })).status,
        400,
        'a running run',
      );
      await client.runner.updateLog({
        taskId: BigInt(task.id),
        index: 0n,
        rows: [{ time: now(), content: 'hello' }],
        noMore: true,
      });
      assert.equal(await finish(client, task.id, Result.SUCCESS), Result.SUCCESS);
      const logName = `${repoId}/${(task.id % 256).toString(16).padStart(2, '0')}/${task.id}.log.gz`;
      const logFile = path.join(s.dataDir, 'actions_log', ...logName.split('/'));
      assert.ok(existsSync(logFile), 'the archived log exists');

      const deleted = await s.api('DELETE', `/repos/acme/app/actions/runs/${runId}`, { token: owner.token });
      assert.equal(deleted.status, 204, deleted.text);
      assert.equal(
        (await actionRun({ client: owner.client, path: { owner: 'acme', repo: 'app', run_id: runId } })).status,
        404,
      );
      assert.equal((await taskStatuses()).has(task.id), false, 'its task is gone from the tasks list');
      assert.equal((await jobsOf(runId)).size, 0);
      assert.equal(existsSync(logFile), false, 'its log file is removed');
      assert.equal(
        (await s.api('DELETE', `/repos/acme/app/actions/runs/${runId}`, { token: owner.token })).status,
        404,
      );
      const otherJob = await s.api('POST', `/repos/acme/app/actions/runs/${runId}/jobs/${job.id}/rerun`, {
        token: owner.token,
      });
      assert.equal(otherJob.status, 404);
    });

    test('a run whose workflow does not parse at its commit is not rerun (400)', async () => {
      const list = await s.api('GET', '/repos/acme/app/actions/runs?workflow_id=broken.yml', { token: owner.token });
      assert.equal(list.status, 200, list.text);
      const [run] = (list.json as { workflow_runs: Array<RunJson & { pre_execution_error: string }> }).workflow_runs;
      assert.ok(run, 'the push created a failed run for the broken workflow');
      assert.equal(run.status, 'failure');
      assert.notEqual(run.pre_execution_error, '');
      for (const suffix of ['/rerun', '/rerun-failed-jobs']) {
        const res = await s.api('POST', `/repos/acme/app/actions/runs/${run.id}${suffix}`, { token: owner.token });
        assert.deepEqual([res.status, res.json], [400, errorBody(s.rootUrl, 'workflow broken.yml is invalid')], suffix);
      }
    });

    test('a run of a disabled workflow is not rerun (400); enabled again, it is', async () => {
      const runId = await dispatch('disabled.yml');
      await runNext('rc-disabled', { work: Result.FAILURE });
      const disable = await s.api('PUT', '/repos/acme/app/actions/workflows/disabled.yml/disable', {
        token: owner.token,
      });
      assert.equal(disable.status, 204, disable.text);
      for (const suffix of ['/rerun', '/rerun-failed-jobs']) {
        const res = await s.api('POST', `/repos/acme/app/actions/runs/${runId}${suffix}`, { token: owner.token });
        assert.deepEqual(
          [res.status, res.json],
          [400, errorBody(s.rootUrl, 'workflow disabled.yml is disabled')],
          suffix,
        );
      }
      assert.equal(
        (await s.api('PUT', '/repos/acme/app/actions/workflows/disabled.yml/enable', { token: owner.token })).status,
        204,
      );
      const rerun = await s.api('POST', `/repos/acme/app/actions/runs/${runId}/rerun`, { token: owner.token });
      assert.equal(rerun.status, 201, rerun.text);
    });

    test('permissions: read access may not cancel or rerun (403), strangers see nothing (404), writers may, delete needs admin', async () => {
      const runId = await dispatch('perm.yml');
      await runNext('rc-perm', { work: Result.FAILURE });
      const readOnlyToken = await s.tokenFor(owner, ['read:repository', 'read:organization']);
      const cases: Array<[string, string, string, number]> = [
        ['reader', reader.token, 'POST /cancel', 403],
        ['reader', reader.token, 'POST /rerun', 403],
        ['reader', reader.token, 'DELETE ', 403],
        ['read-only token of the owner', readOnlyToken, 'POST /cancel', 403],
        ['read-only token of the owner', readOnlyToken, 'DELETE ', 403],
        ['outsider', outsider.token, 'POST /cancel', 404],
        ['outsider', outsider.token, 'POST /rerun', 404],
        ['outsider', outsider.token, 'DELETE ', 404],
        ['writer', writer.token, 'DELETE ', 403],
        ['writer', writer.token, 'POST /cancel', 204],
      ];
      for (const [who, token, call, expected] of cases) {
        const [method, suffix] = call.split(' ') as [string, string];
        const res = await s.api(method, `/repos/acme/app/actions/runs/${runId}${suffix}`, { token });
        assert.equal(res.status, expected, `${who}: ${call} → ${res.status} ${res.text}`);
      }
      const anonymous = await s.api('POST', `/repos/acme/app/actions/runs/${runId}/cancel`);
      assert.equal(anonymous.status, 404, 'a private repository does not exist for anonymous callers');
      const rerun = await s.api('POST', `/repos/acme/app/actions/runs/${runId}/rerun`, { token: writer.token });
      assert.equal(rerun.status, 201, rerun.text);
      assert.equal(
        (await s.api('POST', `/repos/acme/app/actions/runs/${runId}/cancel`, { token: writer.token })).status,
        204,
      );
      assert.equal(
        (await s.api('DELETE', `/repos/acme/app/actions/runs/${runId}`, { token: owner.token })).status,
        204,
        'the owner is admin',
      );
    });

    test('an attempt fires webhooks as a new run: workflow_run requested and workflow_job queued, both with run_attempt 2', async () => {
      const runId = await dispatch('hooks.yml');
      await runNext('rc-hooks', { work: Result.FAILURE });
      const ofRun = (event: string) =>
        receiver.received
          .filter((d) => d.headers['x-forgejo-event'] === event)
          .map((d) => d.json as Payload)
          .filter((p) => (p.workflow_run?.id ?? p.workflow_job?.run_id) === runId);
      // Deliveries run in parallel: wait for both rather than rely on their order.
      await receiver.waitFor(
        () =>
          ofRun('workflow_run').some((p) => p.action === 'completed') &&
          ofRun('workflow_run').some((p) => p.action === 'requested'),
      );
      assert.equal(ofRun('workflow_run').filter((p) => p.action === 'requested').length, 1);

      assert.equal(
        (await s.api('POST', `/repos/acme/app/actions/runs/${runId}/rerun`, { token: owner.token })).status,
        201,
      );
      await receiver.waitFor(() => ofRun('workflow_run').filter((p) => p.action === 'requested').length === 2);
      await receiver.waitFor(() =>
        ofRun('workflow_job').some((p) => p.action === 'queued' && p.workflow_job?.run_attempt === 2),
      );
      await runNext('rc-hooks', { work: Result.SUCCESS });
      await receiver.waitFor(() =>
        ofRun('workflow_job').some((p) => p.action === 'completed' && p.workflow_job?.run_attempt === 2),
      );
      await receiver.waitFor(() => ofRun('workflow_run').filter((p) => p.action === 'completed').length === 2);
      assert.deepEqual(
        ofRun('workflow_run')
          .filter((p) => p.action !== 'in_progress')
          .map((p) => [p.action, p.workflow_run?.run_attempt])
          .sort(),
        [
          ['completed', 1],
          ['completed', 2],
          ['requested', 1],
          ['requested', 2],
        ],
        "workflow_run carries the run's attempt (Gitea's ToActionWorkflowRun), 2 after the rerun",
      );
      const listed = await s.api('GET', '/repos/acme/app/actions/workflows/hooks.yml/runs', { token: owner.token });
      const entry = (listed.json as { workflow_runs: Array<{ id: number; run_attempt: number }> }).workflow_runs.find(
        (r) => r.id === runId,
      );
      assert.equal(entry?.run_attempt, 2, "the workflow's runs list says the same");
    });
  });
}
