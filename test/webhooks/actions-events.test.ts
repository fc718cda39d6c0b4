// Actions webhook events end to end: an org hook subscribed to workflow_run,
// workflow_job and Forgejo's action_run_* events receives them as a dispatched
// run goes from requested to completed on a real runner (Connect client):
// Gitea's status vocabulary (queued, waiting, in_progress, completed +
// conclusion), Forgejo's ActionPayload with prior_status and last_run, and
// `recover` only when a success follows a failure of the same workflow.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { createRunnerClient, decodeTask } from '../support/runner-client.ts';
import type { RunnerClient } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { startWebhookReceiver } from '../support/webhook-receiver.ts';
import type { ReceivedDelivery, WebhookReceiver } from '../support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

const WORKFLOW = [
  'on: workflow_dispatch',
  'jobs:',
  '  build:',
  '    runs-on: hooks-label',
  '    steps:',
  '      - run: echo build',
  '  test:',
  '    runs-on: hooks-label',
  '    needs: [build]',
  '    steps:',
  '      - run: echo test',
  '',
].join('\n');

const MATRIX = [
  'on: workflow_dispatch',
  'jobs:',
  '  leg:',
  '    runs-on: hooks-label',
  '    strategy:',
  '      matrix:',
  '        n: [1, 2]',
  '    steps:',
  '      - run: echo leg',
  '',
].join('\n');

const HOOK_EVENTS = ['workflow_run', 'workflow_job', 'action_run_success', 'action_run_failure', 'action_run_recover'];

const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });

interface Payload {
  action: string;
  workflow_run?: {
    id: number;
    status: string;
    conclusion: string;
    run_number: number;
    head_branch: string;
    path: string;
  };
  workflow_job?: {
    id: number;
    name: string;
    status: string;
    conclusion: string;
    labels: string[];
    runner_name: string;
    run_id: number;
    steps: Array<{ name: string; status: string }>;
  };
  workflow?: { id: string; path: string };
  run?: { id: number; status: string; index_in_repo: number; workflow_id: string };
  prior_status?: string;
  last_run?: { id: number; status: string } | null;
  repository?: { full_name: string };
  organization?: { username: string };
  sender?: { login: string };
}

function eventOf(d: ReceivedDelivery): string {
  return String(d.headers['x-forgejo-event']);
}

