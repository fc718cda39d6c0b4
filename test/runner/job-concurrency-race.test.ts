// A job-level concurrency group with two Gantry processes on one database:
// runs are dispatched through both processes while runners polling both
// claim and finish the group's jobs through either, and each run's other job
// (in no group) finishes beside them. Gantry must never hand out a job of the
// group while another is handed out and unfinished, must never hand out one
// it cancelled, and must run the newest; a job is cancelled only when a newer
// one arrived, so those that ran ran oldest first
// (services/actions/job-concurrency.ts).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ActionStatus } from '../../src/modules/actions-status.ts';
import type { GantryChild } from '../support/gantry-child.ts';
import { startSecondProcess } from '../support/second-process.ts';
import { memberLoop, registerCrossRunner, registerCrossRunners, reportSuccess } from '../support/cross-runners.ts';
import type { GroupWatch } from '../support/cross-runners.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

// `side` finishes whenever its runner gets to it: its reports settle the runs
// of the group's jobs while they are admitted and released. In race-needs.yml
// `work` needs `side`, so it is admitted when a side report (through either
// process) makes it ready, racing the releases.
const work = (needs: string): string =>
  `on: workflow_dispatch\njobs:\n  work:\n    runs-on: race\n${needs}    concurrency:\n      group: Race\n      cancel-in-progress: false\n    steps:\n      - run: echo race\n` +
  '  side:\n    runs-on: side\n    steps:\n      - run: echo side\n';
