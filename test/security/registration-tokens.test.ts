// Runner registration tokens (issue 13, items 2 and 14 and the PostgreSQL
// race): a registration token enrols a runner that receives every secret of
// its scope, so obtaining one needs the write scope of its category even on
// GET; DELETE rotates it; a job token never gets one; concurrent first calls
// agree on one token. On every database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Code, ConnectError } from '@connectrpc/connect';
import { Migrator } from 'kysely';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  createCurrentUserRepo,
  dispatchWorkflow,
  orgCreate,
  orgGetRunnerRegistrationToken,
  userGetRunnerRegistrationToken,
} from '@llamaduck/forgejo-ts';
import { MIGRATIONS } from '../../src/migrations/index.ts';
import { migrateToLatest, openDatabase } from '../../src/models/database.ts';
import { answer, errorBody } from '../support/actions.ts';
import { createRunnerClient, decodeTask, registerRunner } from '../support/runner-client.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { createScratchPgDatabase } from '../support/pg-database.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestDialect, TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';

const SCOPES = [
  { label: 'user', base: '/user/actions', category: 'user' },
  { label: 'org', base: '/orgs/acme/actions', category: 'organization' },
  { label: 'repo', base: '/repos/alice/app/actions', category: 'repository' },
  { label: 'admin', base: '/admin/actions', category: 'admin' },
] as const;

const JOB_TOKEN_REFUSED = 'a job token cannot create runner registration tokens or register runners';

async function expectConnectError(call: Promise<unknown>, code: Code, message: string): Promise<void> {
  await assert.rejects(call, (error: unknown) => {
    assert.ok(error instanceof ConnectError, String(error));
    assert.equal(error.code, code, error.message);
    assert.equal(error.rawMessage, message);
    return true;
  });
}

