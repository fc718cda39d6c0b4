// When a FetchTask's claim is answered. On SQLite a claim commits with the
// other claims and reports of its turn of the event loop (grouped-writes.ts):
// its answer is ready as soon as that group has committed, as a report's is,
// not a turn later, behind every request the server reads meanwhile, when the
// runner sends a request key (forgejo-runner releases of 2026 do: a runner
// that hung up asks again with it and gets the same task). Without one, the
// answer waits that turn to hear a hang-up that came while the group ran
// (runner-protocol.ts).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCurrentUserRepo, dispatchWorkflow } from '@llamaduck/forgejo-ts';
import type { GroupedWrites } from '../../src/models/grouped-writes.ts';
import { findRunnerById } from '../../src/models/runners.ts';
import type { Runner } from '../../src/models/runners.ts';
import { registerRunner } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';
import { countTurns } from '../support/event-loop-turns.ts';

const TWO_LEGS = `on: workflow_dispatch
jobs:
  legs:
    runs-on: answer-turns
    strategy:
      matrix:
        n: [1, 2]
    steps:
      - run: echo \${{ matrix.n }}
`;

for (const dialect of testDialects()) {
  describe(`when a claim is answered [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let work: WorkDir;

    const db = () => s.server.deps.database.db;
    const services = () => s.server.deps.services;

    const runnerOf = async (registrationToken: string): Promise<Runner> => {
      const client = await registerRunner(s.url, registrationToken, { labels: ['answer-turns'] });
      const runner = await findRunnerById(db(), client.credentials?.id ?? 0);
      assert.ok(runner);
      return runner;
    };

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name: 'app' } })).status, 201);
      work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      await work.commit({ '.forgejo/workflows/legs.yml': TWO_LEGS }, 'CI');
      assert.equal((await work.push('main')).code, 0);
    });

    after(async () => {
      await work.remove();
      await s.stop();
    });

    test('a claim with a request key is answered in the turn of the event loop its group commits, as a report of that group is', async () => {
      const token = await services().runners.registrationToken({ ownerId: alice.user.id, repoId: 0 });
      const reporter = await runnerOf(token);
      const claimer = await runnerOf(token);
      const res = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'app', workflowfilename: 'legs.yml' },
        body: { ref: 'main', inputs: {} },
      });
      assert.equal(res.status, 204, JSON.stringify(res.error));
      const first = await services().runnerProtocol.fetchTasks(reporter, { tasksVersion: 0, maxWaitMs: 5000 });
      const running = first.tasks[0];
      assert.ok(running, 'the first runner got a task');

      // Turns of the event loop, counted from here.
      const turns = countTurns();
      // Asked in one turn: the claim and the heartbeat commit together on SQLite. The claim's
      // runner is still there (its signal never aborts), as a fetch over HTTP passes one.
      let claimedAt = -1;
      let reportedAt = -1;
      const claim = services()
        .runnerProtocol.fetchTasks(claimer, {
          tasksVersion: 0,
          maxWaitMs: 5000,
          requestKey: 'answer-turns-1',
          signal: new AbortController().signal,
        })
        .then((result) => {
          claimedAt = turns.now;
          return result;
        });
      const report = services()
        .taskReports.updateTask(reporter, { id: running.id, result: 0, steps: [] }, {})
        .then(() => {
          reportedAt = turns.now;
        });
      const [claimed] = await Promise.all([claim, report]);
      turns.stop();
      assert.equal(claimed.tasks.length, 1, 'the second runner got the other leg');
      if (dialect === 'sqlite') assert.equal(claimedAt, reportedAt, 'answered in the turn its group committed');
    });

    if (dialect === 'sqlite')
      test('a runner without a request key that hangs up while its claim commits gets no task, and its job goes to another', async () => {
        const token = await services().runners.registrationToken({ ownerId: alice.user.id, repoId: 0 });
        const leaving = await runnerOf(token);
        const staying = await runnerOf(token);
        const res = await dispatchWorkflow({
          client: alice.client,
          path: { owner: 'alice', repo: 'app', workflowfilename: 'legs.yml' },
          body: { ref: 'main', inputs: {} },
        });
        assert.equal(res.status, 204, JSON.stringify(res.error));
        // The close of the runner's connection arrives while its claim's group is writing: the
        // event loop hears it in its next turn, as it hears a socket's close. A unit submitted
        // first runs first in the group and schedules that.
        const gone = new AbortController();
        const writes = (services().runnerProtocol as unknown as { writes: GroupedWrites }).writes;
        const closing = writes.run(async () => {
          setImmediate(() => gone.abort());
        });
        const lost = await services().runnerProtocol.fetchTasks(leaving, {
          tasksVersion: 0,
          maxWaitMs: 1000,
          signal: gone.signal,
        });
        await closing;
        assert.equal(gone.signal.aborted, true);
        assert.deepEqual(lost.tasks, [], 'a runner that hung up is handed nothing');
        // Both legs are still there for the runner that stayed.
        const got = new Set<number>();
        for (let i = 0; i < 4 && got.size < 2; i += 1) {
          const result = await services().runnerProtocol.fetchTasks(staying, { tasksVersion: 0, maxWaitMs: 1000 });
          for (const task of result.tasks) {
            got.add(task.id);
            await services().taskReports.updateTask(
              staying,
              { id: task.id, result: 1, stoppedAt: Math.floor(Date.now() / 1000), steps: [] },
              {},
            );
          }
        }
        assert.equal(got.size, 2, 'the other runner got both legs');
      });
  });
}
