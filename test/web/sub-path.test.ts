// The console served under a sub-path, behind nginx: GANTRY_ROOT_URL is
// http://127.0.0.1:<port>/ci/ and nginx strips /ci before Gantry sees the
// request (the README's example). In Chromium: a signed-out visit is sent to
// the sign-in page and back, a settings form, the header's links, a run page
// with its live log and its Cancel form, and Sign out all stay under /ci/ — every
// request the page makes is checked, since nginx answers 404 for anything
// outside /ci/.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser, Request } from 'playwright-core';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { launchBrowser, openPage } from '../support/browser.ts';
import type { TestPage } from '../support/browser.ts';
import { freePort } from '../support/free-port.ts';
import { nginxSkipReason, startNginx } from '../support/nginx.ts';
import type { NginxProxy } from '../support/nginx.ts';
import { decodeTask, registerRunner } from '../support/runner-client.ts';
import type { RunnerClient } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

const WORKFLOW = 'on: push\njobs:\n  build:\n    runs-on: w-sub\n    steps:\n      - run: make\n';
const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });
const skip = nginxSkipReason();

for (const dialect of testDialects()) {
  describe(`web console under a sub-path behind nginx [${dialect}]`, { skip }, () => {
    let s: TestServer;
    let proxy: NginxProxy;
    let browser: Browser;
    let dev: TestUser;
    let work: WorkDir;
    let runner: RunnerClient;
    let site: string;

    /** A page whose every request is recorded, to check none left /ci/. */
    const openRecorded = async (): Promise<TestPage & { requests: Request[] }> => {
      const t = await openPage(browser, proxy.url);
      const requests: Request[] = [];
      t.page.on('request', (request) => requests.push(request));
      return { ...t, requests };
    };
    const assertAllUnderSite = async (requests: Request[]) => {
      assert.ok(requests.length > 0);
      for (const request of requests) {
        const url = new URL(request.url());
        if (url.protocol === 'data:') continue;
        assert.equal(url.origin, new URL(proxy.url).origin, request.url());
        assert.ok(url.pathname.startsWith('/ci/'), `${request.method()} ${url.pathname} is outside /ci/`);
        const response = await request.response();
        assert.ok(response === null || response.status() < 400, `${url.pathname} answered ${response?.status()}`);
      }
    };

    before(async () => {
      const proxyPort = await freePort();
      site = `http://127.0.0.1:${proxyPort}/ci`;
      s = await startTestServer(dialect, { GANTRY_ROOT_URL: `${site}/` });
      [proxy, browser] = await Promise.all([
        startNginx({ port: proxyPort, upstreams: [new URL(s.url).host], subPath: '/ci/' }),
        launchBrowser(),
      ]);
      dev = await s.createUser('dev');
      const repo = await s.api('POST', '/user/repos', { token: dev.token, body: { name: 'app', private: true } });
      assert.equal(repo.status, 201, repo.text);
      // git through the proxy too: the clone URL users copy is under the root URL.
      work = await createWorkDir(`${site}/dev/app.git`.replace('://', `://dev:${dev.password}@`));
      await work.commit({ '.forgejo/workflows/build.yml': WORKFLOW }, 'Add the workflow');
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      const registration = await s.api('GET', '/repos/dev/app/actions/runners/registration-token', {
        token: dev.token,
      });
      runner = await registerRunner(`${site}`, (registration.json as { token: string }).token, { labels: ['w-sub'] });
    });
    after(async () => {
      await browser?.close();
      await proxy?.stop();
      await work?.remove();
      await s?.stop();
    });

    test('sign-in and back, a settings form, the runs list, the run page with its live log, Cancel and Sign out all stay under /ci/', async () => {
      const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(fetched.task, 'the pushed job is handed out through the proxy');
      const task = decodeTask(fetched.task as Task);
      await runner.runner.updateTask({ state: { id: BigInt(task.id), result: Result.UNSPECIFIED, startedAt: now() } });
      await runner.runner.updateLog({
        taskId: BigInt(task.id),
        index: 0n,
        rows: [{ time: now(), content: 'hello from under /ci' }],
        noMore: false,
      });

      const t = await openRecorded();
      const { page } = t;
      try {
        // Signed out, a settings page sends us to sign in (under /ci/) and, once signed in, back to it.
        await page.goto('/ci/user/settings/actions/secrets');
        await page.waitForURL(/\/ci\/user\/login\?redirect_to=/);
        await page.getByLabel('Username or e-mail address').fill(dev.name);
        await page.getByLabel('Password', { exact: true }).fill(dev.password);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.waitForURL(`${site}/user/settings/actions/secrets`);
        await page.getByLabel('Name').fill('DEPLOY_KEY');
        await page.getByLabel('Value').fill('s3cret');
        await page.getByRole('button', { name: 'Add secret' }).click();
        await page.getByRole('cell', { name: 'DEPLOY_KEY', exact: true }).waitFor();

        // The header's home link, the repository's runs, the run page with its live log, and Cancel.
        await page.getByRole('link', { name: 'Gantry' }).click();
        await page.waitForURL(`${site}/`);
        await page.getByRole('link', { name: 'dev/app' }).click();
        await page.waitForURL(`${site}/dev/app/actions`);
        await page.getByRole('list', { name: 'Runs' }).getByRole('link').first().click();
        await page.waitForURL(/\/ci\/dev\/app\/actions\/runs\/1\/jobs\/0\/attempt\/1$/);
        await page.getByText('hello from under /ci').waitFor();
        await page.getByRole('button', { name: 'Cancel' }).click();
        await page.getByText('The run is being cancelled.').waitFor();
        assert.match(page.url(), /\/ci\/dev\/app\/actions\/runs\/1\/jobs\/0\/attempt\/1$/);

        await page.getByRole('button', { name: 'Sign out' }).click();
        await page.waitForURL(`${site}/user/login`);
        await page.getByRole('button', { name: 'Sign in' }).waitFor();
        await assertAllUnderSite(t.requests);
        assert.deepEqual(t.consoleErrors, []);
        await t.screenshot('sub-path-run-page');
      } finally {
        await t.close();
      }
    });

    test('a wrong link under /ci/ gets the 404 page, whose links stay under /ci/', async () => {
      const t = await openRecorded();
      try {
        const res = await t.page.goto('/ci/no/such/page/here');
        assert.equal(res?.status(), 404);
        await t.page.getByText('The page you asked for does not exist.').waitFor();
        assert.equal(await t.page.getByRole('link', { name: 'Gantry' }).getAttribute('href'), '/ci/');
        await t.page.getByRole('link', { name: 'Sign in' }).click();
        await t.page.waitForURL(`${site}/user/login`);
      } finally {
        await t.close();
      }
    });
  });
}
