// Stopping a job that `gantry runner daemon` runs, as a user sees it: a
// cancel through the API ends a `sleep 600` step within seconds (the step's
// whole process group is killed) and the job's `if: always()` step still
// runs; SIGTERM to the daemon mid-job cancels the job after the grace period
// and reports it, instead of leaving it running on the server.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { startRunnerFixture } from '../support/runner-cli.ts';
import type { RunnerDaemonChild, RunnerFixture } from '../support/runner-cli.ts';
import { testDialects } from '../support/server.ts';

/** A job whose first step sleeps 600 s in the background of its shell and writes the sleep's pid. */
function sleeper(label: string, pidFile: string): string {
  return `on: workflow_dispatch
jobs:
  sleepy:
    runs-on: ${label}
    steps:
      - run: |
          sleep 600 &
          echo $! > ${pidFile}
          echo "sleeping"
          wait
      - run: echo "must not run after a cancel"
      - if: always()
        run: echo "cleanup after the cancel"
`;
}

/** True while `pid` is a live process (a zombie waiting to be reaped counts as gone). */
async function alive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

async function readPid(file: string, timeoutMs = 60_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = await fs.readFile(file, 'utf8').catch(() => '');
    if (/^\d+\s*$/.test(text)) return Number(text);
    if (Date.now() > deadline) throw new Error(`${file} was never written`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

for (const dialect of testDialects()) {
  describe(`stopping jobs of gantry runner daemon [${dialect}]`, () => {
    let f: RunnerFixture;
    let terminated: RunnerDaemonChild;

    before(async () => {
      f = await startRunnerFixture(dialect);
      await f.push({
        '.forgejo/workflows/cancel.yml': sleeper('cli-cancel', path.join(f.dir, 'cancel.pid')),
        '.forgejo/workflows/term.yml': sleeper('cli-term', path.join(f.dir, 'term.pid')),
      });
      // Both daemons start together: each costs seconds of start-up.
      [, terminated] = await Promise.all([
        f.startDaemon('canceller', 'cli-cancel'),
        f.startDaemon('terminated', 'cli-term', { env: { GANTRY_RUNNER_SHUTDOWN_TIMEOUT: '1' } }),
      ]);
    });

    after(async () => {
      await f?.stop();
    });

    test('cancel through the API kills a sleep 600 step within 5 s and runs the if: always() step', async () => {
      const runId = await f.dispatch('cancel.yml');
      const pid = await readPid(path.join(f.dir, 'cancel.pid'));
      assert.equal(await alive(pid), true);
      const cancelled = Date.now();
      const res = await f.s.api('POST', `/repos/alice/app/actions/runs/${runId}/cancel`, { token: f.alice.token });
      assert.equal(res.status, 204, res.text);
      while (await alive(pid)) {
        assert.ok(Date.now() - cancelled < 5000, 'the sleep outlived the cancel by 5 s');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const run = await f.waitForRun(runId);
      assert.equal(run.status, 'cancelled');
      const [job] = await f.jobsOf(runId);
      assert.ok(job);
      // The runner's last report must not turn the cancelled job into something else.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      assert.equal((await f.jobsOf(runId))[0]?.status, 'cancelled');
      const log = await f.logOf(job.id);
      assert.match(log, /sleeping/);
      assert.match(log, /cleanup after the cancel/);
      assert.ok(!log.includes('must not run after a cancel'), log);
    });

    test('SIGTERM to the daemon mid-job: the job is cancelled after the grace period and reported', async () => {
      const daemon = terminated;
      const runId = await f.dispatch('term.yml');
      const pid = await readPid(path.join(f.dir, 'term.pid'));
      const signalled = Date.now();
      daemon.signal('SIGTERM');
      assert.equal(await daemon.exited(), 0, daemon.output);
      assert.ok(Date.now() - signalled < 15_000, `the daemon took ${Date.now() - signalled} ms to stop`);
      assert.equal(await alive(pid), false, 'the step outlived the daemon');
      const run = await f.waitForRun(runId, 10_000);
      assert.equal(run.status, 'cancelled');
      const [job] = await f.jobsOf(runId);
      assert.ok(job);
      const log = await f.logOf(job.id);
      assert.match(log, /cleanup after the cancel/);
      assert.match(log, /The runner was stopped before the job finished/);
      assert.ok(!log.includes('must not run after a cancel'), log);
      assert.deepEqual(await f.stepsOf(job.id), ['cancelled', 'skipped', 'success']);
    });
  });
}
