// A runner fleet at scale (issue 18): what an idle poll may write, how soon a
// runner deleted through one Gantry server is refused by another that cached
// it (runner-identity-cache.ts promises one second), and exactly-once claims
// when 200 runners race for 1,000 jobs (spread over two servers sharing the
// database on PostgreSQL). The second server is a `gantry web` process of its own (its own
// caches, its own version watch) on the first one's database: the data
// folder's SQLite file, or the PostgreSQL database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Code, ConnectError } from '@connectrpc/connect';
import { createCurrentUserRepo, deleteRepoRunner, dispatchWorkflow } from '@llamaduck/forgejo-ts';
import { findRepository } from '../../src/models/repos.ts';
import type { Repository } from '../../src/models/repos.ts';
import { ActionStatus } from '../../src/modules/actions-status.ts';
import { answer } from '../support/actions.ts';
import type { GantryChild } from '../support/gantry-child.ts';
import { startSecondProcess } from '../support/second-process.ts';
import { createRunnerClient, registerRunner } from '../support/runner-client.ts';
import type { RunnerClient } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';

const SECRET_KEY = 'runner-fleet-test-key-0123456789abcdef01';
const RACE_RUNNERS = 200;
const RACE_JOBS = 1000;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A workflow of one job with `legs` matrix legs (a matrix has at most 256). */
function matrix(label: string, legs: number): string {
  const values = Array.from({ length: legs }, (_, i) => i).join(', ');
  return `on: workflow_dispatch
jobs:
  leg:
    runs-on: ${label}
    strategy:
      matrix:
        n: [${values}]
    steps:
      - run: echo \${{ matrix.n }}
`;
}

function isConnect(error: unknown, code: Code): boolean {
  return error instanceof ConnectError && error.code === code;
}

