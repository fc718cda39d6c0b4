// Deleting a repository or an organization leaves nothing behind: an
// organization with a team, members, secrets, variables, a runner and a hook,
// and a repository with a collaborator, its own Actions data and runner, a
// run a runner executed (steps, outputs, a log), a delivered webhook of the
// organization and one of its own, and a disabled workflow. After
// both are deleted, no row in any table names a missing owner
// (test/support/orphans.ts knows every table) and the run's log files are gone.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Result } from '../src/gen/runner/v1/messages_pb.ts';
import { findOrphans } from './support/orphans.ts';
import { registerRunner } from './support/runner-client.ts';
import { startTestServer, testDialects } from './support/server.ts';
import type { TestServer } from './support/server.ts';
import { startWebhookReceiver } from './support/webhook-receiver.ts';
import type { WebhookReceiver } from './support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from './support/workdir.ts';

const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });

for (const dialect of testDialects()) {
  describe(`deleting an owner leaves no orphans [${dialect}]`, () => {
    let s: TestServer;
    let receiver: WebhookReceiver;

    before(async () => {
      receiver = await startWebhookReceiver();
      s = await startTestServer(dialect, { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' });
    });
    after(async () => {
      await s?.stop();
      await receiver?.close();
    });

    const ok = async (method: string, apiPath: string, body?: unknown): Promise<unknown> => {
      const res = await s.api(method, apiPath, { token: s.admin.token, body });
      assert.ok(res.status < 300, `${method} ${apiPath}: ${res.status} ${res.text}`);
      return res.json;
    };
    const location = () => ({
      sqlitePath: dialect === 'sqlite' ? path.join(s.dataDir, 'gantry.db') : null,
      pgUrl: dialect === 'postgres' ? (s.server.deps.config.databaseUrl ?? null) : null,
    });

    test('a repository and then its organization are deleted with everything they owned', async () => {
      const bob = await s.createUser('bob');
      const carol = await s.createUser('carol');
      await ok('POST', '/orgs', { username: 'acme' });
      const team = (await ok('POST', '/orgs/acme/teams', {
        name: 'devs',
        permission: 'write',
        units: ['repo.code', 'repo.actions'],
      })) as { id: number };
      await ok('PUT', `/teams/${team.id}/members/${bob.name}`);
      await ok('POST', '/orgs/acme/repos', { name: 'app' });
      await ok('PUT', `/repos/acme/app/collaborators/${carol.name}`, { permission: 'write' });
      for (const base of ['/orgs/acme', '/repos/acme/app']) {
        await ok('PUT', `${base}/actions/secrets/DEPLOY_KEY`, { data: 's3cret' });
        await ok('POST', `${base}/actions/variables/REGION`, { value: 'eu' });
      }
      await ok('POST', '/orgs/acme/hooks', {
        type: 'gitea',
        config: { url: receiver.url, content_type: 'json' },
        events: ['push', 'workflow_run'],
        active: true,
      });
      await ok('POST', '/repos/acme/app/hooks', {
        type: 'forgejo',
        config: { url: `${receiver.url}/repo`, content_type: 'json' },
        events: ['push'],
        active: true,
      });
      const orgToken = (await ok('GET', '/orgs/acme/actions/runners/registration-token')) as { token: string };
      const repoToken = (await ok('GET', '/repos/acme/app/actions/runners/registration-token')) as { token: string };
      await registerRunner(s.url, orgToken.token, { labels: ['orphans-org'] });
      const runner = await registerRunner(s.url, repoToken.token, { labels: ['orphans'] });

      const work = await createWorkDir(
        remoteUrl(s.url, 'acme', 'app', { user: s.admin.name, password: s.admin.token }),
      );
      try {
        await work.commit(
          {
            '.forgejo/workflows/ci.yml':
              'on: push\njobs:\n  build:\n    runs-on: orphans\n    steps:\n      - run: echo hi\n',
            // Registers an action_schedule row, which must go with the repository.
            '.forgejo/workflows/nightly.yml':
              "on:\n  schedule:\n    - cron: '0 3 * * *'\njobs:\n  night:\n    runs-on: orphans-never\n    steps:\n      - run: echo night\n",
          },
          'CI',
        );
        const pushed = await work.push('HEAD:main');
        assert.equal(pushed.code, 0, pushed.stderr);
      } finally {
        await work.remove();
      }
      const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(fetched.task, 'the pushed workflow gives the runner a task');
      const taskId = fetched.task.id;
      await runner.runner.updateLog({ taskId, index: 0n, rows: [{ time: now(), content: 'hello' }], noMore: true });
      await runner.runner.updateTask({
        state: {
          id: taskId,
          result: Result.SUCCESS,
          startedAt: now(),
          stoppedAt: now(),
          steps: [{ id: 0n, result: Result.SUCCESS, startedAt: now(), stoppedAt: now(), logIndex: 0n, logLength: 1n }],
        },
        outputs: { version: '1.0' },
      });
      await receiver.waitFor((received) => received.some((d) => d.headers['x-gitea-event'] === 'workflow_run'));
      await receiver.waitFor((received) => received.some((d) => d.path === '/repo'));
      await ok('PUT', '/repos/acme/app/actions/workflows/ci.yml/disable');
      const repoId = ((await ok('GET', '/repos/acme/app')) as { id: number }).id;
      const logDir = path.join(s.dataDir, 'actions_log', String(repoId));
      assert.ok(existsSync(logDir), 'the task log is on disk before the deletion');
      const schedules = await s.server.deps.database.db.selectFrom('action_schedule').select('id').execute();
      assert.equal(schedules.length, 1, 'the nightly workflow is registered before the deletion');
      assert.deepEqual(await findOrphans(location()), [], 'nothing is orphaned before any deletion');

      await ok('DELETE', '/repos/acme/app');
      assert.deepEqual(await findOrphans(location()), [], 'the repository took its rows with it');
      assert.equal(existsSync(logDir), false, 'its task logs are removed after the deletion commits');

      await ok('DELETE', '/orgs/acme');
      assert.deepEqual(await findOrphans(location()), [], 'the organization took its rows with it');
      // Members and collaborators are untouched accounts.
      assert.equal((await s.api('GET', '/user', { token: bob.token })).status, 200);
      assert.equal((await s.api('GET', '/user', { token: carol.token })).status, 200);
    });
  });
}
