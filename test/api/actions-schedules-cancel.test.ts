// Scheduled runs that stop mattering are cancelled, as Forgejo does
// (services/actions/schedule_tasks.go CleanRepoScheduleTasks and
// CancelPreviousJobs): archiving the repository or switching its Actions unit
// off cancels every unfinished `schedule` run of the default branch, a running
// one included (its task stops), and moving the default branch cancels those
// of the old branch (services/repository/branch.go SetRepoDefaultBranch).
// Other runs are left alone: a push run of the same repository, and the
// scheduled runs of a workflow that is merely disabled (Forgejo and Gitea only
// record that setting).
//
// Time: the server's schedule clock runs SPEED times faster than real time
// (GANTRY_TEST_SCHEDULER_CLOCK, as in actions-schedules.test.ts), so a
// `* * * * *` entry fires about once a real second. No runner takes the
// scheduled jobs except where a test claims one, so the runs stay unfinished
// until something cancels them.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCurrentUserRepo } from '@llamaduck/forgejo-ts';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import { registerRunner } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

const SPEED = 60;
const ANCHOR = Date.now();
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface RunJson {
  id: number;
  status: string;
  trigger_event: string;
  prettyref: string;
  workflow_id: string;
}

const NIGHTLY = `on:
  schedule:
    - cron: '* * * * *'
jobs:
  build:
    runs-on: docker
    steps:
      - run: echo nightly
`;

// A push run nobody takes (no runner has the label): it must outlive every cancel here.
const CI = `on: push
jobs:
  test:
    runs-on: nobody-has-this
    steps:
      - run: echo ci
`;

for (const dialect of testDialects()) {
  describe(`cancelling scheduled runs [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let work: WorkDir;

    const runs = async (): Promise<RunJson[]> => {
      const res = await s.api('GET', '/repos/alice/app/actions/runs?limit=50', { token: alice.token });
      assert.equal(res.status, 200, res.text);
      return (res.json as { workflow_runs: RunJson[] }).workflow_runs;
    };
    const scheduleRuns = async (): Promise<RunJson[]> =>
      (await runs()).filter((run) => run.trigger_event === 'schedule');
    /** Waits for `count` scheduled runs newer than `afterId`; returns every scheduled run. */
    const waitForNewScheduleRuns = async (afterId: number, count = 1): Promise<RunJson[]> => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const all = await scheduleRuns();
        if (all.filter((run) => run.id > afterId).length >= count) return all;
        if (Date.now() > deadline) assert.fail(`no ${count} scheduled runs after run ${afterId}`);
        await sleep(200);
      }
    };
    const newestId = async (): Promise<number> => Math.max(0, ...(await runs()).map((run) => run.id));
    const patchRepo = async (body: Record<string, unknown>): Promise<void> => {
      const res = await s.api('PATCH', '/repos/alice/app', { token: alice.token, body });
      assert.equal(res.status, 200, res.text);
    };
    const statusOf = async (runId: number): Promise<string> => {
      const found = (await runs()).find((run) => run.id === runId);
      assert.ok(found, `run ${runId} is listed`);
      return found.status;
    };

    let pushRunId: number;

    before(async () => {
      s = await startTestServer(dialect, { GANTRY_TEST_SCHEDULER_CLOCK: `${ANCHOR}:${SPEED}` });
      alice = await s.createUser('alice');
      assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name: 'app' } })).status, 201);
      work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      await work.commit({ '.forgejo/workflows/nightly.yml': NIGHTLY, '.forgejo/workflows/ci.yml': CI }, 'workflows');
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      const push = (await runs()).find((run) => run.trigger_event === 'push');
      assert.ok(push, 'the push ran ci.yml');
      pushRunId = push.id;
    });

    after(async () => {
      await s?.stop();
      await work?.remove();
    });

    test('disabling the workflow leaves its unfinished scheduled runs as they are', async () => {
      const all = await waitForNewScheduleRuns(0, 2);
      const off = await s.api('PUT', '/repos/alice/app/actions/workflows/nightly.yml/disable', { token: alice.token });
      assert.equal(off.status, 204, off.text);
      for (const run of all) assert.equal(await statusOf(run.id), 'waiting', `run ${run.id}`);
      const on = await s.api('PUT', '/repos/alice/app/actions/workflows/nightly.yml/enable', { token: alice.token });
      assert.equal(on.status, 204, on.text);
    });

    test('archiving cancels every unfinished scheduled run of the default branch, a running one included; a push run stays', async () => {
      await waitForNewScheduleRuns(await newestId());
      // A runner takes one scheduled job: that run is running, the others waiting.
      const token = await s.api('GET', '/repos/alice/app/actions/runners/registration-token', { token: alice.token });
      assert.equal(token.status, 200, token.text);
      const runner = await registerRunner(s.url, (token.json as { token: string }).token, { labels: ['docker'] });
      const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(fetched.task, 'the runner got a scheduled job');
      const unfinished = (await scheduleRuns()).filter((run) => run.status === 'waiting' || run.status === 'running');
      assert.ok(
        unfinished.some((run) => run.status === 'running'),
        'one scheduled run is running',
      );
      assert.ok(unfinished.filter((run) => run.status === 'waiting').length >= 2, 'several are waiting');

      await patchRepo({ archived: true });
      for (const run of await scheduleRuns()) assert.equal(run.status, 'cancelled', `scheduled run ${run.id}`);
      assert.equal(await statusOf(pushRunId), 'waiting', 'the push run is not a scheduled run');
      // The runner hears of it on its next report.
      const report = await runner.runner.updateTask({ state: { id: fetched.task.id, result: Result.UNSPECIFIED } });
      assert.equal(report.state?.result, Result.CANCELLED);

      await patchRepo({ archived: false });
    });

    test('switching Actions off cancels the unfinished scheduled runs too', async () => {
      const before = await newestId();
      const all = await waitForNewScheduleRuns(before, 2);
      const waiting = all.filter((run) => run.id > before);
      for (const run of waiting) assert.equal(run.status, 'waiting');
      await patchRepo({ has_actions: false });
      // The runs API answers 404 while Actions is off: the runs are read back once it is on again.
      await patchRepo({ has_actions: true });
      for (const run of waiting) assert.equal(await statusOf(run.id), 'cancelled', `scheduled run ${run.id}`);
      assert.equal(await statusOf(pushRunId), 'waiting');
    });

    test('moving the default branch cancels the scheduled runs of the old one, and the schedule moves with it', async () => {
      const pushed = await work.push('main:next');
      assert.equal(pushed.code, 0, pushed.stderr);
      const before = await newestId();
      const onMain = (await waitForNewScheduleRuns(before, 2)).filter((run) => run.id > before);
      for (const run of onMain) assert.equal(run.prettyref, 'main');
      await patchRepo({ default_branch: 'next' });
      for (const run of onMain) assert.equal(await statusOf(run.id), 'cancelled', `scheduled run ${run.id}`);
      const moved = await newestId();
      const onNext = (await waitForNewScheduleRuns(moved)).filter((run) => run.id > moved);
      for (const run of onNext) {
        assert.equal(run.prettyref, 'next');
        assert.equal(run.status, 'waiting');
      }
    });
  });
}
