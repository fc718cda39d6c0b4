// Scheduled workflows (`on: schedule`, run-control §4): a cron entry pushed to
// the default branch creates one `schedule` run per tick, as the Actions user,
// on the default branch, with `github.event.schedule`, and no commit status;
// disabling the workflow, archiving the repository or switching Actions off
// stops it, and undoing that brings it back; a spec Forgejo's dialect rejects
// is reported by the workflows API and costs no other schedule; with two
// servers on one database each tick still makes one run.
//
// Time: tests must not wait real minutes. The servers run with the test seam
// GANTRY_TEST_SCHEDULER_CLOCK=<anchor>:<SPEED>: their schedule clock runs
// SPEED times faster than real time from the anchor (the test's start), so a
// `* * * * *` tick comes every 60/SPEED real seconds, and every server given
// the same anchor agrees on the time. The test computes the same scaled time
// (scaledNow) to know how many ticks passed between two observations: each
// passed tick must have made exactly one run, give or take the tick in flight
// at either end (a duplicate per tick would double the count).
//
// Two processes: on PostgreSQL a second server is started in this process on
// the same database and data folder (its own connection pool, scheduler and
// timers), which is what the claim of a tick races on; SQLite serialises all
// writers of its one file.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCurrentUserRepo } from '@llamaduck/forgejo-ts';
import { loadConfig } from '../../src/config.ts';
import { startServer } from '../../src/main.ts';
import { findRepositoryById } from '../../src/models/repos.ts';
import { listDueSchedules } from '../../src/models/schedules.ts';
import type { Schedule } from '../../src/models/schedules.ts';
import type { RunningServer } from '../../src/main.ts';
import { freePort } from '../support/free-port.ts';
import { startTestServer, testDialects, TEST_PASSWORD_HASH_COST } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

/** A scaled minute is 60/SPEED = 1 real second. */
const SPEED = 60;
const ANCHOR = Date.now();
const scaledNow = (): number => ANCHOR + (Date.now() - ANCHOR) * SPEED;
const scaledMinute = (): number => Math.floor(scaledNow() / 60_000);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface RunJson {
  id: number;
  title: string;
  event: string;
  trigger_event: string;
  event_payload: string;
  ScheduleID: number;
  prettyref: string;
  commit_sha: string;
  workflow_id: string;
  trigger_user: { login: string; id: number };
}

const NIGHTLY = `name: Nightly
on:
  schedule:
    - cron: '* * * * *'
jobs:
  build:
    runs-on: docker
    steps:
      - run: echo \${{ github.event.schedule }}
`;

const BROKEN_SPEC = `on:
  push:
  schedule:
    - cron: '* * * *'
    - cron: 'TZ=Mars/Olympus 0 3 * * *'
jobs:
  check:
    runs-on: docker
    steps:
      - run: echo check
`;

