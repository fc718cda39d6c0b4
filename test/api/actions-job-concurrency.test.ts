// Job-level `concurrency:` as a user and a runner see it (Gitea 1.26's rules,
// services/actions/job-concurrency.ts): one job of a group runs and one waits,
// shown `blocked` and handed to no runner, while the run's other jobs go on; a
// newer job cancels the waiting one (webhooks fire); cancel-in-progress cancels the older job
// exactly as the cancel API does (the runner mid-job gets RESULT_CANCELLED,
// webhooks fire); the group may read `needs` and `matrix`; a group that does
// not evaluate fails its job and says why in its log.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { DecodedTask } from '../support/runner-client.ts';
import { testDialects } from '../support/server.ts';
import { startOrgWorkflows } from '../support/org-workflows.ts';
import type { OrgWorkflows } from '../support/org-workflows.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import type { WebhookReceiver } from '../support/webhook-receiver.ts';

const steps = '    steps:\n      - run: echo\n';

const WORKFLOWS: Record<string, string> = {
  // `deploy` queues in a group named from an input (case-insensitive); `lint` has no group.
  'queue.yml':
    'on:\n  workflow_dispatch:\n    inputs:\n      env: { required: true }\njobs:\n' +
    '  deploy:\n    runs-on: jc-deploy\n    concurrency:\n      group: deploy-${{ inputs.env }}\n      cancel-in-progress: false\n' +
    steps +
    '  lint:\n    runs-on: jc-lint\n' +
    steps,
  // Cancel in progress, the group from the github context.
  'live.yml':
    'on: workflow_dispatch\njobs:\n  ship:\n    runs-on: jc-live\n    concurrency:\n      group: live-${{ github.workflow }}\n      cancel-in-progress: true\n' +
    steps,
  // The group reads the output of a needed job, and the matrix.
  'needs.yml':
    'on: workflow_dispatch\njobs:\n  build:\n    runs-on: jc-build\n' +
    steps +
    '  push:\n    needs: build\n    runs-on: jc-push\n    strategy:\n      matrix:\n        arch: [arm, x86]\n' +
    '    concurrency: push-${{ needs.build.outputs.target }}-${{ matrix.arch }}\n' +
    steps,
  // A workflow group that queues, around a job group.
  'both.yml':
    'on: workflow_dispatch\nconcurrency:\n  group: wf\n  cancel-in-progress: false\njobs:\n  j:\n    runs-on: jc-both\n    concurrency: jg\n' +
    steps,
  // A group that does not evaluate; `fine` is not affected.
  'bad.yml':
    "on: workflow_dispatch\njobs:\n  bad:\n    runs-on: jc-bad\n    concurrency:\n      group: ${{ fromJSON('{') }}\n" +
    steps +
    '  fine:\n    runs-on: jc-bad\n' +
    steps,
};

interface JobJson {
  id: number;
  name: string;
  status: string;
}

interface Payload {
  action: string;
  workflow_job?: { id: number; conclusion: string | null };
}