const WORKFLOWS = { 'race.yml': work(''), 'race-needs.yml': work('    needs: side\n') };
const RUNS = 12;
/** Runs dispatched before the runners start (in race.yml the middle ones are replaced at once); the rest arrive while they work. */
const FIRST_RUNS = 4;
const RUNNERS_PER_PROCESS = 2;
const DEADLINE_MS = 90_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const dialect of testDialects()) {
  describe(`job-level group across two processes [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let repo: WorkDir;
    let second: GantryChild;
    let registrationToken: string;

    const db = () => s.server.deps.database.db;

    const dispatch = async (baseUrl: string, file: string): Promise<number> => {
      const res = await fetch(`${baseUrl}/api/v1/repos/alice/app/actions/workflows/${file}/dispatches`, {
        method: 'POST',
        headers: { authorization: `token ${alice.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ref: 'main', return_run_info: true }),
      });
      const text = await res.text();
      assert.equal(res.status, 201, text);
      return (JSON.parse(text) as { id: number }).id;
    };

    /** Runs whose grouped job is not done yet (the `work` jobs still to run or be cancelled). */
    const unfinishedWork = async (runIds: readonly number[]): Promise<number> => {
      const row = await db()
        .selectFrom('action_run_job')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('run_id', 'in', [...runIds])
        .where('job_id', '=', 'work')
        .where('status', 'not in', [ActionStatus.success, ActionStatus.cancelled, ActionStatus.failure])
        .executeTakeFirstOrThrow();
      return Number(row.n);
    };

    /** Jobs of the group a runner may hold now: waiting (claimable) or running. */
    const releasedJobs = async (): Promise<number> => {
      const row = await db()
        .selectFrom('action_run_job')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('status', 'in', [ActionStatus.waiting, ActionStatus.running])
        .where('job_id', '=', 'work')
        .executeTakeFirstOrThrow();
      return Number(row.n);
    };

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      assert.equal((await s.api('POST', '/user/repos', { token: alice.token, body: { name: 'app' } })).status, 201);
      repo = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      await repo.commit(
        Object.fromEntries(Object.entries(WORKFLOWS).map(([file, text]) => [`.forgejo/workflows/${file}`, text])),
        'Add workflows',
      );
      const pushed = await repo.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      const token = await s.api('GET', '/repos/alice/app/actions/runners/registration-token', { token: alice.token });
      assert.equal(token.status, 200, token.text);
      registrationToken = (token.json as { token: string }).token;
      second = await startSecondProcess(s);
    });

    after(async () => {
      await second?.stop();
      await repo?.remove();
      await s?.stop();
    });

    /** `inOrder`: the group's jobs are ready in creation order (no needs), so the newest created runs last. */
    const race = async (file: string, inOrder: boolean): Promise<void> => {
      const urls = [s.url, second.url] as const;
      // Each runner polls one process and reports through the other.
      const runners = await registerCrossRunners(urls, registrationToken, RUNNERS_PER_PROCESS * urls.length, 'race');

      const created: number[] = [];
      for (let i = 0; i < FIRST_RUNS; i += 1) created.push(await dispatch(urls[i % 2] as string, file));

      const group: GroupWatch = { order: [], violations: [] };
      const { order, violations } = group;
      const inFlight = { count: 0 };
      const deadline = Date.now() + DEADLINE_MS;
      // Over once every run was created and its grouped job ran or was cancelled.
      let over = false;
      const watch = (async () => {
        while (Date.now() < deadline) {
          if (created.length === RUNS && (await unfinishedWork(created)) === 0) break;
          await sleep(50);
        }
        over = true;
      })();
      const loops = runners.map((runner) => memberLoop(runner, group, inFlight, releasedJobs, () => over));
      // A runner of each process takes the runs' `side` jobs as they come, reporting through the other.
      const sideLoops = urls.map(async (url, i) => {
        const { fetcher, reporter } = await registerCrossRunner(
          url,
          urls[(i + 1) % 2] as string,
          registrationToken,
          `side-${i}`,
          'side',
        );
        while (!over) {
          const task = await fetcher.runner.fetchTask({ tasksVersion: 0n });
          if (task.task === undefined) {
            await sleep(20);
            continue;
          }
          await sleep(Math.floor(Math.random() * 30));
          await reportSuccess(reporter, task.task.id);
        }
      });
      // The rest of the runs arrive through both processes, two at a time, while the runners work.
      for (let i = FIRST_RUNS; i < RUNS; i += 2) {
        created.push(...(await Promise.all([dispatch(urls[0] as string, file), dispatch(urls[1] as string, file)])));
        await sleep(Math.floor(Math.random() * 40));
      }
      await Promise.all([watch, ...loops, ...sideLoops]);
      // Side jobs the loops left when the group's last job ended.
      const { fetcher: side } = await registerCrossRunner(s.url, s.url, registrationToken, 'side-last', 'side');
      for (;;) {
        const task = await side.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 1200 });
        if (task.task === undefined) break;
        await reportSuccess(side, task.task.id);
      }

      assert.deepEqual(violations, []);
      assert.equal(await unfinishedWork(created), 0, 'every grouped job ran or was cancelled');
      const works = await db()
        .selectFrom('action_run_job')
        .select(['run_id', 'status'])
        .where('run_id', 'in', created)
        .where('job_id', '=', 'work')
        .orderBy('run_id')
        .execute();
      const ran = works.filter((job) => job.status === ActionStatus.success).map((job) => job.run_id);
      const cancelled = works.filter((job) => job.status === ActionStatus.cancelled).map((job) => job.run_id);
      assert.equal(ran.length + cancelled.length, RUNS, 'each grouped job ran or was cancelled');
      assert.deepEqual(
        [...order].sort((a, b) => a - b),
        ran.sort((a, b) => a - b),
        'each job that ran ran once; no cancelled one reached a runner',
      );
      const sorted = [...created].sort((a, b) => a - b);
      if (inOrder) {
        assert.deepEqual(
          order,
          [...order].sort((a, b) => a - b),
          'the jobs that ran ran oldest first',
        );
        assert.equal(order.at(-1), sorted.at(-1), 'the newest ran');
        assert.deepEqual(
          cancelled.filter((id) => sorted.slice(1, FIRST_RUNS - 1).includes(id)),
          sorted.slice(1, FIRST_RUNS - 1),
          'a pending job is replaced by the newer one',
        );
      }
      const statuses = await db()
        .selectFrom('action_run')
        .select(['id', 'status'])
        .where('id', 'in', created)
        .execute();
      for (const run of statuses)
        assert.equal(run.status, ran.includes(run.id) ? ActionStatus.success : ActionStatus.cancelled, `run ${run.id}`);
    };

    test('never two released members, the newest kept, while both processes create, claim and finish', () =>
      race('race.yml', true));

    test('never two released members while jobs are admitted as their needs finish in either process', () =>
      race('race-needs.yml', false));
  });
}
