// Crash test: a real `gantry web` process is killed with SIGKILL at random
// moments, 20 times, while clients create repositories, write variables and
// secrets, dispatch workflows, push commits, and runners claim and run tasks
// (test/support/crash-load.ts), with an organization webhook delivering to a
// local receiver. After every restart (same data folder, database and port):
// every acknowledged write reads back through the API, the database passes
// its integrity check and the cross-table invariants (support/crash-invariants.ts).
// At the end: writes lost at a kill and retried are all in, each pending
// webhook delivery has reached the receiver, and no task is left running
// without a runner (runners finish theirs; housekeeping fails the rest).
//
// The kill moments come from a seeded PRNG: the seed is printed, and
// GANTRY_CRASH_SEED=<seed> replays the same delays and client choices (the
// interleaving of the clients is timing, not the seed). GANTRY_CRASH_KILLS
// changes the number of kills.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../src/config.ts';
import { Result } from '../src/gen/runner/v1/messages_pb.ts';
import { createDeps } from '../src/deps.ts';
import { initBareRepository, isProvisional, markProvisional } from '../src/modules/git/index.ts';
import { ActionsHousekeeping } from '../src/services/actions/housekeeping.ts';
import type { Clock } from '../src/modules/clock.ts';
import { CrashLoad, seededRandom } from './support/crash-load.ts';
import type { Ledger } from './support/crash-load.ts';
import { findBrokenInvariants } from './support/crash-invariants.ts';
import type { DatabaseLocation } from './support/crash-invariants.ts';
import { freePort } from './support/free-port.ts';
import { GantryChild } from './support/gantry-child.ts';
import { createScratchPgDatabase } from './support/pg-database.ts';
import { decodeTask, registerRunner } from './support/runner-client.ts';
import type { RunnerClient } from './support/runner-client.ts';
import { TEST_PASSWORD_HASH_COST, startTestServer, testDialects } from './support/server.ts';
import { startWebhookReceiver } from './support/webhook-receiver.ts';
import type { WebhookReceiver } from './support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from './support/workdir.ts';
import type { WorkDir } from './support/workdir.ts';

const KILLS = Number(process.env.GANTRY_CRASH_KILLS ?? 20);
const SEED = process.env.GANTRY_CRASH_SEED
  ? Number(process.env.GANTRY_CRASH_SEED)
  : Math.floor(Math.random() * 2 ** 31);
/**
 * Before each kill the load runs until this many writes were acknowledged
 * since the restart (a cold process on a busy machine answers slowly; a kill
 * before any answer tests nothing), then for a random 0–1.5 s more.
 */
const ACKS_BEFORE_KILL = 4;
const KILL_DELAY_MAX_MS = 1500;
/** The kill after which the doomed runner walks away from its task (or the next one, if it holds none yet). */
const ABANDON_AT_KILL = Math.max(1, Math.floor(KILLS / 2));
/** The delivery worker's lease (60 s) plus room for a busy machine. */
const DELIVERY_DEADLINE_MS = 150_000;

const ORG = 'crash';
const REPO = 'app';
const VARIABLES = ['V0', 'V1', 'V2', 'V3', 'V4'];
const SECRETS = ['S0', 'S1', 'S2', 'S3', 'S4', 'S5'];
// ci.yml: every run must run, so a push must not cancel the push run before
// it (Forgejo's default): a push run's group is its own commit, a dispatch's
// empty, and `cancel-in-progress: false` cancels nothing.
const WORKFLOWS = {
  '.forgejo/workflows/ci.yml':
    "on:\n  push: { branches: [main] }\n  workflow_dispatch:\nconcurrency:\n  group: ${{ github.event_name == 'push' && github.sha || '' }}\n  cancel-in-progress: false\n" +
    'jobs:\n  build:\n    runs-on: crash\n    steps:\n      - run: echo build\n',
  '.forgejo/workflows/final.yml':
    'on: workflow_dispatch\njobs:\n  final:\n    runs-on: crash-final\n    steps:\n      - run: echo final\n',
};

interface Api {
  (
    method: string,
    apiPath: string,
    body?: unknown,
  ): Promise<{ status: number; text: string; json: unknown; headers: Headers }>;
}

