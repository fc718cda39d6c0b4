// Workflow-level `concurrency:` as a user and a runner see it (Forgejo 15):
// cancel-in-progress cancels the older run of the group exactly as the cancel
// API does (the runner mid-job gets RESULT_CANCELLED, webhooks fire), the
// legacy auto-cancel of superseded push runs, and queue-behind groups, whose
// runs go one at a time, oldest first, the queued ones listed `waiting`.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { actionRun } from '@llamaduck/forgejo-ts';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { createRunnerClient, decodeTask } from '../support/runner-client.ts';
import type { DecodedTask, RunnerClient } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { startWebhookReceiver } from '../support/webhook-receiver.ts';
import type { WebhookReceiver } from '../support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

const job = (label: string): string =>
  `jobs:\n  work:\n    runs-on: ${label}\n    steps:\n      - run: echo ${label}\n`;

const WORKFLOWS: Record<string, string> = {
  // Pushes to any branch but main; the group names the branch.
  'deploy.yml':
    'on:\n  push:\n    branches-ignore: [main]\nconcurrency:\n  group: deploy-${{ github.ref_name }}\n  cancel-in-progress: true\n' +
    job('cc-cancel'),
  // No concurrency block: Forgejo's legacy auto-cancel of an older push run of the same ref and workflow.
  'legacy.yml': 'on:\n  push:\n    branches: [legacy-*]\n' + job('cc-legacy'),
  // Queue behind, the group from an input (groups are case-insensitive).
  'queue.yml':
    'on:\n  workflow_dispatch:\n    inputs:\n      env: { required: true }\nconcurrency:\n  group: release-${{ inputs.env }}\n  cancel-in-progress: false\n' +
    job('cc-queue'),
  // A dispatch without cancel-in-progress: unlimited, its runs run side by side.
  'free.yml': 'on: workflow_dispatch\nconcurrency: free\n' + job('cc-free'),
  // A group that does not evaluate.
  'badgroup.yml': "on: workflow_dispatch\nconcurrency:\n  group: ${{ fromJSON('{') }}\n" + job('cc-bad'),
};

const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });

interface RunJson {
  id: number;
  status: string;
}

interface Payload {
  action: string;
  workflow_run?: { id: number; conclusion: string | null };
}

