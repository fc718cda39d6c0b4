// The two other ways to run jobs with gantry's runner: `gantry runner
// one-job --handle` (an autoscaler starts a runner for one given job, through
// Forgejo's FetchSingleTask), and the runner `gantry web` starts by itself when
// GANTRY_EMBEDDED_RUNNER_LABELS is set, registered for the whole instance.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { startRunnerFixture } from '../support/runner-cli.ts';
import type { RunnerFixture } from '../support/runner-cli.ts';
import { testDialects } from '../support/server.ts';

function job(label: string, text: string): string {
  return `on: workflow_dispatch
jobs:
  only:
    runs-on: ${label}
    steps:
      - run: echo "${text} on $RUNNER_NAME"
`;
}

for (const dialect of testDialects()) {
  describe(`one-job --handle and the embedded runner [${dialect}]`, () => {
    let f: RunnerFixture;

    before(async () => {
      f = await startRunnerFixture(dialect, { webEnv: { GANTRY_EMBEDDED_RUNNER_LABELS: 'embedded-host' } });
      await f.push({
        '.forgejo/workflows/single.yml': job('cli-single', 'single job'),
        '.forgejo/workflows/embedded.yml': job('embedded-host', 'embedded job'),
      });
    });

    after(async () => {
      await f?.stop();
    });

    test('one-job --handle runs exactly the job with that handle, then exits', async () => {
      const runnerFile = await f.register('single', 'cli-single');
      // The runner file: owner-only, with the runner's identity, the instance and the labels with their schema.
      assert.equal((await fs.stat(runnerFile)).mode & 0o777, 0o600);
      const saved = JSON.parse(await fs.readFile(runnerFile, 'utf8')) as Record<string, unknown>;
      assert.equal(saved.address, f.web.url);
      assert.deepEqual(saved.labels, ['cli-single:host']);
      assert.equal(typeof saved.uuid, 'string');
      assert.match(String(saved.token), /^[0-9a-f]{40}$/);
      const runId = await f.dispatch('single.yml');
      const [waiting] = await f.jobsOf(runId);
      assert.ok(waiting?.handle);
      const missing = await f.cli([
        'one-job',
        '--handle',
        '00000000-0000-4000-8000-000000000000',
        '--runner-file',
        runnerFile,
      ]);
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /no waiting job has the handle/);
      const ran = await f.cli([
        'one-job',
        '--handle',
        waiting.handle,
        '--runner-file',
        runnerFile,
        '--workdir',
        path.join(f.dir, 'single-work'),
      ]);
      assert.equal(ran.code, 0, ran.stderr + ran.stdout);
      const run = await f.waitForRun(runId, 5000);
      assert.equal(run.status, 'success');
      assert.match(await f.logOf(waiting.id), /single job on single/);
      // The job's folder is gone once it is reported.
      assert.deepEqual(
        await fs.readdir(path.join(f.dir, 'single-work')).catch(() => []),
        ['_actions'].filter(() => false),
      );
    });

    test('gantry web with GANTRY_EMBEDDED_RUNNER_LABELS runs jobs with an instance-wide runner', async () => {
      const runId = await f.dispatch('embedded.yml');
      const run = await f.waitForRun(runId);
      const [done] = await f.jobsOf(runId);
      assert.ok(done);
      assert.equal(run.status, 'success', await f.logOf(done.id));
      assert.match(await f.logOf(done.id), /embedded job on gantry-embedded/);
      const runners = await f.s.api('GET', '/admin/actions/runners', { token: f.s.admin.token });
      assert.equal(runners.status, 200, runners.text);
      const listed = runners.json as { name: string; labels: string[] | null }[];
      const embedded = listed.find((runner) => runner.name === 'gantry-embedded');
      assert.ok(embedded, runners.text);
      assert.deepEqual(embedded.labels, ['embedded-host']);
    });
  });
}
