// A job cannot set off runs of its own: what a task's token (GITHUB_TOKEN)
// pushes — new commits, new branches and tags, deleted branches — starts no
// run, so a workflow cannot re-trigger itself forever (issue 13 item 5;
// Forgejo's services/actions/notifier_helper.go skips every event whose doer
// is the Actions user). The push itself succeeds and its webhooks are still
// delivered; a dispatch made with the token still runs (Forgejo's
// DispatchWorkflow does not go through that notifier), attributed to the
// Actions user.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { decodeTask, registerRunner } from '../support/runner-client.ts';
import type { DecodedTask, RunnerClient } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { startWebhookReceiver } from '../support/webhook-receiver.ts';
import type { WebhookReceiver } from '../support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

// Every event a push can cause, plus dispatch: the loop a careless workflow would build.
const LOOP = `on:
  push:
  create:
  delete:
  workflow_dispatch:
jobs:
  again:
    runs-on: loop-label
    steps:
      - run: git commit --allow-empty -m again && git push
`;

interface RunJson {
  id: number;
  event: string;
  trigger_event: string;
  status: string;
  trigger_user: { login: string };
}

for (const dialect of testDialects()) {
  describe(`events caused by a task token start no runs [${dialect}]`, () => {
    let s: TestServer;
    let owner: TestUser;
    let receiver: WebhookReceiver;
    let work: WorkDir;
    let runner: RunnerClient;
    let task: DecodedTask;

    const runs = async (): Promise<RunJson[]> => {
      const res = await s.api('GET', '/repos/acme/app/actions/runs?limit=50', { token: owner.token });
      assert.equal(res.status, 200, res.text);
      return (res.json as { workflow_runs: RunJson[] }).workflow_runs;
    };

    const deliveries = (event: string, sender: string): unknown[] =>
      receiver.received.filter(
        (d) =>
          d.headers['x-forgejo-event'] === event &&
          (d.json as { sender?: { login?: string } }).sender?.login === sender,
      );

    before(async () => {
      s = await startTestServer(dialect, { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' });
      owner = await s.createUser('owner');
      receiver = await startWebhookReceiver();
      assert.equal((await s.api('POST', '/orgs', { token: owner.token, body: { username: 'acme' } })).status, 201);
      assert.equal(
        (await s.api('POST', '/orgs/acme/repos', { token: owner.token, body: { name: 'app', private: true } })).status,
        201,
      );
      const hook = await s.api('POST', '/orgs/acme/hooks', {
        token: owner.token,
        body: {
          type: 'forgejo',
          config: { url: `${receiver.url}/hook`, content_type: 'json' },
          events: ['push', 'create', 'delete'],
          active: true,
        },
      });
      assert.equal(hook.status, 201, hook.text);
      work = await createWorkDir(remoteUrl(s.url, 'acme', 'app', { user: 'owner', password: owner.token }));
      await work.commit({ '.forgejo/workflows/loop.yml': LOOP }, 'Add a workflow that pushes');
      assert.equal((await work.push('main')).code, 0);
      const registration = await s.api('GET', '/orgs/acme/actions/runners/registration-token', { token: owner.token });
      assert.equal(registration.status, 200, registration.text);
      runner = await registerRunner(s.url, (registration.json as { token: string }).token, { labels: ['loop-label'] });
      const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(fetched.task, 'the push run has a job to take');
      task = decodeTask(fetched.task as Task);
    });

    after(async () => {
      await work?.remove();
      await s?.stop();
      await receiver?.close();
    });

    test("the owner's push started runs (push and create of main): the workflow does react to pushes", async () => {
      assert.deepEqual((await runs()).map((r) => [r.event, r.trigger_user.login]).sort(), [
        ['create', 'owner'],
        ['push', 'owner'],
      ]);
    });

    test('pushing a commit, a new branch, a tag and deleting a branch with the task token starts no run; the webhooks are delivered', async () => {
      const token = task.secrets.GITHUB_TOKEN ?? '';
      assert.match(token, /^[0-9a-f]{40}$/);
      const before = (await runs()).length;
      const bot = await createWorkDir(remoteUrl(s.url, 'acme', 'app', { user: 'forgejo-actions', password: token }));
      try {
        await bot.git(['pull', '-q', 'origin', 'main']);
        await bot.commit({ 'generated.txt': 'from the job\n' }, 'Commit made by the job');
        for (const refspecs of [
          ['main'],
          ['main:refs/heads/bot-branch'],
          ['main:refs/tags/v-bot'],
          [':refs/heads/bot-branch'],
        ]) {
          const pushed = await bot.push(...refspecs);
          assert.equal(pushed.code, 0, `git push ${refspecs.join(' ')}: ${pushed.stderr}`);
        }
      } finally {
        await bot.remove();
      }
      // git push returns once the push's runs are recorded: none may have been.
      const after = await runs();
      assert.equal(after.length, before, JSON.stringify(after.map((r) => [r.event, r.trigger_user.login])));

      // Only runs are suppressed: every push still reaches the webhooks, sent by the Actions user.
      await receiver.waitFor(
        () =>
          deliveries('push', 'forgejo-actions').length >= 3 &&
          deliveries('create', 'forgejo-actions').length >= 2 &&
          deliveries('delete', 'forgejo-actions').length >= 1,
      );
    });

    test('a dispatch made with the task token still runs, attributed to the Actions user', async () => {
      const token = task.secrets.GITHUB_TOKEN ?? '';
      const res = await s.api('POST', '/repos/acme/app/actions/workflows/loop.yml/dispatches', {
        token,
        body: { ref: 'main', return_run_info: true },
      });
      assert.equal(res.status, 201, res.text);
      const { id } = res.json as { id: number };
      const run = await s.api('GET', `/repos/acme/app/actions/runs/${id}`, { token: owner.token });
      assert.equal(run.status, 200, run.text);
      const json = run.json as RunJson;
      assert.deepEqual(
        [json.trigger_event, json.status, json.trigger_user.login],
        ['workflow_dispatch', 'waiting', 'forgejo-actions'],
      );
      // The job it starts sees the Actions user as its actor, as in Forgejo.
      // Oldest first: the owner's create run comes before it.
      let dispatched: DecodedTask | undefined;
      for (let i = 0; i < 3 && dispatched?.context.run_id !== String(id); i += 1) {
        const next = await runner.runner.fetchTask({ tasksVersion: 0n });
        assert.ok(next.task, 'the dispatched job can be taken');
        dispatched = decodeTask(next.task as Task);
      }
      assert.ok(dispatched);
      assert.deepEqual(
        [dispatched.context.run_id, dispatched.context.actor, dispatched.context.event_name],
        [String(id), 'forgejo-actions', 'workflow_dispatch'],
      );
    });

    test('a task-token push to the default branch still registers its schedules (and starts no run)', async () => {
      const token = task.secrets.GITHUB_TOKEN ?? '';
      const before = (await runs()).length;
      const bot = await createWorkDir(remoteUrl(s.url, 'acme', 'app', { user: 'forgejo-actions', password: token }));
      let sha: string;
      try {
        await bot.git(['pull', '-q', 'origin', 'main']);
        sha = await bot.commit(
          {
            '.forgejo/workflows/nightly.yml':
              "on:\n  schedule:\n    - cron: '0 3 * * *'\njobs:\n  night:\n    runs-on: loop-label\n    steps:\n      - run: echo night\n",
          },
          'The job adds a nightly workflow',
        );
        const pushed = await bot.push('main');
        assert.equal(pushed.code, 0, pushed.stderr);
      } finally {
        await bot.remove();
      }
      assert.equal((await runs()).length, before);
      // Forgejo's notifier_helper.go registers schedules before it skips the Actions user's events.
      const schedules = await s.server.deps.database.db
        .selectFrom('action_schedule')
        .select(['workflow_id', 'commit_sha', 'spec'])
        .execute();
      assert.deepEqual(schedules, [{ workflow_id: 'nightly.yml', commit_sha: sha, spec: '0 3 * * *' }]);
    });
  });
}