for (const dialect of testDialects()) {
  describe(`actions schedules [${dialect}]`, () => {
    let s: TestServer;
    let second: RunningServer | null = null;
    let alice: TestUser;
    let work: WorkDir;
    let headSha: string;

    const scheduleRuns = async (): Promise<RunJson[]> => {
      const res = await s.api('GET', '/repos/alice/app/actions/runs?limit=50', { token: alice.token });
      assert.equal(res.status, 200, res.text);
      return (res.json as { workflow_runs: RunJson[] }).workflow_runs.filter((r) => r.trigger_event === 'schedule');
    };
    const waitForRuns = async (count: number): Promise<RunJson[]> => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const runs = await scheduleRuns();
        if (runs.length >= count) return runs;
        if (Date.now() > deadline) assert.fail(`expected ${count} schedule runs, got ${runs.length}`);
        await sleep(200);
      }
    };
    /** Runs created over `minutes` scaled minutes, checked against the ticks that passed. */
    const runsOver = async (minutes: number): Promise<{ made: number; ticks: number }> => {
      const before = (await scheduleRuns()).length;
      const startMinute = scaledMinute();
      await sleep((minutes * 60_000) / SPEED);
      const ticks = scaledMinute() - startMinute;
      return { made: (await scheduleRuns()).length - before, ticks };
    };
    /** Resolves once a schedule run newer than the ones listed now exists. */
    const resumes = async (): Promise<void> => {
      const known = (await scheduleRuns()).length;
      await waitForRuns(known + 1);
    };
    const patchRepo = async (body: Record<string, unknown>): Promise<void> => {
      const res = await s.api('PATCH', '/repos/alice/app', { token: alice.token, body });
      assert.equal(res.status, 200, res.text);
    };

    before(async () => {
      const env = { GANTRY_TEST_SCHEDULER_CLOCK: `${ANCHOR}:${SPEED}` };
      s = await startTestServer(dialect, env);
      if (dialect === 'postgres') {
        const port = await freePort();
        second = await startServer(
          loadConfig({
            GANTRY_DATA_DIR: s.dataDir,
            GANTRY_HTTP_ADDR: '127.0.0.1',
            GANTRY_HTTP_PORT: String(port),
            GANTRY_ROOT_URL: s.rootUrl,
            GANTRY_LOG_LEVEL: 'silent',
            GANTRY_PASSWORD_HASH_COST: TEST_PASSWORD_HASH_COST,
            GANTRY_DATABASE_URL: s.server.deps.config.databaseUrl ?? '',
            ...env,
          }),
        );
      }
      alice = await s.createUser('alice');
      assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name: 'app' } })).status, 201);
      work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      headSha = await work.commit({ '.forgejo/workflows/nightly.yml': NIGHTLY }, 'Add the nightly workflow');
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
    });

    after(async () => {
      await second?.stop();
      await s?.stop();
      await work?.remove();
    });

    test('a `* * * * *` schedule on the default branch makes one schedule run per tick', async () => {
      const runs = await waitForRuns(2);
      for (const run of runs) {
        assert.equal(run.trigger_event, 'schedule');
        assert.equal(run.event, '', 'Forgejo shows no event for a schedule run');
        assert.equal(run.trigger_user.login, 'forgejo-actions');
        assert.equal(run.prettyref, 'main');
        assert.equal(run.commit_sha, headSha);
        assert.equal(run.workflow_id, 'nightly.yml');
        assert.equal(run.title, 'Nightly');
        assert.ok(run.ScheduleID > 0);
        assert.deepEqual(JSON.parse(run.event_payload), { action: 'schedule', schedule: '* * * * *' });
      }
      const { made, ticks } = await runsOver(4);
      assert.ok(ticks >= 3, `the test slept ${ticks} ticks`);
      assert.ok(made <= ticks + 1 && made >= ticks - 1, `${made} runs for ${ticks} ticks`);
    });

    test('a tick fired by two processes from the same snapshot makes one run', async () => {
      // Both schedulers paused, so that this test holds the only snapshot of the due row.
      const services = [s.server.deps.services, (second ?? s.server).deps.services];
      await Promise.all(services.map((svc) => svc.scheduler.stop()));
      try {
        const db = s.server.deps.database.db;
        let due: Schedule[] = [];
        const deadline = Date.now() + 10_000;
        while (due.length === 0 && Date.now() < deadline) {
          await sleep(50);
          due = await listDueSchedules(db, Math.floor(scaledNow() / 1000), 10);
        }
        assert.equal(due.length, 1);
        const snapshot = due[0] as Schedule;
        const before = (await scheduleRuns()).length;
        const outcomes = await Promise.all(services.map((svc) => svc.schedules.fire(snapshot)));
        assert.deepEqual(outcomes.sort(), ['fired', 'taken']);
        // A late one (a process that read the row before the first commit) finds it taken too.
        assert.equal(await services[0]?.schedules.fire(snapshot), 'taken');
        assert.equal((await scheduleRuns()).length, before + 1);
      } finally {
        for (const svc of services) svc.scheduler.start();
      }
    });

    test('registrations racing in two processes leave each entry registered once', async () => {
      const id = ((await s.api('GET', '/repos/alice/app', { token: alice.token })).json as { id: number }).id;
      const db = s.server.deps.database.db;
      const repo = await findRepositoryById(db, id);
      assert.ok(repo);
      const services = [s.server.deps.services, (second ?? s.server).deps.services];
      await Promise.all(Array.from({ length: 30 }, (_, i) => services[i % 2]?.schedules.syncRepository(repo)));
      const rows = await db.selectFrom('action_schedule').select(['workflow_id', 'spec']).execute();
      assert.deepEqual(rows, [{ workflow_id: 'nightly.yml', spec: '* * * * *' }]);
    });

    test('a schedule run writes no commit status', async () => {
      const res = await s.api('GET', `/repos/alice/app/statuses/${headSha}`, { token: alice.token });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json, []);
    });

    test('a disabled workflow’s schedule stops; enabling it starts it again', async () => {
      const off = await s.api('PUT', '/repos/alice/app/actions/workflows/nightly.yml/disable', { token: alice.token });
      assert.equal(off.status, 204, off.text);
      assert.equal((await runsOver(2)).made, 0);
      const on = await s.api('PUT', '/repos/alice/app/actions/workflows/nightly.yml/enable', { token: alice.token });
      assert.equal(on.status, 204, on.text);
      await resumes();
    });

    test('archiving the repository or switching Actions off stops the schedule; undoing it resumes', async () => {
      await patchRepo({ archived: true });
      assert.equal((await runsOver(2)).made, 0);
      await patchRepo({ archived: false });
      await resumes();

      // With Actions off the runs API answers 404: the runs are counted in the database instead.
      const stored = async (): Promise<number> => {
        const row = await s.server.deps.database.db
          .selectFrom('action_run')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('trigger_event', '=', 'schedule')
          .executeTakeFirstOrThrow();
        return Number(row.n);
      };
      const before = await stored();
      await patchRepo({ has_actions: false });
      await sleep((2 * 60_000) / SPEED);
      assert.equal(await stored(), before);
      await patchRepo({ has_actions: true });
      await resumes();
    });

    test('a spec Forgejo rejects is reported on the workflow and the other schedules keep firing', async () => {
      await work.commit({ '.forgejo/workflows/broken.yml': BROKEN_SPEC }, 'Add a workflow with bad schedules');
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);

      const res = await s.api('GET', '/repos/alice/app/actions/workflows/broken.yml', { token: alice.token });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual((res.json as { schedule_errors?: string[] }).schedule_errors, [
        'invalid cron spec "* * * *": expected exactly 5 fields, got 4',
        'invalid cron spec "TZ=Mars/Olympus 0 3 * * *": unknown time zone "Mars/Olympus"',
      ]);
      const nightly = await s.api('GET', '/repos/alice/app/actions/workflows/nightly.yml', { token: alice.token });
      assert.equal((nightly.json as { schedule_errors?: string[] }).schedule_errors, undefined);

      // Its push trigger is unaffected: the push ran it.
      const all = await s.api('GET', '/repos/alice/app/actions/runs?limit=50', { token: alice.token });
      const pushRuns = (all.json as { workflow_runs: RunJson[] }).workflow_runs.filter(
        (r) => r.workflow_id === 'broken.yml',
      );
      assert.deepEqual(
        pushRuns.map((r) => r.trigger_event),
        ['push'],
      );
      const { made, ticks } = await runsOver(3);
      assert.ok(made >= ticks - 1 && made <= ticks + 1, `${made} runs for ${ticks} ticks`);
      const latest = (await scheduleRuns()).filter((r) => r.workflow_id === 'broken.yml');
      assert.equal(latest.length, 0);
    });

    test('a push that removes the schedule stops it', async () => {
      await work.commit({ '.forgejo/workflows/nightly.yml': null }, 'Remove the nightly workflow');
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      assert.equal((await runsOver(2)).made, 0);
    });
  });
}
