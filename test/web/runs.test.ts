// The Actions pages of the web console driven in a real Chromium, against a
// started Gantry and a runner client: a pushed run in the list, its log
// streamed live while a runner writes it, Cancel, Re-run failed jobs and the
// attempt switcher, the "Run workflow" form, what a reader sees and may do,
// a forged POST, and attacker-controlled text (branch, commit message, log
// line) rendered inert.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { launchBrowser, openPage, signIn, withPage as withSignedInPage } from '../support/browser.ts';
import type { TestPage } from '../support/browser.ts';
import { decodeTask, registerRunner } from '../support/runner-client.ts';
import type { DecodedTask, RunnerClient } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

/** How soon a line the runner sends shows on a watched run page. */
const LIVE_LINE_MS = 4000;

const job = (label: string, steps: string[]) =>
  ['jobs:', '  build:', `    runs-on: ${label}`, '    steps:', ...steps.map((s) => `      - run: ${s}`)].join('\n');

const WORKFLOWS: Record<string, string> = {
  'live.yml': `name: Live\non: push\n${job('w-live', ['echo one', 'echo two'])}\n`,
  'flaky.yml': `name: Flaky\non: push\n${job('w-flaky', ['exit 1'])}\n`,
  'manual.yml': [
    'name: Manual',
    'on:',
    '  workflow_dispatch:',
    '    inputs:',
    '      greeting:',
    '        description: Greeting',
    '        required: true',
    '        type: string',
    '      level:',
    '        description: Level',
    '        type: choice',
    '        options: [low, high]',
    '        default: low',
    '      dry:',
    '        description: Dry run',
    '        type: boolean',
    job('w-manual', ['echo manual']),
    '',
  ].join('\n'),
  'broken.yml': 'on: push\njobs:\n  x:\n    runs-on: w-broken\n    steps: nope\n',
};

const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });

for (const dialect of testDialects()) {
  describe(`web console: runs [${dialect}]`, () => {
    let s: TestServer;
    let browser: Browser;
    let dev: TestUser;
    let reader: TestUser;
    let work: WorkDir;
    let registration: string;
    const runners = new Map<string, RunnerClient>();

    const runner = async (label: string): Promise<RunnerClient> => {
      let client = runners.get(label);
      if (!client) {
        client = await registerRunner(s.url, registration, { labels: [label], name: `runner-${label}` });
        runners.set(label, client);
      }
      return client;
    };
    const fetchTask = async (label: string): Promise<DecodedTask> => {
      const res = await (await runner(label)).runner.fetchTask({ tasksVersion: 0n });
      assert.ok(res.task, `a task for ${label}`);
      return decodeTask(res.task as Task);
    };
    const appendLog = async (label: string, taskId: number, index: number, lines: string[]) => {
      const res = await (
        await runner(label)
      ).runner.updateLog({
        taskId: BigInt(taskId),
        index: BigInt(index),
        rows: lines.map((content) => ({ time: now(), content })),
        noMore: false,
      });
      assert.equal(Number(res.ackIndex), index + lines.length);
    };
    const report = async (label: string, taskId: number, result: Result, logLength: number) =>
      (
        await (
          await runner(label)
        ).runner.updateTask({
          state: {
            id: BigInt(taskId),
            result,
            startedAt: now(),
            ...(result === Result.UNSPECIFIED ? {} : { stoppedAt: now() }),
            steps: [{ id: 0n, result, startedAt: now(), logIndex: 0n, logLength: BigInt(logLength) }],
          },
        })
      ).state?.result;
    const runIndexOf = async (workflowId: string, ref = 'refs/heads/main'): Promise<number> => {
      const row = await s.server.deps.database.db
        .selectFrom('action_run')
        .select('index_in_repo')
        .where('workflow_id', '=', workflowId)
        .where('ref', '=', ref)
        .orderBy('id', 'desc')
        .executeTakeFirstOrThrow();
      return row.index_in_repo;
    };
    const withPage = (user: TestUser | null, name: string, body: (t: TestPage) => Promise<void>) =>
      withSignedInPage(browser, s.url, user, name, body);

    before(async () => {
      [s, browser] = await Promise.all([startTestServer(dialect), launchBrowser()]);
      dev = await s.createUser('dev');
      reader = await s.createUser('reader');
      const repo = await s.api('POST', '/user/repos', { token: dev.token, body: { name: 'app' } });
      assert.equal(repo.status, 201, repo.text);
      work = await createWorkDir(remoteUrl(s.url, 'dev', 'app', { user: 'dev', password: dev.password }));
      await work.commit(
        Object.fromEntries(Object.entries(WORKFLOWS).map(([file, text]) => [`.forgejo/workflows/${file}`, text])),
        'Add the workflows',
      );
      assert.equal((await work.push('main')).code, 0);
      const token = await s.api('GET', '/repos/dev/app/actions/runners/registration-token', { token: dev.token });
      assert.equal(token.status, 200, token.text);
      registration = (token.json as { token: string }).token;
    });
    after(async () => {
      await browser?.close();
      await work?.remove();
      await s?.stop();
    });

    test('the pushed runs are listed; the sidebar warns about a workflow that does not parse and labels no runner has', async () => {
      await withPage(dev, 'runs-list', async ({ page, consoleErrors }) => {
        await page.goto('/dev/app/actions');
        await page.getByRole('link', { name: /^Live/ }).first().waitFor();
        const runs = page.getByRole('list', { name: 'Runs' }).getByRole('listitem');
        assert.equal(await runs.count(), 3, 'live, flaky and broken ran on push');
        await page.getByText('live.yml #').first().waitFor();
        const sidebar = page.getByRole('navigation', { name: 'Workflows' });
        await sidebar.getByText('⚠').first().waitFor();
        // No runner is online yet: every job's label is warned about (Forgejo's runs page does the same).
        await sidebar.getByText('job build: no online runner has the label w-live').waitFor();
        // Filters: the failed run only.
        await page.getByLabel('Status').selectOption('failure');
        await page.getByRole('button', { name: 'Filter' }).click();
        await page.waitForURL(/status=2/);
        assert.equal(await runs.count(), 1);
        assert.deepEqual(consoleErrors, []);
      });
    });

    test('the log streams live while the runner writes it; Cancel stops the run', async () => {
      const index = await runIndexOf('live.yml');
      const task = await fetchTask('w-live');
      await report('w-live', task.id, Result.UNSPECIFIED, 0);
      await appendLog('w-live', task.id, 0, ['first line from the runner']);
      await withPage(dev, 'run-live-log', async ({ page, screenshot }) => {
        await page.goto(`/dev/app/actions/runs/${index}`);
        await page.waitForURL(/\/jobs\/0\/attempt\/1$/);
        await page.getByText('first line from the runner').waitFor();
        await page.evaluate('window.notReloaded = true');
        await appendLog('w-live', task.id, 1, [
          '\u001b[32msecond line, in green\u001b[0m',
          '::group::Details',
          'inside',
        ]);
        // The page asks for new lines every second: one poll and its answer, with room for a
        // loaded machine (a 2 s bound failed once at load average 12), and no reload.
        const started = Date.now();
        await page.getByText('second line, in green').waitFor({ timeout: LIVE_LINE_MS });
        const waitedMs = Date.now() - started;
        assert.ok(waitedMs <= LIVE_LINE_MS, `the new line appeared after ${waitedMs} ms`);
        assert.equal(await page.evaluate('window.notReloaded'), true);
        assert.equal(await page.locator('.ansi-fg-32').getByText('second line, in green').count(), 1);
        await page.locator('.log-group > summary', { hasText: 'Details' }).waitFor();
        await page.getByRole('button', { name: 'Show timestamps' }).click();
        await page.locator('.log-line .time').first().waitFor({ state: 'visible' });
        await screenshot('run-live-log-streaming');
        await page.getByRole('button', { name: 'Cancel' }).click();
        await page.getByText('The run is being cancelled.').waitFor();
        await page.locator('#run-status', { hasText: 'cancelled' }).waitFor();
      });
      assert.equal(await report('w-live', task.id, Result.UNSPECIFIED, 3), Result.CANCELLED);
    });

    test('Re-run failed jobs starts attempt 2; the attempt switcher shows attempt 1 again', async () => {
      const index = await runIndexOf('flaky.yml');
      const first = await fetchTask('w-flaky');
      await appendLog('w-flaky', first.id, 0, ['attempt one failed here']);
      assert.equal(await report('w-flaky', first.id, Result.FAILURE, 1), Result.FAILURE);
      await withPage(dev, 'run-rerun-attempts', async ({ page }) => {
        await page.goto(`/dev/app/actions/runs/${index}`);
        await page.getByText('attempt one failed here').waitFor();
        await page.getByRole('button', { name: 'Re-run failed jobs' }).click();
        await page.getByText('A new attempt has started.').waitFor();
        await page.waitForURL(/\/attempt\/2$/);
        const second = await fetchTask('w-flaky');
        await appendLog('w-flaky', second.id, 0, ['attempt two passed']);
        await report('w-flaky', second.id, Result.SUCCESS, 1);
        // The page reloads itself once the job is done; a successful step starts folded.
        await page.locator('#job-status', { hasText: 'success' }).waitFor();
        await page.locator('summary', { hasText: 'exit 1' }).click();
        await page.getByText('attempt two passed').waitFor();
        await page.getByLabel('Attempt').selectOption('1');
        await page.waitForURL(/\/attempt\/1$/);
        await page.getByText('attempt one failed here').waitFor();
        assert.equal(await page.getByText('attempt two passed').count(), 0);
      });
    });

    test('"Run workflow" dispatches with the inputs of the form', async () => {
      await withPage(dev, 'run-workflow-form', async ({ page }) => {
        await page.goto('/dev/app/actions?workflow=manual.yml');
        await page.getByText('Run workflow').first().click();
        await page.getByLabel('Greeting').fill('hello from the form');
        await page.getByLabel('Level').selectOption('high');
        await page.getByLabel('Dry run').check();
        await page.getByRole('button', { name: 'Run workflow' }).click();
        await page.getByText(/Workflow run #\d+ was started\./).waitFor();
      });
      const task = await fetchTask('w-manual');
      const inputs = (task.context.event as { inputs?: Record<string, string> }).inputs;
      assert.deepEqual(inputs, { greeting: 'hello from the form', level: 'high', dry: 'true' });
    });

    test('a reader sees no action buttons, and their POSTs are refused', async () => {
      const index = await runIndexOf('flaky.yml');
      await withPage(reader, 'run-as-reader', async ({ page, context }) => {
        await page.goto(`/dev/app/actions/runs/${index}`);
        await page.getByRole('navigation', { name: 'Jobs' }).waitFor();
        for (const name of ['Cancel', 'Re-run all jobs', 'Re-run failed jobs', 'Re-run this job', 'Delete run'])
          assert.equal(await page.getByRole('button', { name }).count(), 0, `no ${name} button`);
        await page.goto('/dev/app/actions?workflow=manual.yml');
        assert.equal(await page.getByText('Run workflow').count(), 0);
        // With the page's own CSRF token, the guard refuses: 403, nothing changes.
        const csrf = await page.locator('input[name=_csrf]').first().inputValue();
        const refused = await context.request.post(`/dev/app/actions/runs/${index}/rerun`, {
          form: { _csrf: csrf },
          maxRedirects: 0,
        });
        assert.equal(refused.status(), 403);
      });
      const run = await s.server.deps.database.db
        .selectFrom('action_run_job')
        .select('attempt')
        .innerJoin('action_run', 'action_run.id', 'action_run_job.run_id')
        .where('action_run.index_in_repo', '=', index)
        .executeTakeFirstOrThrow();
      assert.equal(run.attempt, 2, 'no third attempt');
    });

    test('a forged POST (no CSRF token) from a signed-in browser is refused and changes nothing', async () => {
      const index = await runIndexOf('broken.yml');
      await withPage(dev, 'run-forged-post', async ({ context }) => {
        const forged = await context.request.post(`/dev/app/actions/runs/${index}/delete`, {
          form: { anything: 'x' },
          maxRedirects: 0,
        });
        assert.equal(forged.status(), 403);
      });
      const still = await s.server.deps.database.db
        .selectFrom('action_run')
        .select('id')
        .where('index_in_repo', '=', index)
        .executeTakeFirst();
      assert.ok(still, 'the run was not deleted');
    });

    test('the run page reads on a phone in dark mode: dark background, nothing wider than the screen', async () => {
      const index = await runIndexOf('flaky.yml');
      const t = await openPage(browser, s.url, { colorScheme: 'dark', viewport: { width: 390, height: 844 } });
      try {
        await signIn(t.page, dev.name, dev.password);
        await t.page.goto(`/dev/app/actions/runs/${index}`);
        await t.page.getByRole('navigation', { name: 'Jobs' }).waitFor();
        const background = await t.page.evaluate('getComputedStyle(document.body).backgroundColor');
        assert.equal(background, 'rgb(16, 19, 24)');
        const overflow = await t.page.evaluate(
          'document.documentElement.scrollWidth - document.documentElement.clientWidth',
        );
        assert.equal(overflow, 0, 'no horizontal scrolling');
        // Keyboard: the first Tab reaches the skip link, the next ones the navigation.
        await t.page.keyboard.press('Tab');
        assert.equal(await t.page.evaluate('document.activeElement.textContent'), 'Skip to content');
        await t.screenshot('run-phone-dark');
      } finally {
        await t.close();
      }
    });

    test('a hostile branch name, commit message and log line render as text', async () => {
      const branch = '<img/src=x/onerror=alert(1)>';
      await work.git(['checkout', '-q', '-b', branch]);
      await work.commit({ 'README.md': 'xss\n' }, '<img src=x onerror=alert(2)>');
      assert.equal((await work.push(`HEAD:refs/heads/${branch}`)).code, 0);
      const index = await runIndexOf('live.yml', `refs/heads/${branch}`);
      const task = await fetchTask('w-live');
      await appendLog('w-live', task.id, 0, ['<img src=x onerror=alert(3)>', '<script>alert(4)</script>']);
      await withPage(dev, 'run-hostile-text', async ({ page, dialogs }) => {
        await page.goto('/dev/app/actions');
        await page.getByText(branch).first().waitFor();
        await page.getByText('<img src=x onerror=alert(2)>').first().waitFor();
        await page.goto(`/dev/app/actions/runs/${index}`);
        await page.getByText('<img src=x onerror=alert(3)>').waitFor();
        await page.getByText('<script>alert(4)</script>').waitFor();
        await page.getByText(branch).first().waitFor();
        assert.equal(await page.locator('main img').count(), 0, 'no element was injected');
        assert.deepEqual(dialogs, []);
      });
    });
  });
}