for (const dialect of testDialects()) {
  describe(`workflow concurrency groups [${dialect}]`, () => {
    let s: TestServer;
    let owner: TestUser;
    let work: WorkDir;
    let registrationToken: string;
    let receiver: WebhookReceiver;
    const runners = new Map<string, RunnerClient>();

    const dispatch = async (file: string, inputs: Record<string, string> = {}): Promise<number> => {
      const res = await s.api('POST', `/repos/acme/app/actions/workflows/${file}/dispatches`, {
        token: owner.token,
        body: { ref: 'main', inputs, return_run_info: true },
      });
      assert.equal(res.status, 201, res.text);
      return (res.json as { id: number }).id;
    };

    const getRun = async (runId: number): Promise<RunJson> => {
      const res = await actionRun({ client: owner.client, path: { owner: 'acme', repo: 'app', run_id: runId } });
      assert.equal(res.status, 200);
      return res.data as unknown as RunJson;
    };

    const jobStatuses = async (runId: number): Promise<string[]> => {
      const res = await s.api('GET', `/repos/acme/app/actions/runs/${runId}/jobs`, { token: owner.token });
      assert.equal(res.status, 200, res.text);
      return (res.json as Array<{ status: string }>).map((j) => j.status);
    };

    /** The newest run of a workflow (push runs have no dispatch answer to name them). */
    const latestRun = async (workflow: string): Promise<RunJson> => {
      const res = await s.api('GET', `/repos/acme/app/actions/runs?workflow_id=${workflow}&limit=1`, {
        token: owner.token,
      });
      assert.equal(res.status, 200, res.text);
      const run = (res.json as { workflow_runs: RunJson[] }).workflow_runs[0];
      assert.ok(run, `a run of ${workflow}`);
      return run;
    };

    const runner = async (label: string): Promise<RunnerClient> => {
      const existing = runners.get(label);
      if (existing) return existing;
      const client = createRunnerClient(s.url);
      const res = await client.runner.register({
        name: `runner-${label}`,
        token: registrationToken,
        version: 'v12.0.0',
        labels: [label],
      });
      assert.ok(res.runner);
      client.credentials = { id: Number(res.runner.id), uuid: res.runner.uuid, token: res.runner.token };
      runners.set(label, client);
      return client;
    };

    const fetchOne = async (client: RunnerClient): Promise<DecodedTask> => {
      const res = await client.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(res.task, 'a task');
      return decodeTask(res.task as Task);
    };

    const fetchNone = async (client: RunnerClient): Promise<void> => {
      const res = await client.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 1200 });
      assert.equal(res.task, undefined, 'no task is handed out');
    };

    const heartbeat = async (client: RunnerClient, taskId: number): Promise<Result | undefined> =>
      (
        await client.runner.updateTask({
          state: { id: BigInt(taskId), result: Result.UNSPECIFIED, startedAt: now(), steps: [] },
        })
      ).state?.result;

    const finish = async (client: RunnerClient, taskId: number, result: Result): Promise<Result | undefined> =>
      (
        await client.runner.updateTask({
          state: { id: BigInt(taskId), result, startedAt: now(), stoppedAt: now(), steps: [] },
        })
      ).state?.result;

    /** The run id a task belongs to (the runner's github.run_id). */
    const runOfTask = (task: DecodedTask): number => Number(task.context.run_id);

    before(async () => {
      s = await startTestServer(dialect, { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' });
      owner = await s.createUser('owner');
      receiver = await startWebhookReceiver();
      assert.equal((await s.api('POST', '/orgs', { token: owner.token, body: { username: 'acme' } })).status, 201);
      const repo = await s.api('POST', '/orgs/acme/repos', { token: owner.token, body: { name: 'app' } });
      assert.equal(repo.status, 201, repo.text);
      const hook = await s.api('POST', '/orgs/acme/hooks', {
        token: owner.token,
        body: {
          type: 'forgejo',
          config: { url: `${receiver.url}/hook`, content_type: 'json' },
          events: ['workflow_run'],
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

    test('a push with cancel-in-progress: true cancels the older run of its group while its runner is mid-job', async () => {
      await work.commit({ 'a.txt': '1' }, 'first');
      assert.equal((await work.push('HEAD:refs/heads/feature')).code, 0);
      const first = await latestRun('deploy.yml');
      const client = await runner('cc-cancel');
      const task = await fetchOne(client);
      assert.equal(runOfTask(task), first.id);
      assert.equal(await heartbeat(client, task.id), Result.UNSPECIFIED, 'the job runs');

      // A push to another branch is another group: the running job is left alone.
      await work.commit({ 'a.txt': '2' }, 'elsewhere');
      assert.equal((await work.push('HEAD:refs/heads/other')).code, 0);
      assert.equal(await heartbeat(client, task.id), Result.UNSPECIFIED);
      const other = await latestRun('deploy.yml');
      assert.notEqual(other.id, first.id);

      await work.commit({ 'a.txt': '3' }, 'second');
      assert.equal((await work.push('HEAD:refs/heads/feature')).code, 0);
      const second = await latestRun('deploy.yml');
      assert.notEqual(second.id, other.id);

      // The runner learns it at its next UpdateTask, as after POST …/cancel.
      assert.equal(await heartbeat(client, task.id), Result.CANCELLED);
      assert.equal((await getRun(first.id)).status, 'cancelled');
      assert.deepEqual(await jobStatuses(first.id), ['cancelled']);
      assert.equal((await getRun(second.id)).status, 'waiting');
      assert.equal((await getRun(other.id)).status, 'waiting', 'the other branch is not touched');
      await receiver.waitFor((received) =>
        received.some((d) => {
          const p = d.json as Payload;
          return (
            p.action === 'completed' && p.workflow_run?.id === first.id && p.workflow_run.conclusion === 'cancelled'
          );
        }),
      );
      // The new runs are handed out.
      const next = [await fetchOne(client), await fetchOne(client)].map(runOfTask).sort((a, b) => a - b);
      assert.deepEqual(next, [other.id, second.id]);
    });

    test('a push run without concurrency cancels the older unfinished push run of its ref and workflow (legacy auto-cancel)', async () => {
      await work.commit({ 'b.txt': '1' }, 'legacy 1');
      assert.equal((await work.push('HEAD:refs/heads/legacy-1')).code, 0);
      const first = await latestRun('legacy.yml');
      await work.commit({ 'b.txt': '2' }, 'legacy 2');
      assert.equal((await work.push('HEAD:refs/heads/legacy-1')).code, 0);
      const second = await latestRun('legacy.yml');
      assert.notEqual(second.id, first.id);
      assert.equal((await getRun(first.id)).status, 'cancelled');
      assert.equal((await getRun(second.id)).status, 'waiting');
      const client = await runner('cc-legacy');
      assert.equal(runOfTask(await fetchOne(client)), second.id);
    });

    test('a queue-behind group runs its members one at a time, oldest first; the queued ones show waiting', async () => {
      const client = await runner('cc-queue');
      // `Prod` and `prod` are one group.
      const ids = [
        await dispatch('queue.yml', { env: 'prod' }),
        await dispatch('queue.yml', { env: 'Prod' }),
        await dispatch('queue.yml', { env: 'PROD' }),
      ];
      const elsewhere = await dispatch('queue.yml', { env: 'staging' });
      for (const id of ids.slice(1)) {
        assert.equal((await getRun(id)).status, 'waiting', 'a queued run is listed waiting');
        assert.deepEqual(await jobStatuses(id), ['waiting']);
      }
      const listed = await s.api('GET', '/repos/acme/app/actions/runs?status=waiting&workflow_id=queue.yml', {
        token: owner.token,
      });
      assert.equal(listed.status, 200);
      const waitingIds = (listed.json as { workflow_runs: RunJson[] }).workflow_runs.map((r) => r.id);
      for (const id of [...ids, elsewhere]) assert.ok(waitingIds.includes(id), `run ${id} listed as waiting`);

      const order: number[] = [];
      const first = await fetchOne(client);
      const second = await fetchOne(client);
      // The oldest of the group and the other group's run; nothing more while the first runs.
      assert.deepEqual(
        [runOfTask(first), runOfTask(second)].sort((a, b) => a - b),
        [ids[0], elsewhere],
      );
      await fetchNone(client);
      const own = runOfTask(first) === ids[0] ? first : second;
      const side = own === first ? second : first;
      order.push(runOfTask(own));
      assert.equal(await finish(client, side.id, Result.SUCCESS), Result.SUCCESS);
      await fetchNone(client);
      assert.equal(await finish(client, own.id, Result.SUCCESS), Result.SUCCESS);
      for (let i = 1; i < ids.length; i += 1) {
        const task = await fetchOne(client);
        order.push(runOfTask(task));
        assert.equal((await getRun(runOfTask(task))).status, 'running');
        await fetchNone(client);
        assert.equal(await finish(client, task.id, Result.FAILURE), Result.FAILURE, 'a failure releases the next too');
      }
      assert.deepEqual(order, ids, 'oldest first');
      assert.equal((await getRun(ids[2] as number)).status, 'failure');
    });

    test('cancelling a queued run cancels its jobs; the queue goes on with the next one; a rerun queues too', async () => {
      const client = await runner('cc-queue');
      const [a, b, c] = [
        await dispatch('queue.yml', { env: 'cancel' }),
        await dispatch('queue.yml', { env: 'cancel' }),
        await dispatch('queue.yml', { env: 'cancel' }),
      ] as [number, number, number];
      const running = await fetchOne(client);
      assert.equal(runOfTask(running), a);
      assert.equal(
        (await s.api('POST', `/repos/acme/app/actions/runs/${b}/cancel`, { token: owner.token })).status,
        204,
      );
      assert.equal((await getRun(b)).status, 'cancelled');
      assert.deepEqual(await jobStatuses(b), ['cancelled']);
      await fetchNone(client);
      assert.equal(await finish(client, running.id, Result.SUCCESS), Result.SUCCESS);
      const next = await fetchOne(client);
      assert.equal(runOfTask(next), c, 'the cancelled run is passed over');

      // A rerun of the finished run queues behind the running one (Forgejo: a rerun still waits).
      const rerun = await s.api('POST', `/repos/acme/app/actions/runs/${a}/rerun`, { token: owner.token });
      assert.equal(rerun.status, 201, rerun.text);
      assert.equal((rerun.json as RunJson).status, 'waiting');
      assert.deepEqual(await jobStatuses(a), ['waiting']);
      await fetchNone(client);
      assert.equal(await finish(client, next.id, Result.SUCCESS), Result.SUCCESS);
      const again = await fetchOne(client);
      assert.equal(runOfTask(again), a);
      assert.equal(await finish(client, again.id, Result.SUCCESS), Result.SUCCESS);
      assert.equal((await getRun(a)).status, 'success');
    });

    test('a dispatch without cancel-in-progress is unlimited: its runs run side by side', async () => {
      const client = await runner('cc-free');
      const a = await dispatch('free.yml');
      const b = await dispatch('free.yml');
      assert.equal((await getRun(a)).status, 'waiting');
      const tasks = [await fetchOne(client), await fetchOne(client)];
      assert.deepEqual(
        tasks.map(runOfTask).sort((x, y) => x - y),
        [a, b],
      );
      for (const task of tasks) await finish(client, task.id, Result.SUCCESS);
    });

    test('a concurrency group that does not evaluate fails the run and says why', async () => {
      const id = await dispatch('badgroup.yml');
      const run = await s.server.deps.database.db
        .selectFrom('action_run')
        .select(['status', 'pre_execution_error'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      assert.equal(run.status, 2);
      assert.match(run.pre_execution_error, /unable to evaluate workflow `concurrency` block/);
    });
  });
}