for (const dialect of testDialects()) {
  describe(`runner fleet [${dialect}]`, () => {
    let s: TestServer;
    let second: GantryChild;
    let alice: TestUser;
    let app: Repository;
    let registrationToken: string;
    const db = () => s.server.deps.database.db;

    before(async () => {
      s = await startTestServer(dialect, { GANTRY_SECRET_KEY: SECRET_KEY });
      second = await startSecondProcess(s, { env: { GANTRY_SECRET_KEY: SECRET_KEY }, ownRootUrl: true });
      alice = await s.createUser('alice');
      assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name: 'app' } })).status, 201);
      const found = await findRepository(db(), alice.user.id, 'app');
      assert.ok(found);
      app = found;
      const work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      try {
        await work.commit({ '.forgejo/workflows/race.yml': matrix('fleet-race', 250) }, 'Add the race workflow');
        assert.equal((await work.push('main')).code, 0);
      } finally {
        await work.remove();
      }
      registrationToken = await s.server.deps.services.runners.registrationToken({ ownerId: 0, repoId: app.id });
    });

    after(async () => {
      await second?.stop();
      await s?.stop();
    });

    const lastOnline = async (uuid: string): Promise<number> =>
      (await db().selectFrom('action_runner').select('last_online').where('uuid', '=', uuid).executeTakeFirstOrThrow())
        .last_online;

    test('an idle runner polling every second writes its last_online once, not on every poll', async () => {
      const client = await registerRunner(s.url, registrationToken, { labels: ['fleet-idle'] });
      const first = await client.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 600 });
      assert.equal(first.task, undefined);
      const seen = await lastOnline(client.credentials?.uuid ?? '');
      assert.ok(seen > 0, 'the first call marks the runner online');
      for (let i = 0; i < 3; i += 1) {
        // A new second each time: a write per second would move last_online.
        await sleep(1100);
        assert.equal((await client.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 600 })).task, undefined);
      }
      assert.equal(await lastOnline(client.credentials?.uuid ?? ''), seen, 'polls within 10 s do not write it again');
    });

    test('a runner deleted through one server is refused by the other, which had cached it, within a second', async () => {
      const registered = await registerRunner(s.url, registrationToken, { labels: ['fleet-delete'] });
      const credentials = registered.credentials ?? undefined;
      assert.ok(credentials);
      const elsewhere = createRunnerClient(second.url, { credentials });
      // The other server authenticates it (and caches it).
      await elsewhere.runner.declare({ version: 'v1', labels: ['fleet-delete'] });
      assert.equal((await elsewhere.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 600 })).task, undefined);
      const deleted = await answer(
        deleteRepoRunner({
          client: alice.client,
          path: { owner: 'alice', repo: 'app', runner_id: String(credentials.id) },
        }),
      );
      assert.equal(deleted.status, 204);
      const started = Date.now();
      let refusedAfter: number | null = null;
      while (Date.now() - started < 5000) {
        try {
          // Answered "no task" while the other server still takes the runner for registered.
          await elsewhere.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 600 });
        } catch (error) {
          assert.ok(isConnect(error, Code.Unauthenticated), String(error));
          refusedAfter = Date.now() - started;
          break;
        }
        await sleep(50);
      }
      assert.notEqual(refusedAfter, null, 'the other server still accepts the deleted runner after 5 s');
      // The promise is one second; allow for a slow shared machine.
      assert.ok((refusedAfter ?? 0) <= 2500, `refused only after ${refusedAfter} ms`);
      // And this server at once.
      await assert.rejects(registered.runner.declare({ version: 'v1', labels: ['fleet-delete'] }), (error) =>
        isConnect(error, Code.Unauthenticated),
      );
    });

    // Two processes on one SQLite file take turns at its write lock, and better-sqlite3 waits for
    // it synchronously (busy_timeout), stalling the waiting process's event loop: on SQLite the
    // race runs on one server (its claims still queue on the one connection); the scale-out
    // deployment is PostgreSQL's.
    test(`${RACE_RUNNERS} runners (on two servers on PostgreSQL) race for ${RACE_JOBS} jobs: every job is claimed exactly once`, async () => {
      const runners: RunnerClient[] = [];
      for (let i = 0; i < RACE_RUNNERS; i += 20) {
        const batch = await Promise.all(
          Array.from({ length: 20 }, () => registerRunner(s.url, registrationToken, { labels: ['fleet-race'] })),
        );
        // On PostgreSQL every other runner talks to the second server, with the same credentials.
        runners.push(
          ...batch.map((client, k) =>
            k % 2 === 0 || dialect !== 'postgres'
              ? client
              : createRunnerClient(second.url, { credentials: client.credentials ?? undefined }),
          ),
        );
      }
      const runIds: number[] = [];
      for (let i = 0; i < RACE_JOBS / 250; i += 1) {
        const res = await dispatchWorkflow({
          client: alice.client,
          path: { owner: 'alice', repo: 'app', workflowfilename: 'race.yml' },
          body: { ref: 'main', inputs: {}, return_run_info: true },
        });
        assert.equal(res.status, 201, JSON.stringify(res.error));
        runIds.push((res.data as { id: number }).id);
      }
      const claimed: number[] = [];
      const waiting = async (): Promise<number> =>
        Number(
          (
            await db()
              .selectFrom('action_run_job')
              .select((eb) => eb.fn.countAll<number>().as('n'))
              .where('run_id', 'in', runIds)
              .where('status', '=', ActionStatus.waiting)
              .executeTakeFirstOrThrow()
          ).n,
        );
      const deadline = Date.now() + 240_000;
      // One round: every runner fetches until the watcher sees no waiting job.
      const round = async (): Promise<void> => {
        let drained = false;
        const watcher = (async () => {
          while (!drained) {
            await sleep(500);
            if ((await waiting()) === 0) drained = true;
          }
        })();
        await Promise.all(
          runners.map(async (client) => {
            while (!drained && Date.now() < deadline) {
              let res;
              try {
                res = await client.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 5000 });
              } catch (error) {
                // A runner whose fetch ran out of time asks again (a claim it missed is given back).
                if (isConnect(error, Code.DeadlineExceeded)) continue;
                throw error;
              }
              if (res.task !== undefined) claimed.push(Number(res.task.id));
            }
          }),
        );
        drained = true;
        await watcher;
      };
      // A claim whose runner gave up waiting is given back when the server sees the hang-up, which
      // on a loaded machine can be after the watcher saw nothing waiting: a job back in the queue
      // gets another round, until nothing is waiting twice in a row, 2 s apart, with no fetch out.
      let quietChecks = 0;
      while (quietChecks < 2 && Date.now() < deadline) {
        if ((await waiting()) === 0) {
          quietChecks += 1;
          await sleep(2000);
        } else {
          quietChecks = 0;
          await round();
        }
      }
      assert.equal(await waiting(), 0, 'every job was claimed');
      assert.equal(new Set(claimed).size, claimed.length, 'no task handed out twice');
      const jobs = await db().selectFrom('action_run_job').selectAll().where('run_id', 'in', runIds).execute();
      assert.equal(jobs.length, RACE_JOBS);
      assert.ok(jobs.every((job) => job.status === ActionStatus.running && job.task_id > 0));
      const held = new Set(jobs.map((job) => job.task_id));
      assert.equal(held.size, RACE_JOBS, 'each job holds a task of its own');
      // On a loaded machine an answer can arrive after its runner's deadline (then the runner never
      // learns of that task, and the zombie sweep fails it later); every task a runner did get is its job's.
      assert.ok(
        claimed.every((id) => held.has(id)),
        'every task handed out is the one its job holds',
      );
      assert.ok(claimed.length > 0, 'no answer reached its runner');
      const tasks = await db()
        .selectFrom('action_task')
        .select('id')
        .where(
          'job_id',
          'in',
          jobs.map((job) => job.id),
        )
        .execute();
      assert.equal(tasks.length, RACE_JOBS, 'no orphan task rows');
      const runs = await db().selectFrom('action_run').select('status').where('id', 'in', runIds).execute();
      assert.ok(
        runs.every((run) => run.status === ActionStatus.running),
        'every run is running',
      );
    });
  });
}