function apiFor(url: string, token: string): Api {
  return async (method, apiPath, body) => {
    const response = await fetch(`${url}/api/v1${apiPath}`, {
      method,
      headers: {
        authorization: `token ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    return { status: response.status, text, json, headers: response.headers };
  };
}

/** Every item of a paginated list (`limit` 50), by `X-Total-Count` or the `{items, total_count}` body. */
async function listAll<T>(api: Api, apiPath: string, items?: string): Promise<T[]> {
  const all: T[] = [];
  for (let page = 1; ; page += 1) {
    const res = await api('GET', `${apiPath}${apiPath.includes('?') ? '&' : '?'}limit=50&page=${page}`);
    assert.equal(res.status, 200, `GET ${apiPath}: ${res.text}`);
    const body = res.json as Record<string, unknown>;
    const batch = (items === undefined ? res.json : body[items]) as T[];
    const total = items === undefined ? Number(res.headers.get('x-total-count')) : Number(body.total_count);
    all.push(...batch);
    if (batch.length === 0 || all.length >= total) return all;
  }
}

interface RunJson {
  id: number;
  index_in_repo: number;
  event: string;
  trigger_event: string;
  commit_sha: string;
}

interface TaskJson {
  id: number;
  status: string;
  name: string;
}

/** Every acknowledged write reads back as written (pending, i.e. lost, writes may or may not be in). */
async function checkAcknowledged(api: Api, ledger: Ledger, work: WorkDir, when: string): Promise<void> {
  const names = [...ledger.repos];
  for (let i = 0; i < names.length; i += 8) {
    await Promise.all(
      names.slice(i, i + 8).map(async (name) => {
        const res = await api('GET', `/repos/${ORG}/${name}`);
        assert.equal(res.status, 200, `${when}: the acknowledged repository ${ORG}/${name} answers ${res.status}`);
        assert.equal((res.json as { full_name: string }).full_name, `${ORG}/${name}`);
      }),
    );
  }

  const variables = new Map(
    (await listAll<{ name: string; data: string }>(api, `/repos/${ORG}/${REPO}/actions/variables`)).map((v) => [
      v.name,
      v.data,
    ]),
  );
  for (const [name, { acked, pending }] of ledger.variables) {
    const allowed = [acked, pending].filter((v): v is string => v !== null);
    assert.ok(
      allowed.includes(variables.get(name) ?? ''),
      `${when}: variable ${name} is ${JSON.stringify(variables.get(name))}, acknowledged ${JSON.stringify(acked)}, in flight ${JSON.stringify(pending)}`,
    );
  }

  const secrets = new Set(
    (await listAll<{ name: string }>(api, `/repos/${ORG}/${REPO}/actions/secrets`)).map((s) => s.name),
  );
  for (const [name, { acked }] of ledger.secrets) {
    if (acked !== null) assert.ok(secrets.has(name), `${when}: the acknowledged secret ${name} is not listed`);
  }

  const runs = await listAll<RunJson>(api, `/repos/${ORG}/${REPO}/actions/runs`, 'workflow_runs');
  const byId = new Map(runs.map((r) => [r.id, r]));
  const numbers = runs.map((r) => r.index_in_repo).sort((a, b) => a - b);
  assert.deepEqual(
    numbers,
    numbers.map((_, i) => i + 1),
    `${when}: run numbers are not 1..${runs.length}`,
  );
  for (const { id, runNumber } of ledger.dispatches) {
    const run = byId.get(id);
    assert.ok(run, `${when}: the acknowledged dispatch run ${id} (#${runNumber}) is missing`);
    assert.equal(run.index_in_repo, runNumber, `${when}: run ${id} changed its number`);
    assert.equal(run.trigger_event, 'workflow_dispatch');
  }
  const pushRuns = new Set(runs.filter((r) => r.event === 'push').map((r) => r.commit_sha));
  for (const sha of ledger.pushes)
    assert.ok(pushRuns.has(sha), `${when}: the acknowledged push of ${sha} has no push run`);

  const tasks = new Map(
    (await listAll<TaskJson>(api, `/repos/${ORG}/${REPO}/actions/tasks`, 'workflow_runs')).map((t) => [t.id, t]),
  );
  for (const id of ledger.finishedTasks)
    assert.equal(tasks.get(id)?.status, 'success', `${when}: task ${id} was reported finished`);

  await work.git(['fetch', '-q', 'origin', 'main']);
  const onBranch = new Set((await work.git(['rev-list', 'FETCH_HEAD'])).stdout.split('\n'));
  for (const sha of ledger.pushes)
    assert.ok(onBranch.has(sha), `${when}: the acknowledged commit ${sha} is not on main`);
}

async function assertInvariants(where: DatabaseLocation, when: string): Promise<void> {
  const broken = await findBrokenInvariants(where);
  assert.deepEqual(broken, [], `${when}: broken invariants`);
}

function clockAhead(ms: number): Clock {
  return { nowMs: () => Date.now() + ms, nowSec: () => Math.floor((Date.now() + ms) / 1000) };
}

for (const dialect of testDialects()) {
  describe(`crash: a repository creation killed before its commit [${dialect}]`, () => {
    test('leaves a directory that does not block the name; files Gantry did not make still do', async () => {
      const s = await startTestServer(dialect);
      try {
        const gitPath = (name: string): string => s.server.deps.services.repos.gitPath('root', name);
        // What a kill between `git init` and the commit leaves behind: the marked directory, no row.
        await markProvisional(gitPath('half-made'));
        await initBareRepository(gitPath('half-made'), { defaultBranch: 'main' });
        const created = await s.api('POST', '/user/repos', {
          token: s.admin.token,
          body: { name: 'half-made', auto_init: true },
        });
        assert.equal(created.status, 201, created.text);
        assert.equal(await isProvisional(gitPath('half-made')), false, 'the marker goes with the commit');
        const work = await createWorkDir(
          remoteUrl(s.url, 'root', 'half-made', { user: 'root', password: s.admin.token }),
        );
        try {
          assert.equal(
            (await work.git(['fetch', '-q', 'origin', 'main'])).code,
            0,
            'the new repository serves its initial commit',
          );
        } finally {
          await work.remove();
        }

        await initBareRepository(gitPath('foreign'), { defaultBranch: 'main' });
        const refused = await s.api('POST', '/user/repos', { token: s.admin.token, body: { name: 'foreign' } });
        assert.equal(refused.status, 409);
        assert.equal(
          (refused.json as { message: string }).message,
          'The repository files already exist [root/foreign]; remove them from the data folder first.',
        );
        assert.equal((await fs.stat(gitPath('foreign'))).isDirectory(), true, 'files Gantry did not make are kept');
        assert.equal(
          (await s.api('GET', '/repos/root/foreign', { token: s.admin.token })).status,
          404,
          'and no row was committed',
        );
      } finally {
        await s.stop();
      }
    });
  });

  describe(`crash: kill -9 under load [${dialect}]`, () => {
    test(
      `${KILLS} kills at random moments lose no acknowledged write and corrupt nothing`,
      { timeout: 20 * 60_000 },
      async () => {
        const started = Date.now();
        const random = seededRandom(SEED);
        const loadRandom = seededRandom(SEED ^ 0x5eed);
        console.log(`[crash ${dialect}] seed ${SEED} (replay: GANTRY_CRASH_SEED=${SEED}), ${KILLS} kills`);

        const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-crash-'));
        const scratch =
          dialect === 'postgres' ? await createScratchPgDatabase(process.env.GANTRY_TEST_PG_URL as string) : null;
        const port = await freePort();
        const url = `http://127.0.0.1:${port}`;
        const settings: Record<string, string> = {
          GANTRY_DATA_DIR: dataDir,
          GANTRY_HTTP_ADDR: '127.0.0.1',
          GANTRY_HTTP_PORT: String(port),
          GANTRY_ROOT_URL: `${url}/`,
          GANTRY_LOG_LEVEL: 'warn',
          GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback',
          GANTRY_PASSWORD_HASH_COST: TEST_PASSWORD_HASH_COST,
          ...(scratch ? { GANTRY_DATABASE_URL: scratch.url } : {}),
        };
        const env: NodeJS.ProcessEnv = { ...process.env, ...settings };
        if (!scratch) delete env.GANTRY_DATABASE_URL;
        const config = loadConfig(settings);
        const where: DatabaseLocation = {
          sqlitePath: scratch ? null : path.join(dataDir, 'gantry.db'),
          pgUrl: scratch?.url ?? null,
        };
        const server = new GantryChild(url, env);
        let receiver: WebhookReceiver | null = null;
        let work: WorkDir | null = null;
        let load: CrashLoad | null = null;
        const restartMs: number[] = [];

        try {
          // The first administrator, as `gantry admin user create` makes it (same services, same database).
          const password = 'crash-p4ssword';
          const setup = await createDeps(config, { logger: pino({ level: 'silent' }) });
          let token: string;
          try {
            const root = await setup.services.accounts.createUser({
              username: 'root',
              email: 'root@example.com',
              password,
              isAdmin: true,
              mustChangePassword: false,
            });
            token = (await setup.services.accessTokens.create(root, 'crash', ['all'])).secret;
          } finally {
            await setup.close();
          }
          const api = apiFor(url, token);
          await server.start();

          receiver = await startWebhookReceiver();
          assert.equal((await api('POST', '/orgs', { username: ORG })).status, 201);
          assert.equal((await api('POST', `/orgs/${ORG}/repos`, { name: REPO })).status, 201);
          const hook = await api('POST', `/orgs/${ORG}/hooks`, {
            type: 'forgejo',
            config: { url: `${receiver.url}/hook`, content_type: 'json' },
            events: ['push', 'create', 'repository'],
            active: true,
          });
          assert.equal(hook.status, 201, hook.text);
          const hookId = (hook.json as { id: number }).id;
          work = await createWorkDir(remoteUrl(url, ORG, REPO, { user: 'root', password: token }));
          await work.commit(WORKFLOWS, 'Add workflows');
          const pushed = await work.push('main');
          assert.equal(pushed.code, 0, pushed.stderr);
          for (const name of VARIABLES)
            assert.equal(
              (await api('POST', `/repos/${ORG}/${REPO}/actions/variables/${name}`, { value: 'initial' })).status,
              204,
            );
          const registration = await api('GET', `/orgs/${ORG}/actions/runners/registration-token`);
          assert.equal(registration.status, 200, registration.text);
          const registrationToken = (registration.json as { token: string }).token;
          const runners: RunnerClient[] = [];
          for (let i = 0; i < 3; i += 1)
            runners.push(await registerRunner(url, registrationToken, { name: `crash-${i}`, labels: ['crash'] }));
          const finalRunner = await registerRunner(url, registrationToken, {
            name: 'crash-final',
            labels: ['crash-final'],
          });

          load = new CrashLoad({
            server,
            token,
            org: ORG,
            repo: REPO,
            workflowFile: 'ci.yml',
            variableNames: VARIABLES,
            secretNames: SECRETS,
            work,
            runners,
            random: loadRandom,
          });
          for (const name of VARIABLES) load.ledger.variables.set(name, { acked: 'initial', pending: null });
          load.start();

          let abandoned = false;
          for (let kill = 1; kill <= KILLS; kill += 1) {
            const acksBefore = load.ledger.acks;
            const loadDeadline = Date.now() + 120_000;
            while (load.ledger.acks < acksBefore + ACKS_BEFORE_KILL && load.failure === null) {
              assert.ok(
                Date.now() < loadDeadline,
                `before kill ${kill}: ${load.ledger.acks - acksBefore} writes acknowledged in 120 s`,
              );
              await new Promise((resolve) => setTimeout(resolve, 20));
            }
            await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * KILL_DELAY_MAX_MS)));
            if (load.failure) throw load.failure;
            // Close the gate first (nothing new starts), then kill with requests in flight.
            const resting = load.pause();
            await server.kill9();
            await resting;
            if (load.failure) throw load.failure;
            if (!abandoned && kill >= ABANDON_AT_KILL) abandoned = load.abandonDoomedRunner();
            const restartStarted = Date.now();
            await server.start();
            restartMs.push(Date.now() - restartStarted);
            const when = `after kill ${kill}`;
            await checkAcknowledged(api, load.ledger, work, when);
            await assertInvariants(where, when);
            load.resume();
          }

          // Clients retry what they lost and finish their tasks; then everything is in, exactly.
          await new Promise((resolve) => setTimeout(resolve, 500));
          if (!abandoned) abandoned = load.abandonDoomedRunner();
          assert.ok(abandoned, 'the doomed runner never held a task');
          await load.stop();
          if (load.failure) throw load.failure;
          const { ledger } = load;
          for (const [name, value] of [...ledger.variables, ...ledger.secrets])
            assert.equal(value.pending, null, `${name} still has a write in flight`);
          await checkAcknowledged(api, ledger, work, 'after the load');

          // A task handed out now carries exactly the last acknowledged values, decrypted.
          const dispatched = await api('POST', `/repos/${ORG}/${REPO}/actions/workflows/final.yml/dispatches`, {
            ref: 'main',
            return_run_info: true,
          });
          assert.equal(dispatched.status, 201, dispatched.text);
          const fetched = await finalRunner.runner.fetchTask({ tasksVersion: 0n }, { timeoutMs: 30_000 });
          assert.ok(fetched.task, 'the final task');
          const finalTask = decodeTask(fetched.task);
          for (const [name, { acked }] of ledger.variables)
            assert.equal(finalTask.vars[name], acked, `variable ${name} in the task`);
          for (const [name, { acked }] of ledger.secrets)
            assert.equal(finalTask.secrets[name], acked ?? undefined, `secret ${name} in the task`);
          await finalRunner.runner.updateTask({
            state: { id: BigInt(finalTask.id), result: Result.SUCCESS, steps: [] },
          });

          // Tasks still running now have no runner that knows them: those the doomed
          // runner held, and claims whose answer died with a process. A housekeeping
          // pass of a process whose clock is past the 10 minute zombie timeout fails them.
          const runningBefore = (
            await listAll<TaskJson>(api, `/repos/${ORG}/${REPO}/actions/tasks?status=running`, 'workflow_runs')
          ).map((t) => t.id);
          for (const id of ledger.abandonedTasks)
            assert.ok(runningBefore.includes(id), `the abandoned task ${id} is still running before housekeeping`);
          for (const id of runningBefore)
            assert.ok(!ledger.finishedTasks.has(id), `task ${id} was finished by its runner but still runs`);
          const ahead = clockAhead(11 * 60_000);
          const janitor = await createDeps(config, { clock: ahead, logger: pino({ level: 'silent' }), migrate: false });
          try {
            const errors: unknown[] = [];
            const report = await new ActionsHousekeeping(janitor.database.db, ahead, janitor.services.taskReports, {
              onError: (error) => errors.push(error),
            }).runOnce();
            assert.deepEqual(errors, []);
            assert.equal(report.zombies, runningBefore.length, 'housekeeping failed every orphaned task');
          } finally {
            await janitor.close();
          }
          const tasks = await listAll<TaskJson>(api, `/repos/${ORG}/${REPO}/actions/tasks`, 'workflow_runs');
          assert.deepEqual(
            tasks.filter((t) => t.status === 'running').map((t) => t.id),
            [],
            'no task is left running',
          );
          for (const t of tasks) {
            if (runningBefore.includes(t.id)) assert.equal(t.status, 'failure', `orphaned task ${t.id}`);
            if (ledger.finishedTasks.has(t.id)) assert.equal(t.status, 'success', `finished task ${t.id}`);
          }

          // Every delivery in the outbox reaches the receiver, those leased by a
          // killed process once their lease expires.
          const deliveriesStarted = Date.now();
          const deadline = deliveriesStarted + DELIVERY_DEADLINE_MS;
          let deliveries: Array<{ guid: string; state: string; event: string }> = [];
          for (;;) {
            deliveries = await listAll(api, `/orgs/${ORG}/hooks/${hookId}/deliveries`);
            const received = new Set(receiver.received.map((d) => d.headers['x-forgejo-delivery'] as string));
            const open = deliveries.filter((d) => d.state !== 'delivered' || !received.has(d.guid));
            if (open.length === 0) break;
            assert.ok(
              Date.now() < deadline,
              `${open.length} of ${deliveries.length} deliveries were not delivered: ${JSON.stringify(open.slice(0, 5))}`,
            );
            await new Promise((resolve) => setTimeout(resolve, 1000));
          }
          const deliveriesSec = ((Date.now() - deliveriesStarted) / 1000).toFixed(0);
          const payloads = receiver.received.map((d) => ({
            event: d.headers['x-forgejo-event'],
            json: d.json as Record<string, unknown>,
          }));
          const pushedAfter = new Set(payloads.filter((p) => p.event === 'push').map((p) => p.json.after));
          for (const sha of ledger.pushes)
            assert.ok(pushedAfter.has(sha), `no push delivery for the acknowledged push of ${sha}`);
          const createdRepos = new Set(
            payloads
              .filter((p) => p.event === 'repository' && p.json.action === 'created')
              .map((p) => (p.json.repository as { name: string }).name),
          );
          for (const name of ledger.repos) assert.ok(createdRepos.has(name), `no repository delivery for ${name}`);

          assert.equal(await server.stop(), 0, 'a graceful stop after all the kills');
          await assertInvariants(where, 'after the final stop');

          const seconds = ((Date.now() - started) / 1000).toFixed(0);
          const restarts = [...restartMs].sort((a, b) => a - b);
          console.log(
            `[crash ${dialect}] seed ${SEED}: ${KILLS} kills in ${seconds} s (restart median ${restarts[Math.floor(restarts.length / 2)]} ms, max ${restarts.at(-1)} ms); ` +
              `${ledger.summary()}; orphaned tasks failed by housekeeping: ${runningBefore.length}; ${deliveries.length} deliveries, all received (waited ${deliveriesSec} s for the last)`,
          );
        } catch (error) {
          console.log(
            `[crash ${dialect}] seed ${SEED} failed after ${restartMs.length} restarts; ${load?.ledger.summary() ?? 'no load yet'}; server output (tail):\n${server.tail()}`,
          );
          throw error;
        } finally {
          await load?.abort();
          await server.kill9();
          await receiver?.close();
          await work?.remove();
          await scratch?.drop();
          await fs.rm(dataDir, { recursive: true, force: true });
        }
      },
    );
  });
}