for (const dialect of testDialects()) {
  describe(`job concurrency groups [${dialect}]`, () => {
    let f: OrgWorkflows;
    let s: TestServer;
    let owner: TestUser;
    let receiver: WebhookReceiver;
    // The fixture's helpers under short names.
    const dispatch: OrgWorkflows['dispatch'] = (...a) => f.dispatch(...a);
    const runner: OrgWorkflows['runner'] = (...a) => f.runner(...a);
    const fetchOne: OrgWorkflows['fetchOne'] = (...a) => f.fetchOne(...a);
    const fetchNone: OrgWorkflows['fetchNone'] = (...a) => f.fetchNone(...a);
    const heartbeat: OrgWorkflows['heartbeat'] = (...a) => f.heartbeat(...a);
    const finish: OrgWorkflows['finish'] = (...a) => f.finish(...a);

    const runStatus = async (runId: number): Promise<string> => {
      const res = await s.api('GET', `/repos/acme/app/actions/runs/${runId}`, { token: owner.token });
      assert.equal(res.status, 200, res.text);
      return (res.json as { status: string }).status;
    };

    const jobs = async (runId: number): Promise<JobJson[]> => {
      const res = await s.api('GET', `/repos/acme/app/actions/runs/${runId}/jobs`, { token: owner.token });
      assert.equal(res.status, 200, res.text);
      return res.json as JobJson[];
    };

    /** Job name → status. */
    const jobStatuses = async (runId: number): Promise<Record<string, string>> =>
      Object.fromEntries((await jobs(runId)).map((j) => [j.name, j.status]));

    const runOfTask = (task: DecodedTask): number => Number(task.context.run_id);

    before(async () => {
      f = await startOrgWorkflows(dialect, { workflows: WORKFLOWS, hookEvents: ['workflow_job'] });
      ({ s, owner, receiver } = f);
    });

    after(async () => {
      await f?.stop();
    });

    test('one job of a group runs and one waits, shown blocked: a newer job cancels the waiting one; the runs’ other jobs are not held', async () => {
      const deployer = await runner('jc-deploy');
      const linter = await runner('jc-lint');
      // `prod`, `Prod` and `PROD` are one group.
      const [a, b] = [await dispatch('queue.yml', { env: 'prod' }), await dispatch('queue.yml', { env: 'Prod' })] as [
        number,
        number,
      ];
      assert.deepEqual(await jobStatuses(a), { deploy: 'waiting', lint: 'waiting' });
      assert.deepEqual(await jobStatuses(b), { deploy: 'blocked', lint: 'waiting' }, 'only the grouped job waits');
      assert.equal(await runStatus(b), 'waiting');
      const heldJob = (await jobs(b)).find((j) => j.name === 'deploy');
      assert.ok(heldJob);
      // The newest job replaces the pending one, as in Gitea and GitHub.
      const c = await dispatch('queue.yml', { env: 'PROD' });
      assert.deepEqual(await jobStatuses(b), { deploy: 'cancelled', lint: 'waiting' }, 'the pending job is cancelled');
      assert.deepEqual(await jobStatuses(c), { deploy: 'blocked', lint: 'waiting' });
      assert.deepEqual(await jobStatuses(a), { deploy: 'waiting', lint: 'waiting' }, 'the first is kept');
      await receiver.waitFor((received) =>
        received.some((d) => {
          const p = d.json as Payload;
          return (
            p.action === 'completed' && p.workflow_job?.id === heldJob.id && p.workflow_job.conclusion === 'cancelled'
          );
        }),
      );
      const elsewhere = await dispatch('queue.yml', { env: 'staging' });
      // Every run's lint is handed out at once: they are in no group.
      const lints = [];
      for (let i = 0; i < 4; i += 1) {
        const task = await fetchOne(linter);
        lints.push(runOfTask(task));
        assert.equal(await finish(linter, task.id, Result.SUCCESS), Result.SUCCESS);
      }
      assert.deepEqual(
        lints.sort((x, y) => x - y),
        [a, b, c, elsewhere],
      );
      await fetchNone(linter);
      assert.equal(await runStatus(b), 'cancelled');

      const first = await fetchOne(deployer);
      const side = await fetchOne(deployer);
      assert.deepEqual(
        [runOfTask(first), runOfTask(side)].sort((x, y) => x - y),
        [a, elsewhere],
        'the first of the group and the other group’s job',
      );
      await fetchNone(deployer);
      const own = runOfTask(first) === a ? first : side;
      const other = own === first ? side : first;
      assert.equal(await finish(deployer, other.id, Result.SUCCESS), Result.SUCCESS);
      await fetchNone(deployer);
      assert.equal(await finish(deployer, own.id, Result.FAILURE), Result.FAILURE);
      const last = await fetchOne(deployer);
      assert.equal(runOfTask(last), c, 'the newest runs after the first, even after a failure');
      assert.equal((await jobStatuses(c)).deploy, 'running');
      await fetchNone(deployer);
      assert.equal(await finish(deployer, last.id, Result.SUCCESS), Result.SUCCESS);
      assert.equal(await runStatus(c), 'success');
      await fetchNone(deployer);
    });

    test('cancelling a held job passes it over; the group goes on with the next', async () => {
      const deployer = await runner('jc-deploy');
      const linter = await runner('jc-lint');
      const [a, b] = [
        await dispatch('queue.yml', { env: 'cancel' }),
        await dispatch('queue.yml', { env: 'cancel' }),
      ] as [number, number];
      const running = await fetchOne(deployer);
      assert.equal(runOfTask(running), a);
      assert.equal(
        (await s.api('POST', `/repos/acme/app/actions/runs/${b}/cancel`, { token: owner.token })).status,
        204,
      );
      assert.deepEqual(await jobStatuses(b), { deploy: 'cancelled', lint: 'cancelled' });
      const c = await dispatch('queue.yml', { env: 'cancel' });
      assert.deepEqual(await jobStatuses(c), { deploy: 'blocked', lint: 'waiting' });
      await fetchNone(deployer);
      assert.equal(await finish(deployer, running.id, Result.SUCCESS), Result.SUCCESS);
      const next = await fetchOne(deployer);
      assert.equal(runOfTask(next), c, 'the cancelled job is passed over');
      assert.equal(await finish(deployer, next.id, Result.SUCCESS), Result.SUCCESS);
      for (let i = 0; i < 2; i += 1) {
        const task = await fetchOne(linter);
        assert.equal(await finish(linter, task.id, Result.SUCCESS), Result.SUCCESS);
      }
      await fetchNone(linter);
    });

    test('cancel-in-progress cancels the older job of the group while its runner is mid-job', async () => {
      const client = await runner('jc-live');
      const first = await dispatch('live.yml');
      const task = await fetchOne(client);
      assert.equal(runOfTask(task), first);
      assert.equal(await heartbeat(client, task.id), Result.UNSPECIFIED, 'the job runs');
      const [firstJob] = await jobs(first);
      assert.ok(firstJob);

      const second = await dispatch('live.yml');
      // The runner learns it at its next UpdateTask, as after POST …/cancel.
      assert.equal(await heartbeat(client, task.id), Result.CANCELLED);
      assert.deepEqual(await jobStatuses(first), { ship: 'cancelled' });
      assert.equal(await runStatus(first), 'cancelled');
      assert.deepEqual(await jobStatuses(second), { ship: 'waiting' });
      await receiver.waitFor((received) =>
        received.some((d) => {
          const p = d.json as Payload;
          return (
            p.action === 'completed' && p.workflow_job?.id === firstJob.id && p.workflow_job.conclusion === 'cancelled'
          );
        }),
      );
      const next = await fetchOne(client);
      assert.equal(runOfTask(next), second);

      // A rerun of the first run's job is a newer member: it cancels the running one.
      const rerun = await s.api('POST', `/repos/acme/app/actions/runs/${first}/rerun`, { token: owner.token });
      assert.equal(rerun.status, 201, rerun.text);
      assert.equal(await heartbeat(client, next.id), Result.CANCELLED);
      assert.deepEqual(await jobStatuses(second), { ship: 'cancelled' });
      const again = await fetchOne(client);
      assert.equal(runOfTask(again), first);
      assert.equal(await finish(client, again.id, Result.SUCCESS), Result.SUCCESS);
      assert.equal(await runStatus(first), 'success');
    });

    test('a group may read needs outputs and the matrix: legs of different groups are not held', async () => {
      const builder = await runner('jc-build');
      const pusher = await runner('jc-push');
      const a = await dispatch('needs.yml');
      const b = await dispatch('needs.yml');
      const buildA = await fetchOne(builder);
      const buildB = await fetchOne(builder);
      assert.equal(runOfTask(buildA), a);
      assert.equal(await finish(builder, buildA.id, Result.SUCCESS, { target: 'Eu' }), Result.SUCCESS);
      assert.equal(await finish(builder, buildB.id, Result.SUCCESS, { target: 'EU' }), Result.SUCCESS);
      // push-eu-arm and push-eu-x86: run a's legs go, run b's legs wait behind them.
      assert.deepEqual(Object.values(await jobStatuses(a)).sort(), ['success', 'waiting', 'waiting']);
      assert.deepEqual(Object.values(await jobStatuses(b)).sort(), ['blocked', 'blocked', 'success']);
      const legs = [await fetchOne(pusher), await fetchOne(pusher)];
      assert.deepEqual(legs.map(runOfTask), [a, a]);
      await fetchNone(pusher);
      for (const leg of legs) assert.equal(await finish(pusher, leg.id, Result.SUCCESS), Result.SUCCESS);
      const later = [await fetchOne(pusher), await fetchOne(pusher)];
      assert.deepEqual(later.map(runOfTask), [b, b]);
      for (const leg of later) assert.equal(await finish(pusher, leg.id, Result.SUCCESS), Result.SUCCESS);
      assert.equal(await runStatus(b), 'success');
    });

    test('a rerun job is admitted to its group again: held behind the running member', async () => {
      const deployer = await runner('jc-deploy');
      const linter = await runner('jc-lint');
      // Lint jobs the earlier tests left.
      for (;;) {
        const res = await linter.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 1200 });
        if (res.task === undefined) break;
        assert.equal(await finish(linter, Number(res.task.id), Result.SUCCESS), Result.SUCCESS);
      }
      const a = await dispatch('queue.yml', { env: 'rerun' });
      for (const client of [deployer, linter]) {
        const task = await fetchOne(client);
        assert.equal(runOfTask(task), a);
        assert.equal(await finish(client, task.id, Result.SUCCESS), Result.SUCCESS);
      }
      assert.equal(await runStatus(a), 'success');
      const b = await dispatch('queue.yml', { env: 'rerun' });
      const running = await fetchOne(deployer);
      assert.equal(runOfTask(running), b);
      const rerun = await s.api('POST', `/repos/acme/app/actions/runs/${a}/rerun`, { token: owner.token });
      assert.equal(rerun.status, 201, rerun.text);
      assert.deepEqual(await jobStatuses(a), { deploy: 'blocked', lint: 'waiting' });
      await fetchNone(deployer);
      assert.equal(await finish(deployer, running.id, Result.SUCCESS), Result.SUCCESS);
      const again = await fetchOne(deployer);
      assert.equal(runOfTask(again), a);
      assert.equal(await finish(deployer, again.id, Result.SUCCESS), Result.SUCCESS);
      for (let i = 0; i < 2; i += 1) {
        const task = await fetchOne(linter);
        assert.equal(await finish(linter, task.id, Result.SUCCESS), Result.SUCCESS);
      }
      assert.equal(await runStatus(a), 'success');
      assert.equal(await runStatus(b), 'success');
    });

    test('a run queued behind its workflow group is admitted to its job group only when it starts', async () => {
      const client = await runner('jc-both');
      const a = await dispatch('both.yml');
      const b = await dispatch('both.yml');
      assert.deepEqual(await jobStatuses(b), { j: 'waiting' }, 'held with its run, shown waiting as Forgejo does');
      const first = await fetchOne(client);
      assert.equal(runOfTask(first), a);
      await fetchNone(client);
      assert.equal(await finish(client, first.id, Result.SUCCESS), Result.SUCCESS);
      const second = await fetchOne(client);
      assert.equal(runOfTask(second), b);
      // A rerun of the finished run queues behind the running one with its run, as a new run does.
      const rerun = await s.api('POST', `/repos/acme/app/actions/runs/${a}/rerun`, { token: owner.token });
      assert.equal(rerun.status, 201, rerun.text);
      assert.deepEqual(await jobStatuses(a), { j: 'waiting' }, 'held with its run, not by its job group');
      await fetchNone(client);
      assert.equal(await finish(client, second.id, Result.SUCCESS), Result.SUCCESS);
      assert.equal(await runStatus(b), 'success');
      const again = await fetchOne(client);
      assert.equal(runOfTask(again), a);
      assert.equal(await finish(client, again.id, Result.SUCCESS), Result.SUCCESS);
      assert.equal(await runStatus(a), 'success');
    });

    test('a group that does not evaluate fails its job and says why in its log; the run goes on', async () => {
      const id = await dispatch('bad.yml');
      assert.deepEqual(await jobStatuses(id), { bad: 'failure', fine: 'waiting' });
      const bad = (await jobs(id)).find((j) => j.name === 'bad');
      assert.ok(bad);
      const log = await s.api('GET', `/repos/acme/app/actions/jobs/${bad.id}/logs`, { token: owner.token });
      assert.equal(log.status, 200, log.text);
      assert.match(log.text, /unable to evaluate job `concurrency` block: cannot evaluate/);
      const client = await runner('jc-bad');
      const task = await fetchOne(client);
      assert.equal(runOfTask(task), id);
      await fetchNone(client);
      assert.equal(await finish(client, task.id, Result.SUCCESS), Result.SUCCESS);
      assert.equal(await runStatus(id), 'failure');
    });
  });
}
