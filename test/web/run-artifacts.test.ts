// A run's artifacts in the web console, in a real Chromium against a started
// Gantry: the real @actions/artifact client uploads two artifacts from a job;
// the run page lists them with their sizes, the link downloads the zip the
// job uploaded, an expired one shows without a link, a reader sees no Delete
// and cannot post one, and a writer's Delete removes the artifact from the
// page and from the API.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { runArtifactClient } from '../support/artifact-client.ts';
import { launchBrowser, withPage as withSignedInPage } from '../support/browser.ts';
import type { TestPage } from '../support/browser.ts';
import { decodeTask, registerRunner } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';
import { readZip } from '../support/zip-reader.ts';
import { ArtifactStatus } from '../../src/models/artifacts.ts';

const WORKFLOW = 'on: push\njobs:\n  build:\n    runs-on: w-artifacts\n    steps:\n      - run: make\n';
/** Characters a URL must carry encoded (&, %, #, space): the link has to name the artifact exactly. */
const REPORT = 'coverage & 100% #1';
const REPORT_TEXT = 'lines: 100%\n'.repeat(200);

for (const dialect of testDialects()) {
  describe(`web console: run artifacts [${dialect}]`, () => {
    let s: TestServer;
    let browser: Browser;
    let dev: TestUser;
    let reader: TestUser;
    let work: WorkDir;
    let scratch: string;
    let runIndex: number;
    let runId: number;

    const withPage = (user: TestUser, name: string, body: (t: TestPage) => Promise<void>) =>
      withSignedInPage(browser, s.url, user, name, body);
    const apiArtifactNames = async (): Promise<string[]> => {
      const res = await s.api('GET', `/repos/dev/app/actions/runs/${runId}/artifacts`, { token: dev.token });
      assert.equal(res.status, 200, res.text);
      return (res.json as Array<{ name: string }>).map((a) => a.name).sort();
    };

    before(async () => {
      [s, browser] = await Promise.all([startTestServer(dialect), launchBrowser()]);
      dev = await s.createUser('dev');
      reader = await s.createUser('reader');
      assert.equal((await s.api('POST', '/user/repos', { token: dev.token, body: { name: 'app' } })).status, 201);
      work = await createWorkDir(remoteUrl(s.url, 'dev', 'app', { user: 'dev', password: dev.password }));
      await work.commit({ '.forgejo/workflows/build.yml': WORKFLOW }, 'Add the workflow');
      assert.equal((await work.push('main')).code, 0);
      const registration = await s.api('GET', '/repos/dev/app/actions/runners/registration-token', {
        token: dev.token,
      });
      const runner = await registerRunner(s.url, (registration.json as { token: string }).token, {
        labels: ['w-artifacts'],
      });
      const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(fetched.task, 'the job is handed out');
      const task = decodeTask(fetched.task as Task);
      runId = Number(task.context.run_id);
      const run = await s.api('GET', `/repos/dev/app/actions/runs/${runId}`, { token: dev.token });
      assert.equal(run.status, 200, run.text);
      runIndex = (run.json as { index_in_repo: number }).index_in_repo;

      scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-web-artifacts-'));
      await fs.writeFile(path.join(scratch, 'coverage.txt'), REPORT_TEXT);
      await fs.writeFile(path.join(scratch, 'old.txt'), 'old');
      const env = { runtimeToken: String(task.context.gitea_runtime_token), resultsUrl: s.url, workspace: scratch };
      for (const [name, file] of [
        [REPORT, 'coverage.txt'],
        ['old-logs', 'old.txt'],
      ] as const) {
        const uploaded = await runArtifactClient(env, {
          op: 'upload',
          name,
          files: [path.join(scratch, file)],
          root: scratch,
        });
        assert.equal(uploaded.code, 0, uploaded.stderr);
      }
      const done = await runner.runner.updateTask({
        state: { id: BigInt(task.id), result: Result.SUCCESS, steps: [] },
      });
      assert.equal(done.state?.result, Result.SUCCESS);
      // Expiry is a retention pass days later; its outcome is the row's status, set here directly.
      await s.server.deps.database.db
        .updateTable('action_artifact')
        .set({ status: ArtifactStatus.expired })
        .where('artifact_name', '=', 'old-logs')
        .execute();
    });
    after(async () => {
      await browser?.close();
      await work?.remove();
      if (scratch) await fs.rm(scratch, { recursive: true, force: true });
      await s?.stop();
    });

    test('a reader sees the artifacts with their sizes, downloads the zip the job uploaded, and gets no Delete', async () => {
      await withPage(reader, 'run-artifacts-reader', async ({ page, consoleErrors }) => {
        await page.goto(`/dev/app/actions/runs/${runIndex}`);
        const section = page.getByRole('region', { name: 'Artifacts' });
        const link = section.getByRole('link', { name: REPORT, exact: true });
        await link.waitFor();
        await section.getByText('expired').waitFor();
        assert.equal(
          await section.getByRole('link', { name: 'old-logs' }).count(),
          0,
          'an expired artifact has no link',
        );
        assert.equal(await section.getByRole('button', { name: /Delete/ }).count(), 0);
        const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
        assert.equal(download.suggestedFilename(), `${REPORT}.zip`);
        const zip = await fs.readFile((await download.path()) as string);
        const entries = readZip(zip);
        assert.deepEqual(
          entries.map((e) => e.name),
          ['coverage.txt'],
        );
        assert.equal(entries[0]!.data.toString('utf8'), REPORT_TEXT);
        assert.deepEqual(consoleErrors, []);

        // The same form a writer gets, posted by the reader with a valid CSRF token: refused, nothing deleted.
        const csrf = await page.locator('input[name="_csrf"]').first().getAttribute('value');
        const forged = await page.request.post(
          `/dev/app/actions/runs/${runIndex}/artifacts/${encodeURIComponent(REPORT)}/delete`,
          { form: { _csrf: csrf ?? '' }, maxRedirects: 0 },
        );
        assert.equal(forged.status(), 403);
      });
      assert.deepEqual(await apiArtifactNames(), [REPORT, 'old-logs'].sort());
    });

    test('an artifact the run does not have is a 404 page', async () => {
      await withPage(dev, 'run-artifacts-missing', async ({ page }) => {
        const res = await page.goto(`/dev/app/actions/runs/${runIndex}/artifacts/no-such-artifact`);
        assert.equal(res?.status(), 404);
        await page.getByText('the run has no artifact of that name').waitFor();
        const expired = await page.request.get(`/dev/app/actions/runs/${runIndex}/artifacts/old-logs`);
        assert.equal(expired.status(), 404, 'an expired artifact has no zip');
      });
    });

    test('a writer deletes an artifact: it is gone from the page and from the API', async () => {
      await withPage(dev, 'run-artifacts-delete', async ({ page }) => {
        await page.goto(`/dev/app/actions/runs/${runIndex}`);
        const section = page.getByRole('region', { name: 'Artifacts' });
        await section.getByRole('button', { name: `Delete artifact ${REPORT}` }).click();
        await page.getByText(`Artifact ${REPORT} was deleted.`).waitFor();
        await section.getByText('old-logs').waitFor();
        assert.equal(await section.getByRole('link', { name: REPORT, exact: true }).count(), 0);
      });
      assert.deepEqual(await apiArtifactNames(), ['old-logs']);
    });
  });
}
