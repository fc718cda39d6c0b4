// Workflow-level `concurrency:` as a user and a runner see it (Forgejo 15):
// cancel-in-progress cancels the older run of the group exactly as the cancel
// API does (the runner mid-job gets RESULT_CANCELLED, webhooks fire), the
// legacy auto-cancel of superseded push runs, and queue-behind groups, whose
// runs go one at a time, oldest first, the queued ones listed `waiting`.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { actionRun } from '@llamaduck/forgejo-ts';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { DecodedTask } from '../support/runner-client.ts';
import { testDialects } from '../support/server.ts';
import { startOrgWorkflows } from '../support/org-workflows.ts';
import type { OrgWorkflows } from '../support/org-workflows.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import type { WebhookReceiver } from '../support/webhook-receiver.ts';
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
    let f: OrgWorkflows;
    let s: TestServer;
    let owner: TestUser;
    let work: WorkDir;
    let receiver: WebhookReceiver;
    // The fixture's helpers under short names.
    const dispatch: OrgWorkflows['dispatch'] = (...a) => f.dispatch(...a);
    const runner: OrgWorkflows['runner'] = (...a) => f.runner(...a);
    const fetchOne: OrgWorkflows['fetchOne'] = (...a) => f.fetchOne(...a);
    const fetchNone: OrgWorkflows['fetchNone'] = (...a) => f.fetchNone(...a);
    const heartbeat: OrgWorkflows['heartbeat'] = (...a) => f.heartbeat(...a);
    const finish: OrgWorkflows['finish'] = (...a) => f.finish(...a);

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

    /** The run id a task belongs to (the runner's github.run_id). */
    const runOfTask = (task: DecodedTask): number => Number(task.context.run_id);

    before(async () => {
      f = await startOrgWorkflows(dialect, { workflows: WORKFLOWS, hookEvents: ['workflow_run'] });
      ({ s, owner, work, receiver } = f);
    });

    after(async () => {
      await f?.stop();
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