for (const dialect of testDialects()) {
  describe(`Actions webhook events [${dialect}]`, () => {
    let s: TestServer;
    let owner: TestUser;
    let receiver: WebhookReceiver;
    let work: WorkDir;
    let runner: RunnerClient;
    let orgHookId: number;

    const dispatch = async (): Promise<number> => {
      const res = await s.api('POST', '/repos/acme/app/actions/workflows/ci.yml/dispatches', {
        token: owner.token,
        body: { ref: 'main', return_run_info: true },
      });
      assert.equal(res.status, 201, res.text);
      return (res.json as { id: number }).id;
    };

    /** Claims and finishes every job of the run with `result` (dependants become claimable in turn). */
    const runJobs = async (results: Record<string, Result>): Promise<void> => {
      for (let done = 0; done < Object.keys(results).length; done += 1) {
        const res = await runner.runner.fetchTask({ tasksVersion: 0n });
        assert.ok(res.task, 'a task to run');
        const task = decodeTask(res.task as Task);
        const jobName = Object.keys(task.workflow.jobs)[0] ?? '';
        const result = results[jobName];
        assert.ok(result !== undefined, `unexpected job ${jobName}`);
        await runner.runner.updateTask({
          state: {
            id: BigInt(task.id),
            result,
            startedAt: now(),
            stoppedAt: now(),
            steps: [{ id: 0n, result, startedAt: now(), stoppedAt: now(), logIndex: 0n, logLength: 0n }],
          },
        });
        if (result !== Result.SUCCESS) break;
      }
    };

    /** What the organization's hook (at /hook), or the hook at `path`, received of the run. */
    const received = (runId: number, event: string, path = '/hook'): Payload[] =>
      receiver.received
        .filter((d) => eventOf(d) === event && d.path === path)
        .map((d) => d.json as Payload)
        .filter((p) => (p.workflow_run?.id ?? p.workflow_job?.run_id ?? p.run?.id) === runId);

    before(async () => {
      s = await startTestServer(dialect, { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' });
      owner = await s.createUser('owner');
      receiver = await startWebhookReceiver();
      assert.equal((await s.api('POST', '/orgs', { token: owner.token, body: { username: 'acme' } })).status, 201);
      assert.equal(
        (await s.api('POST', '/orgs/acme/repos', { token: owner.token, body: { name: 'app' } })).status,
        201,
      );
      const hook = await s.api('POST', '/orgs/acme/hooks', {
        token: owner.token,
        body: {
          type: 'forgejo',
          config: { url: `${receiver.url}/hook`, content_type: 'json' },
          events: HOOK_EVENTS,
          active: true,
        },
      });
      assert.equal(hook.status, 201, hook.text);
      orgHookId = (hook.json as { id: number }).id;
      assert.deepEqual((hook.json as { events: string[] }).events, [
        'action_run_failure',
        'action_run_recover',
        'action_run_success',
        'workflow_run',
        'workflow_job',
      ]);
      work = await createWorkDir(remoteUrl(s.url, 'acme', 'app', { user: 'owner', password: owner.password }));
      await work.commit({ '.forgejo/workflows/ci.yml': WORKFLOW, '.forgejo/workflows/matrix.yml': MATRIX }, 'CI');
      assert.equal((await work.push('main')).code, 0);
      const token = await s.api('GET', '/orgs/acme/actions/runners/registration-token', { token: owner.token });
      assert.equal(token.status, 200, token.text);
      runner = createRunnerClient(s.url);
      const registered = await runner.runner.register({
        name: 'hooks-runner',
        token: (token.json as { token: string }).token,
        version: 'v12',
        labels: ['hooks-label'],
      });
      assert.ok(registered.runner);
      runner.credentials = {
        id: Number(registered.runner.id),
        uuid: registered.runner.uuid,
        token: registered.runner.token,
      };
    });

    after(async () => {
      await work?.remove();
      await s?.stop();
      await receiver?.close();
    });

    test('a run that succeeds: workflow_run requested → in_progress → completed, workflow_job for each job change, action_run_success', async () => {
      const runId = await dispatch();
      await runJobs({ build: Result.SUCCESS, test: Result.SUCCESS });
      await receiver.waitFor(
        () =>
          received(runId, 'action_run_success').length === 1 &&
          received(runId, 'workflow_run').some((p) => p.action === 'completed'),
        20_000,
      );
      // Let stragglers (same transaction as the last ones) arrive.
      await receiver.waitFor(
        () => received(runId, 'workflow_job').filter((p) => p.action === 'completed').length === 2,
        10_000,
      );

      // Deliveries run in parallel: their order at the receiver is not the order of the events.
      const runs = received(runId, 'workflow_run');
      assert.deepEqual(runs.map((p) => p.action).sort(), ['completed', 'in_progress', 'requested']);
      const last = runs.find((p) => p.action === 'completed');
      assert.equal(last?.workflow_run?.status, 'completed');
      assert.equal(last?.workflow_run?.conclusion, 'success');
      assert.equal(last?.workflow_run?.head_branch, 'main');
      assert.equal(last?.workflow_run?.path, 'ci.yml@refs/heads/main');
      assert.equal(last?.workflow?.path, '.forgejo/workflows/ci.yml');
      assert.equal(last?.repository?.full_name, 'acme/app');
      assert.equal(last?.organization?.username, 'acme');
      assert.equal(last?.sender?.login, 'owner');

      const jobs = received(runId, 'workflow_job');
      const byJob = (name: string) =>
        jobs
          .filter((p) => p.workflow_job?.name === name)
          .map((p) => p.action)
          .sort();
      // build: queued at creation, in_progress when claimed, completed; test: waiting (blocked on build), queued when unblocked, …
      assert.deepEqual(byJob('build'), ['completed', 'in_progress', 'queued']);
      assert.deepEqual(byJob('test'), ['completed', 'in_progress', 'queued', 'waiting']);
      const finished = jobs.find((p) => p.workflow_job?.name === 'test' && p.action === 'completed')?.workflow_job;
      assert.equal(finished?.conclusion, 'success');
      assert.deepEqual(finished?.labels, ['hooks-label']);
      assert.equal(finished?.runner_name, 'hooks-runner');
      assert.ok((finished?.steps.length ?? 0) >= 1, 'the task steps are listed');

      const success = received(runId, 'action_run_success');
      assert.equal(success.length, 1);
      assert.equal(success[0]?.action, 'success');
      assert.equal(success[0]?.run?.status, 'success');
      assert.equal(success[0]?.run?.workflow_id, 'ci.yml');
      assert.equal(success[0]?.prior_status, 'running');
      assert.equal(success[0]?.last_run, null);
      assert.equal(received(runId, 'action_run_recover').length, 0, 'nothing to recover from');
    });

    test('a failing run sends action_run_failure; the next success also sends action_run_recover with the failed run as last_run', async () => {
      const failedId = await dispatch();
      await runJobs({ build: Result.FAILURE });
      await receiver.waitFor(() => received(failedId, 'action_run_failure').length === 1, 20_000);
      const failure = received(failedId, 'action_run_failure')[0];
      assert.equal(failure?.action, 'failure');
      assert.equal(failure?.run?.status, 'failure');
      assert.equal(failure?.last_run?.status, 'success');
      // The dependant is skipped: its workflow_job says completed/skipped.
      await receiver.waitFor(
        () =>
          received(failedId, 'workflow_job').some((p) => p.workflow_job?.name === 'test' && p.action === 'completed'),
        10_000,
      );
      const skipped = received(failedId, 'workflow_job').find(
        (p) => p.workflow_job?.name === 'test' && p.action === 'completed',
      );
      assert.equal(skipped?.workflow_job?.conclusion, 'skipped');
      assert.equal(received(failedId, 'action_run_success').length, 0);

      const fixedId = await dispatch();
      await runJobs({ build: Result.SUCCESS, test: Result.SUCCESS });
      await receiver.waitFor(
        () =>
          received(fixedId, 'action_run_recover').length === 1 && received(fixedId, 'action_run_success').length === 1,
        20_000,
      );
      const recover = received(fixedId, 'action_run_recover')[0];
      assert.equal(recover?.action, 'recover');
      assert.equal(recover?.last_run?.id, failedId);
      assert.equal(recover?.last_run?.status, 'failure');
      // Every delivery of these events carries a distinct delivery id.
      const ids = receiver.received.map((d) => String(d.headers['x-forgejo-delivery']));
      assert.equal(new Set(ids).size, ids.length);
    });

    // A leg whose finish leaves its run running and has no hook to tell is
    // finished by one statement on PostgreSQL; the last leg's finish, which
    // ends the run, takes the transaction that records it for the hooks.
    test('a hook made active while a matrix runs gets its end once, and the job that ended it', async () => {
      const active = async (value: boolean) => {
        const res = await s.api('PATCH', `/orgs/acme/hooks/${orgHookId}`, {
          token: owner.token,
          body: { active: value, events: HOOK_EVENTS },
        });
        assert.equal(res.status, 200, res.text);
      };
      await active(false);
      let runId = 0;
      try {
        const res = await s.api('POST', '/repos/acme/app/actions/workflows/matrix.yml/dispatches', {
          token: owner.token,
          body: { ref: 'main', return_run_info: true },
        });
        assert.equal(res.status, 201, res.text);
        runId = (res.json as { id: number }).id;
        const tasks = [];
        for (let i = 0; i < 2; i += 1) {
          const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
          assert.ok(fetched.task, 'a leg to run');
          tasks.push(decodeTask(fetched.task as Task));
        }
        const finish = (id: number) =>
          runner.runner.updateTask({
            state: {
              id: BigInt(id),
              result: Result.SUCCESS,
              stoppedAt: now(),
              steps: [
                { id: 0n, result: Result.SUCCESS, startedAt: now(), stoppedAt: now(), logIndex: 0n, logLength: 0n },
              ],
            },
          });
        assert.equal((await finish(tasks[0]!.id)).state?.result, Result.SUCCESS);
        const status = async () =>
          (
            (await s.api('GET', `/repos/acme/app/actions/runs/${runId}`, { token: owner.token })).json as {
              status: string;
            }
          ).status;
        assert.equal(await status(), 'running');
        await active(true);
        assert.equal((await finish(tasks[1]!.id)).state?.result, Result.SUCCESS);
        assert.equal(await status(), 'success');
      } finally {
        await active(true);
      }
      await receiver.waitFor(
        () =>
          received(runId, 'workflow_run').some((p) => p.action === 'completed') &&
          received(runId, 'action_run_success').length === 1 &&
          received(runId, 'workflow_job').some((p) => p.action === 'completed'),
        20_000,
      );
      // Let any duplicate arrive.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const completed = received(runId, 'workflow_run').filter((p) => p.action === 'completed');
      assert.equal(completed.length, 1);
      assert.equal(completed[0]?.workflow_run?.conclusion, 'success');
      assert.equal(received(runId, 'action_run_success').length, 1);
      // Only the leg that finished with the hook active is told.
      assert.deepEqual(
        received(runId, 'workflow_job').map((p) => p.action),
        ['completed'],
      );
    });

    // A claim and a finish look for active hooks in their own statement (the
    // repository's and its owner's) and skip the outbox when there is none:
    // the repository's own hook must be found as the organization's is.
    test("a repository's own hook gets the workflow_job of every claim and finish", async () => {
      const hook = await s.api('POST', '/repos/acme/app/hooks', {
        token: owner.token,
        body: {
          type: 'forgejo',
          config: { url: `${receiver.url}/repo-hook`, content_type: 'json' },
          events: ['workflow_job'],
          active: true,
        },
      });
      assert.equal(hook.status, 201, hook.text);
      const runId = await dispatch();
      await runJobs({ build: Result.SUCCESS, test: Result.SUCCESS });
      // Deliveries run in parallel: wait for the claims' and the finishes' alike.
      const arrived = (action: string) =>
        received(runId, 'workflow_job', '/repo-hook').filter((p) => p.action === action).length === 2;
      await receiver.waitFor(() => arrived('in_progress') && arrived('completed'), 20_000);
      for (const name of ['build', 'test']) {
        const actions = received(runId, 'workflow_job', '/repo-hook')
          .filter((p) => p.workflow_job?.name === name)
          .map((p) => p.action);
        assert.ok(actions.includes('in_progress'), `${name} claimed: ${actions.join(', ')}`);
        assert.ok(actions.includes('completed'), `${name} finished: ${actions.join(', ')}`);
      }
      assert.equal(received(runId, 'workflow_run', '/repo-hook').length, 0, 'only the events it subscribes to');
    });
  });
}