for (const dialect of testDialects()) {
  describe(`runner registration tokens [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    const db = () => s.server.deps.database.db;

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      assert.equal((await orgCreate({ client: alice.client, body: { username: 'acme' } })).status, 201);
      assert.equal(
        (await createCurrentUserRepo({ client: alice.client, body: { name: 'app', private: true } })).status,
        201,
      );
    });
    after(async () => {
      await s.stop();
    });

    const ownerOf = (label: string) => (label === 'admin' ? s.admin : alice);

    test('a read-scoped token gets no registration token (GET, POST or DELETE) at any scope: 403 naming the write scope', async () => {
      for (const scope of SCOPES) {
        const owner = ownerOf(scope.label);
        const read = await s.tokenFor(owner, [`read:${scope.category}`]);
        for (const method of ['GET', 'POST', 'DELETE']) {
          const res = await s.api(method, `${scope.base}/runners/registration-token`, { token: read });
          assert.deepEqual(
            [res.status, res.json],
            [
              403,
              errorBody(s.rootUrl, `token does not have at least one of required scope(s): [write:${scope.category}]`),
            ],
            `${method} ${scope.base} with read:${scope.category}`,
          );
        }
        // The read token still lists the scope's runners: only the token is guarded harder.
        assert.equal((await s.api('GET', `${scope.base}/runners`, { token: read })).status, 200);
        const write = await s.tokenFor(owner, [`write:${scope.category}`]);
        const got = await s.api('GET', `${scope.base}/runners/registration-token`, { token: write });
        assert.equal(got.status, 200, got.text);
        assert.match((got.json as { token: string }).token, /^[A-Za-z0-9_-]{43}$/);
      }
      const adminRead = await s.tokenFor(s.admin, ['read:admin']);
      const deprecated = await s.api('GET', '/admin/runners/registration-token', { token: adminRead });
      assert.deepEqual(
        [deprecated.status, deprecated.json],
        [403, errorBody(s.rootUrl, 'token does not have at least one of required scope(s): [write:admin]')],
      );
      // Through the client, as a Forgejo tool would call it.
      const orgRead = s.clientWith(`token ${await s.tokenFor(alice, ['read:organization'])}`);
      assert.equal(
        (await answer(orgGetRunnerRegistrationToken({ client: orgRead, path: { org: 'acme' } }))).status,
        403,
      );
      assert.equal(
        (await answer(orgGetRunnerRegistrationToken({ client: alice.client, path: { org: 'acme' } }))).status,
        200,
      );
    });

    test('rotation: POST answers the active token, DELETE deactivates it (204) and the next GET makes a new one; registered runners keep working', async () => {
      const base = '/orgs/acme/actions/runners/registration-token';
      const first = ((await s.api('GET', base, { token: alice.token })).json as { token: string }).token;
      const posted = await s.api('POST', base, { token: alice.token });
      assert.deepEqual([posted.status, posted.json], [200, { token: first }], 'POST keeps answering the active token');
      const runner = await registerRunner(s.url, first, { labels: ['rotate'] });

      const removed = await s.api('DELETE', base, { token: alice.token });
      assert.deepEqual([removed.status, removed.text], [204, '']);
      assert.equal(
        (await s.api('DELETE', base, { token: alice.token })).status,
        204,
        'again: nothing active, still 204',
      );
      await expectConnectError(
        createRunnerClient(s.url).runner.register({ name: 'late', token: first, labels: ['rotate'] }),
        Code.InvalidArgument,
        'runner registration token has been invalidated, please use the latest one',
      );
      const second = ((await s.api('GET', base, { token: alice.token })).json as { token: string }).token;
      assert.notEqual(second, first);
      assert.deepEqual((await s.api('POST', base, { token: alice.token })).json, { token: second });
      assert.ok((await registerRunner(s.url, second)).credentials, 'the new token registers runners');
      // The runner registered with the old token still authenticates.
      const declared = await runner.runner.declare({ version: 'v1', labels: ['rotate'] });
      assert.equal(declared.runner?.uuid, runner.credentials?.uuid);

      const active = await db()
        .selectFrom('action_runner_token')
        .select('id')
        .where('owner_id', '=', (await s.server.deps.services.accounts.findByName('acme'))!.id)
        .where('is_active', '=', 1)
        .execute();
      assert.equal(active.length, 1, 'one active token per scope');
      // A rotation in another scope does not touch this one.
      const userToken = (await userGetRunnerRegistrationToken({ client: alice.client })).data?.token;
      assert.equal(
        (await s.api('DELETE', '/repos/alice/app/actions/runners/registration-token', { token: alice.token })).status,
        204,
      );
      assert.equal((await userGetRunnerRegistrationToken({ client: alice.client })).data?.token, userToken);
    });

    test('20 concurrent first calls for the instance token all answer 200 with the same token (and again after each reset)', async () => {
      // Round 1 is the instance's very first token; later rounds start from a
      // token deactivated by a rotation (DELETE, as Forgejo's web UI resets it),
      // so every round is a race of first calls.
      for (let round = 1; round <= 5; round += 1) {
        const calls = Array.from({ length: 20 }, (_, i) =>
          s.api(i % 2 === 0 ? 'GET' : 'POST', '/admin/actions/runners/registration-token', { token: s.admin.token }),
        );
        const answers = await Promise.all(calls);
        assert.deepEqual(
          answers.map((a) => a.status),
          Array.from({ length: 20 }, () => 200),
          `round ${round}: ${answers.map((a) => a.text).join('\n')}`,
        );
        const tokens = new Set(answers.map((a) => (a.json as { token: string }).token));
        assert.equal(tokens.size, 1, `round ${round}: one token for all, got ${tokens.size}`);
        const rows = await db()
          .selectFrom('action_runner_token')
          .select(['is_active'])
          .where('owner_id', '=', 0)
          .where('repo_id', '=', 0)
          .execute();
        assert.equal(rows.length, round, `round ${round}: exactly one row was written`);
        assert.equal(rows.filter((r) => r.is_active === 1).length, 1);
        const rotated = await s.api('DELETE', '/admin/actions/runners/registration-token', { token: s.admin.token });
        assert.equal(rotated.status, 204);
      }
    });

    test('a job token gets no registration token and registers no runner, not even for the Actions user (403)', async () => {
      const workflow =
        'on: workflow_dispatch\njobs:\n  job:\n    runs-on: sec-job-token\n    steps:\n      - run: echo hi\n';
      const work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      try {
        await work.commit({ '.forgejo/workflows/job.yml': workflow }, 'Add workflow');
        assert.equal((await work.push('main')).code, 0);
      } finally {
        await work.remove();
      }
      const dispatched = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'app', workflowfilename: 'job.yml' },
        body: { ref: 'main', inputs: {}, return_run_info: true },
      });
      assert.equal(dispatched.status, 201, JSON.stringify(dispatched.error));
      const repoToken = (
        (await s.api('GET', '/repos/alice/app/actions/runners/registration-token', { token: alice.token })).json as {
          token: string;
        }
      ).token;
      const runner = await registerRunner(s.url, repoToken, { labels: ['sec-job-token'] });
      const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(fetched.task, 'a task');
      const jobToken = decodeTask(fetched.task as Task).secrets.GITEA_TOKEN ?? '';
      assert.match(jobToken, /^[0-9a-f]{40}$/);
      assert.equal((await s.api('GET', '/repos/alice/app', { token: jobToken })).status, 200, 'the job token works');

      const runnersBefore = await db().selectFrom('action_runner').select('id').execute();
      const tokensBefore = await db().selectFrom('action_runner_token').select('id').execute();
      const basicJob = `Basic ${Buffer.from(`gantry-ci:${jobToken}`).toString('base64')}`;
      for (const scope of SCOPES) {
        for (const method of ['GET', 'POST', 'DELETE']) {
          for (const auth of [{ token: jobToken }, { authorization: basicJob }]) {
            const res = await s.api(method, `${scope.base}/runners/registration-token`, auth);
            assert.deepEqual(
              [res.status, res.json],
              [403, errorBody(s.rootUrl, JOB_TOKEN_REFUSED)],
              `${method} ${scope.base}`,
            );
          }
        }
        const register = await s.api('POST', `${scope.base}/runners`, { token: jobToken, body: { name: 'sneaky' } });
        assert.deepEqual(
          [register.status, register.json],
          [403, errorBody(s.rootUrl, JOB_TOKEN_REFUSED)],
          `POST ${scope.base}/runners`,
        );
      }
      assert.equal((await s.api('GET', '/admin/runners/registration-token', { token: jobToken })).status, 403);
      assert.deepEqual(
        await db().selectFrom('action_runner').select('id').execute(),
        runnersBefore,
        'no runner was registered',
      );
      assert.deepEqual(
        await db().selectFrom('action_runner_token').select('id').execute(),
        tokensBefore,
        'no registration token was made',
      );
    });
  });

  describe(`migration 0008: one active registration token per scope [${dialect}]`, () => {
    test('duplicates already present are deactivated (the newest stays active), then the unique index holds', async () => {
      const { handle, drop } = await scratchDatabase(dialect);
      try {
        const db = handle.db;
        const migrator = new Migrator({ db, provider: { getMigrations: async () => ({ ...MIGRATIONS }) } });
        const upTo = await migrator.migrateTo('0006-metrics-indexes');
        assert.equal(upTo.error, undefined);
        const row = (ownerId: number, n: number, active: number) => ({
          owner_id: ownerId,
          repo_id: 0,
          token_hash: `h${ownerId}-${n}`,
          token_encrypted: 'x',
          is_active: active,
          created: n,
          updated: n,
        });
        await db
          .insertInto('action_runner_token')
          .values([row(7, 1, 1), row(7, 2, 1), row(7, 3, 0), row(7, 4, 1), row(8, 1, 1), row(9, 1, 0)])
          .execute();
        await migrateToLatest(db);
        const rows = await db
          .selectFrom('action_runner_token')
          .select(['owner_id', 'token_hash', 'is_active'])
          .orderBy('id')
          .execute();
        assert.deepEqual(
          rows.map((r) => [r.token_hash, r.is_active]),
          [
            ['h7-1', 0],
            ['h7-2', 0],
            ['h7-3', 0],
            ['h7-4', 1],
            ['h8-1', 1],
            ['h9-1', 0],
          ],
        );
        await assert.rejects(
          db
            .insertInto('action_runner_token')
            .values(row(8, 2, 1))
            .execute(),
          'a second active token in a scope is refused',
        );
        await db
          .insertInto('action_runner_token')
          .values(row(8, 3, 0))
          .execute();
      } finally {
        await drop();
      }
    });
  });
}

async function scratchDatabase(dialect: TestDialect) {
  if (dialect === 'postgres') {
    const scratch = await createScratchPgDatabase(process.env.GANTRY_TEST_PG_URL ?? '');
    const handle = openDatabase({ databaseUrl: scratch.url, dataDir: '' });
    return { handle, drop: async () => (await handle.destroy(), await scratch.drop()) };
  }
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-0008-'));
  const handle = openDatabase({ databaseUrl: null, dataDir });
  return { handle, drop: async () => (await handle.destroy(), await fs.rm(dataDir, { recursive: true, force: true })) };
}
