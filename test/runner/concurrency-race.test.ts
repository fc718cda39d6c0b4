// A queue-behind concurrency group with two Gantry processes on one database:
// runs are dispatched through both processes while runners polling both
// claim and finish the group's jobs through either. Gantry must never hand
// out a job of the group while another is handed out and unfinished, and
// must run them oldest first (services/actions/concurrency.ts).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ActionStatus } from '../../src/modules/actions-status.ts';
import type { GantryChild } from '../support/gantry-child.ts';
import { startSecondProcess } from '../support/second-process.ts';
import { memberLoop, registerCrossRunners } from '../support/cross-runners.ts';
import type { GroupWatch } from '../support/cross-runners.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

const WORKFLOW =
  'on: workflow_dispatch\nconcurrency:\n  group: race\n  cancel-in-progress: false\njobs:\n  work:\n    runs-on: race\n    steps:\n      - run: echo race\n';
const RUNS = 12;
/** Runs dispatched before the runners start; the rest arrive while they work. */
const FIRST_RUNS = 2;
const RUNNERS_PER_PROCESS = 2;
const DEADLINE_MS = 90_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const dialect of testDialects()) {
  describe(`queue-behind group across two processes [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let work: WorkDir;
    let second: GantryChild;
    let registrationToken: string;

    const db = () => s.server.deps.database.db;

    const dispatch = async (baseUrl: string): Promise<number> => {
      const res = await fetch(`${baseUrl}/api/v1/repos/alice/app/actions/workflows/race.yml/dispatches`, {
        method: 'POST',
        headers: { authorization: `token ${alice.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ ref: 'main', return_run_info: true }),
      });
      const text = await res.text();
      assert.equal(res.status, 201, text);
      return (JSON.parse(text) as { id: number }).id;
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
      work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      await work.commit({ '.forgejo/workflows/race.yml': WORKFLOW }, 'Add workflow');
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      const token = await s.api('GET', '/repos/alice/app/actions/runners/registration-token', { token: alice.token });
      assert.equal(token.status, 200, token.text);
      registrationToken = (token.json as { token: string }).token;
      second = await startSecondProcess(s);
    });

    after(async () => {
      await second?.stop();
      await work?.remove();
      await s?.stop();
    });

    test('never two released members, oldest first, while both processes create, claim and finish', async () => {
      const urls = [s.url, second.url] as const;
      // Each runner polls one process and reports through the other.
      const runners = await registerCrossRunners(urls, registrationToken, RUNNERS_PER_PROCESS * urls.length, 'race');

      const created: number[] = [];
      for (let i = 0; i < FIRST_RUNS; i += 1) created.push(await dispatch(urls[i % 2] as string));

      const watch: GroupWatch = { order: [], violations: [] };
      const { order, violations } = watch;
      const inFlight = { count: 0 };
      const deadline = Date.now() + DEADLINE_MS;
      const loops = runners.map((runner) =>
        memberLoop(runner, watch, inFlight, releasedJobs, () => order.length >= RUNS || Date.now() >= deadline),
      );
      // The rest of the runs arrive through both processes, two at a time, while the runners work.
      for (let i = FIRST_RUNS; i < RUNS; i += 2) {
        created.push(...(await Promise.all([dispatch(urls[0] as string), dispatch(urls[1] as string)])));
        await sleep(Math.floor(Math.random() * 40));
      }
      await Promise.all(loops);

      assert.deepEqual(violations, []);
      assert.equal(order.length, RUNS, 'every run ran');
      assert.deepEqual(
        order,
        [...created].sort((a, b) => a - b),
        'one at a time, oldest first',
      );
      const statuses = await db().selectFrom('action_run').select('status').where('id', 'in', created).execute();
      assert.ok(statuses.every((run) => run.status === ActionStatus.success));
    });
  });
}
