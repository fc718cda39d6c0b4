// Runners at user, organization, repository and instance scope (Forgejo: routers/api/v1/shared/runners.go):
// registration token, register, list, get, delete, jobs search, through the
// forgejo-ts client where it covers the call, on every database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import {
  adminGetActionRunJobs,
  adminGetRunnerRegistrationToken,
  createCurrentUserRepo,
  createOrgRepo,
  deleteAdminRunner,
  deleteOrgRunner,
  deleteRepoRunner,
  deleteUserRunner,
  dispatchWorkflow,
  getAdminRunner,
  getAdminRunners,
  getOrgRunner,
  getOrgRunners,
  getRepoRunner,
  getRepoRunners,
  getUserRunner,
  getUserRunners,
  orgCreate,
  orgGetRunnerRegistrationToken,
  orgSearchRunJobs,
  registerAdminRunner,
  registerOrgRunner,
  registerRepoRunner,
  registerUserRunner,
  repoEdit,
  repoGetRunnerRegistrationToken,
  repoSearchRunJobs,
  userGetRunnerRegistrationToken,
  userSearchRunJobs,
} from '@llamaduck/forgejo-ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { ForgejoClient, TestServer, TestUser } from '../support/server.ts';
import { answer, errorBody } from '../support/actions.ts';
import type { Answer } from '../support/actions.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import { ActionStatus } from '../../src/modules/actions-status.ts';
import type { ActionStatusValue } from '../../src/modules/actions-status.ts';
import { openKeyRing } from '../../src/modules/crypto/key-ring.ts';
import { systemClock } from '../../src/modules/clock.ts';
import { insertRunWithJobs } from '../../src/models/action-runs.ts';
import type { ScopeColumns } from '../../src/modules/scope.ts';
import { KeyRotationService } from '../../src/services/key-rotation.ts';
import { REGISTRATION_TOKEN_COLUMN, RunnerService } from '../../src/services/actions/runners.ts';
import { deleteAllRunners, forceJobs, setRunnerLastSeen } from '../support/white-box.ts';

type Label = 'user' | 'org' | 'repo' | 'admin';
const SCOPED: Label[] = ['user', 'org', 'repo'];

interface RunnerApi {
  label: Label;
  /** Under /api/v1. */
  base: string;
  token(client: ForgejoClient): Promise<Answer>;
  register(client: ForgejoClient, body: { name: string; description?: string; ephemeral?: boolean }): Promise<Answer>;
  list(client: ForgejoClient, query?: { visible?: boolean; page?: number; limit?: number }): Promise<Answer>;
  get(client: ForgejoClient, id: number | string): Promise<Answer>;
  remove(client: ForgejoClient, id: number | string): Promise<Answer>;
  jobs(client: ForgejoClient, labels?: string): Promise<Answer>;
}

function userRunners(): RunnerApi {
  return {
    label: 'user',
    base: '/user/actions',
    token: (client) => answer(userGetRunnerRegistrationToken({ client })),
    register: (client, body) => answer(registerUserRunner({ client, body })),
    list: (client, query) => answer(getUserRunners({ client, query })),
    get: (client, id) => answer(getUserRunner({ client, path: { runner_id: String(id) } })),
    remove: (client, id) => answer(deleteUserRunner({ client, path: { runner_id: String(id) } })),
    jobs: (client, labels) => answer(userSearchRunJobs({ client, query: labels === undefined ? {} : { labels } })),
  };
}

function orgRunners(org: string): RunnerApi {
  return {
    label: 'org',
    base: `/orgs/${org}/actions`,
    token: (client) => answer(orgGetRunnerRegistrationToken({ client, path: { org } })),
    register: (client, body) => answer(registerOrgRunner({ client, path: { org }, body })),
    list: (client, query) => answer(getOrgRunners({ client, path: { org }, query })),
    get: (client, id) => answer(getOrgRunner({ client, path: { org, runner_id: String(id) } })),
    remove: (client, id) => answer(deleteOrgRunner({ client, path: { org, runner_id: String(id) } })),
    jobs: (client, labels) =>
      answer(orgSearchRunJobs({ client, path: { org }, query: labels === undefined ? {} : { labels } })),
  };
}

function repoRunners(owner: string, repo: string): RunnerApi {
  return {
    label: 'repo',
    base: `/repos/${owner}/${repo}/actions`,
    token: (client) => answer(repoGetRunnerRegistrationToken({ client, path: { owner, repo } })),
    register: (client, body) => answer(registerRepoRunner({ client, path: { owner, repo }, body })),
    list: (client, query) => answer(getRepoRunners({ client, path: { owner, repo }, query })),
    get: (client, id) => answer(getRepoRunner({ client, path: { owner, repo, runner_id: String(id) } })),
    remove: (client, id) => answer(deleteRepoRunner({ client, path: { owner, repo, runner_id: String(id) } })),
    jobs: (client, labels) =>
      answer(repoSearchRunJobs({ client, path: { owner, repo }, query: labels === undefined ? {} : { labels } })),
  };
}

function adminRunners(): RunnerApi {
  return {
    label: 'admin',
    base: '/admin/actions',
    token: (client) => answer(adminGetRunnerRegistrationToken({ client })),
    register: (client, body) => answer(registerAdminRunner({ client, body })),
    list: (client, query) => answer(getAdminRunners({ client, query })),
    get: (client, id) => answer(getAdminRunner({ client, path: { runner_id: String(id) } })),
    remove: (client, id) => answer(deleteAdminRunner({ client, path: { runner_id: String(id) } })),
    jobs: (client, labels) => answer(adminGetActionRunJobs({ client, query: labels === undefined ? {} : { labels } })),
  };
}

interface RunnerJson {
  id: number;
  uuid: string;
  owner_id: number;
  repo_id: number;
  name: string;
  status: string;
  version: string;
  labels: string[] | null;
  description: string;
  ephemeral: boolean;
}

interface JobJson {
  id: number;
  attempt: number;
  handle: string;
  repo_id: number;
  owner_id: number;
  name: string;
  needs: string[] | null;
  runs_on: string[] | null;
  task_id: number;
  status: string;
}

const sha256 = (value: string): string => createHash('sha256').update(value, 'utf8').digest('hex');
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

for (const dialect of testDialects()) {
  describe(`actions runners [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let bob: TestUser;
    let aliceRepoId: number;
    let svcRepoId: number;
    let acmeId: number;
    const apis = new Map<Label, RunnerApi>();
    const api = (label: Label): RunnerApi => apis.get(label) as RunnerApi;
    /** The (owner_id, repo_id) of each scope's own runners and tokens. */
    const keyOf = (label: Label): ScopeColumns =>
      label === 'user'
        ? { ownerId: alice.user.id, repoId: 0 }
        : label === 'org'
          ? { ownerId: acmeId, repoId: 0 }
          : label === 'repo'
            ? { ownerId: 0, repoId: aliceRepoId }
            : { ownerId: 0, repoId: 0 };
    const clientOf = (label: Label): ForgejoClient => (label === 'admin' ? s.admin.client : alice.client);
    const db = () => s.server.deps.database.db;
    const runners = () => s.server.deps.services.runners;
    const clearRunners = () => deleteAllRunners(db());
    const nowSec = () => Math.floor(Date.now() / 1000);

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      bob = await s.createUser('bob');
      assert.equal((await orgCreate({ client: alice.client, body: { username: 'acme' } })).status, 201);
      acmeId = (await s.server.deps.services.accounts.findByName('acme'))!.id;
      aliceRepoId = (await createCurrentUserRepo({ client: alice.client, body: { name: 'app' } })).data!.id!;
      svcRepoId = (await createOrgRepo({ client: alice.client, path: { org: 'acme' }, body: { name: 'svc' } })).data!
        .id!;
      apis.set('user', userRunners());
      apis.set('org', orgRunners('acme'));
      apis.set('repo', repoRunners('alice', 'app'));
      apis.set('admin', adminRunners());
    });
    after(async () => {
      await s.stop();
    });

    for (const label of [...SCOPED, 'admin'] as Label[]) {
      test(`[${label}] registration token: 43 URL-safe characters, the same on every GET and POST, replaced once inactive`, async () => {
        const { base } = api(label);
        const client = clientOf(label);
        const first = await api(label).token(client);
        assert.equal(first.status, 200);
        const token = (first.data as { token: string }).token;
        assert.match(token, /^[A-Za-z0-9_-]{43}$/);
        assert.deepEqual(first.data, { token });
        assert.equal(
          ((await api(label).token(client)).data as { token: string }).token,
          token,
          'repeated GET: same token',
        );
        const posted = await s.api('POST', `${base}/runners/registration-token`, {
          token: label === 'admin' ? s.admin.token : alice.token,
        });
        assert.deepEqual([posted.status, posted.json], [200, { token }], 'POST (Gitea) answers the active token too');
        assert.deepEqual(await runners().findActiveRegistrationToken(token), { scope: keyOf(label) });

        // A rotation (DELETE, as the web UI's "reset") deactivates the token: the API then makes a new one, and the old one is refused.
        const key = keyOf(label);
        const rotated = await s.api('DELETE', `${base}/runners/registration-token`, {
          token: label === 'admin' ? s.admin.token : alice.token,
        });
        assert.equal(rotated.status, 204);
        const next = ((await api(label).token(client)).data as { token: string }).token;
        assert.notEqual(next, token);
        assert.equal(await runners().findActiveRegistrationToken(token), 'inactive');
        assert.deepEqual(await runners().findActiveRegistrationToken(next), { scope: key });
        const rows = await db()
          .selectFrom('action_runner_token')
          .select(['is_active'])
          .where('owner_id', '=', key.ownerId)
          .where('repo_id', '=', key.repoId)
          .orderBy('id')
          .execute();
        assert.deepEqual(
          rows.map((r) => r.is_active),
          [0, 1],
        );
      });
    }

    test('registration tokens: each scope its own; unknown tokens are null; ten first calls at once agree on one token', async () => {
      const tokens = new Set<string>();
      for (const label of [...SCOPED, 'admin'] as Label[])
        tokens.add(((await api(label).token(clientOf(label))).data as { token: string }).token);
      assert.equal(tokens.size, 4);
      assert.equal(await runners().findActiveRegistrationToken('no-such-token'), null);
      assert.equal(await runners().findActiveRegistrationToken(''), null);

      assert.equal((await orgCreate({ client: alice.client, body: { username: 'racers' } })).status, 201);
      const answers = await Promise.all(
        Array.from({ length: 10 }, () =>
          s.api('GET', '/orgs/racers/actions/runners/registration-token', { token: alice.token }),
        ),
      );
      assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([200]));
      assert.equal(
        new Set(answers.map((a) => (a.json as { token: string }).token)).size,
        1,
        answers.map((a) => a.text).join(' '),
      );
      const racers = (await s.server.deps.services.accounts.findByName('racers'))!;
      const rows = await db()
        .selectFrom('action_runner_token')
        .select('is_active')
        .where('owner_id', '=', racers.id)
        .execute();
      assert.equal(rows.filter((r) => r.is_active === 1).length, 1);
      // Straight at the service the calls overlap more (without SERIALIZABLE, PostgreSQL would hand out several tokens here).
      for (let round = 1; round <= 10; round += 1) {
        const scope = { ownerId: 0, repoId: 100_000 + round };
        const got = await Promise.all(Array.from({ length: 10 }, () => runners().registrationToken(scope)));
        assert.equal(new Set(got).size, 1, `round ${round}`);
      }
    });

    test('registration tokens are stored encrypted (ciphertext and digest, never the token)', async () => {
      const token = ((await api('org').token(alice.client)).data as { token: string }).token;
      const rows = await db().selectFrom('action_runner_token').selectAll().execute();
      const row = rows.find((r) => r.token_hash === sha256(token));
      assert.ok(row, 'found by its SHA-256 digest');
      assert.match(row.token_encrypted, /^v1:[0-9a-f]+:/);
      assert.ok(!JSON.stringify(rows).includes(token), 'no column holds the token in clear');
      if (s.server.deps.database.sqlitePath) {
        for (const file of [s.server.deps.database.sqlitePath, `${s.server.deps.database.sqlitePath}-wal`]) {
          if (existsSync(file)) assert.equal(readFileSync(file).indexOf(token), -1, `${file} must not hold the token`);
        }
      }
    });

    for (const label of [...SCOPED, 'admin'] as Label[]) {
      test(`[${label}] POST runners: 201 {id, uuid, token}; the runner has the scope's ids, no labels, no version`, async () => {
        await clearRunners();
        const client = clientOf(label);
        const created = await api(label).register(client, {
          name: 'builder',
          description: 'the big one',
          ephemeral: true,
        });
        assert.equal(created.status, 201);
        const body = created.data as { id: number; uuid: string; token: string };
        assert.deepEqual(Object.keys(body), ['id', 'uuid', 'token']);
        assert.match(body.uuid, UUID_V4);
        assert.match(body.token, /^[0-9a-f]{40}$/);
        const key = keyOf(label);
        const got = await api(label).get(client, body.id);
        assert.equal(got.status, 200);
        assert.deepEqual(got.data, {
          id: body.id,
          uuid: body.uuid,
          owner_id: key.ownerId,
          repo_id: key.repoId,
          name: 'builder',
          status: 'offline',
          version: '',
          labels: null,
          description: 'the big one',
          ephemeral: true,
        });
        assert.deepEqual(Object.keys(got.data as object), [
          'id',
          'uuid',
          'owner_id',
          'repo_id',
          'name',
          'status',
          'version',
          'labels',
          'description',
          'ephemeral',
        ]);
        const row = await db()
          .selectFrom('action_runner')
          .selectAll()
          .where('id', '=', body.id)
          .executeTakeFirstOrThrow();
        assert.equal(row.token_hash, sha256(body.token), 'only the digest of the secret is stored');
        assert.equal(row.token_last_eight, body.token.slice(-8));

        const plain = await api(label).register(client, { name: 'x' });
        assert.equal(plain.status, 201);
        assert.equal(
          ((await api(label).get(client, (plain.data as { id: number }).id)).data as RunnerJson).ephemeral,
          false,
        );
      });
    }

    test('POST runners: [Name]: Required (absent, null, empty, bodiless); name truncated to 255 bytes', async () => {
      for (const body of [undefined, {}, { name: null }, { name: '' }, { description: 'd' }]) {
        const res = await s.api('POST', '/orgs/acme/actions/runners', {
          token: alice.token,
          ...(body === undefined ? {} : { body }),
        });
        assert.deepEqual([res.status, res.json], [422, errorBody(s.rootUrl, '[Name]: Required')], JSON.stringify(body));
      }
      assert.equal(
        (await s.api('POST', '/orgs/acme/actions/runners', { token: alice.token, body: { name: '   ' } })).status,
        201,
        'whitespace passes',
      );
      const long = `${'a'.repeat(254)}é${'b'.repeat(10)}`;
      const created = await api('org').register(alice.client, { name: long });
      const got = await api('org').get(alice.client, (created.data as { id: number }).id);
      assert.equal((got.data as RunnerJson).name, 'a'.repeat(254), 'cut at 255 bytes without splitting é');
    });

    test('list: own runners by default, inherited ones with visible; last_online DESC then id DESC; X-Total-Count and Link', async () => {
      await clearRunners();
      const make = async (scope: ScopeColumns, name: string, lastOnline: number) => {
        const { runner } = await runners().registerRunner(scope, { name, labels: null, ephemeral: false });
        await setRunnerLastSeen(db(), runner.id, { lastOnline });
        return runner.id;
      };
      const t = nowSec() - 3600;
      const org1 = await make(keyOf('org'), 'org-1', t + 10);
      const org2 = await make(keyOf('org'), 'org-2', t + 30);
      const org3 = await make(keyOf('org'), 'org-3', t + 10);
      const org4 = await make(keyOf('org'), 'org-4', 0);
      const global = await make(keyOf('admin'), 'global', t + 20);
      const user = await make(keyOf('user'), 'alice-own', t + 40);
      const repo = await make(keyOf('repo'), 'app-own', t + 50);
      const svc = await make({ ownerId: 0, repoId: svcRepoId }, 'svc-own', t + 60);
      const ids = (a: Answer) => (a.data as RunnerJson[]).map((r) => r.id);

      const own = await api('org').list(alice.client);
      assert.equal(own.status, 200);
      assert.deepEqual(ids(own), [org2, org3, org1, org4], 'newest contact first, then newest id');
      assert.equal(own.headers['x-total-count'], '4');
      assert.equal(own.headers.link, undefined, 'one page: no Link');
      assert.deepEqual(ids(await api('org').list(alice.client, { visible: true })), [org2, global, org3, org1, org4]);
      assert.deepEqual(ids(await api('org').list(alice.client, { visible: false })), [org2, org3, org1, org4]);
      for (const on of ['1', 'on', 'ON', 'True', 't']) {
        const res = await s.api('GET', `/orgs/acme/actions/runners?visible=${on}`, { token: alice.token });
        assert.equal((res.json as unknown[]).length, 5, `visible=${on}`);
      }
      assert.equal(
        ((await s.api('GET', '/orgs/acme/actions/runners?visible=yes', { token: alice.token })).json as unknown[])
          .length,
        4,
      );

      assert.deepEqual(ids(await api('user').list(alice.client)), [user]);
      assert.deepEqual(ids(await api('user').list(alice.client, { visible: true })), [user, global]);
      assert.deepEqual(ids(await api('repo').list(alice.client)), [repo]);
      assert.deepEqual(
        ids(await api('repo').list(alice.client, { visible: true })),
        [repo, user, global],
        "the repository's, its owner's and the instance's",
      );
      const svcList = await s.api('GET', '/repos/acme/svc/actions/runners?visible=true', { token: alice.token });
      assert.deepEqual(
        (svcList.json as RunnerJson[]).map((r) => r.id),
        [svc, org2, global, org3, org1, org4],
      );
      assert.deepEqual(ids(await api('admin').list(s.admin.client)), [global], 'instance runners only');
      assert.deepEqual(
        ids(await api('admin').list(s.admin.client, { visible: true })),
        [svc, repo, user, org2, global, org3, org1, org4],
        'every runner',
      );

      // Paging: page 1 of 2 per page → next and last; page 2 → all four; page 3 (last) → first and prev.
      const page1 = await api('org').list(alice.client, { visible: true, page: 1, limit: 2 });
      assert.deepEqual(ids(page1), [org2, global]);
      assert.equal(page1.headers['x-total-count'], '5');
      const url = (page: number) => `<${s.rootUrl}api/v1/orgs/acme/actions/runners?limit=2&page=${page}&visible=true>`;
      assert.equal(page1.headers.link, `${url(2)}; rel="next",${url(3)}; rel="last"`);
      assert.equal(page1.headers['access-control-expose-headers'], 'Link, X-Total-Count');
      const page2 = await api('org').list(alice.client, { visible: true, page: 2, limit: 2 });
      assert.deepEqual(ids(page2), [org3, org1]);
      assert.equal(
        page2.headers.link,
        `${url(3)}; rel="next",${url(3)}; rel="last",${url(1)}; rel="first",${url(1)}; rel="prev"`,
      );
      const page3 = await api('org').list(alice.client, { visible: true, page: 3, limit: 2 });
      assert.deepEqual(ids(page3), [org4]);
      assert.equal(page3.headers.link, `${url(1)}; rel="first",${url(2)}; rel="prev"`);
      assert.deepEqual(ids(await api('org').list(alice.client, { visible: true, page: 4, limit: 2 })), []);

      for (let i = 0; i < 60; i += 1) await runners().registerRunner(keyOf('user'), { name: `bulk-${i}` });
      const capped = await s.api('GET', '/user/actions/runners?limit=1000', { token: alice.token });
      assert.equal((capped.json as unknown[]).length, 50, 'limit is capped at 50');
      assert.equal(capped.headers.get('x-total-count'), '61');
      assert.equal(
        ((await s.api('GET', '/user/actions/runners', { token: alice.token })).json as unknown[]).length,
        30,
        'a missing page is page 1 of 30',
      );
      assert.equal(
        (await s.api('GET', '/orgs/acme/actions/runners?page=abc&limit=-3', { token: alice.token })).status,
        200,
      );
    });

    test('status: offline after a minute without contact, idle after 10 s without a report, else active; labels as declared', async () => {
      await clearRunners();
      const now = nowSec();
      const cases: [string, number, number, string][] = [
        ['never', 0, 0, 'offline'],
        ['gone', now - 120, now - 120, 'offline'],
        ['idle', now, now - 60, 'idle'],
        ['busy', now, now, 'active'],
      ];
      for (const [name, lastOnline, lastActive] of cases) {
        const { runner } = await runners().registerRunner(keyOf('org'), {
          name,
          version: 'v12.1.0',
          labels: ['docker', 'linux'],
          ephemeral: false,
        });
        await setRunnerLastSeen(db(), runner.id, { lastOnline, lastActive });
      }
      const list = (await api('org').list(alice.client)).data as RunnerJson[];
      assert.deepEqual(
        Object.fromEntries(list.map((r) => [r.name, r.status])),
        Object.fromEntries(cases.map(([name, , , status]) => [name, status])),
      );
      assert.deepEqual(list[0]?.labels, ['docker', 'linux']);
      assert.equal(list[0]?.version, 'v12.1.0');
    });

    test('get and delete: Forgejo messages, visibility of inherited runners, 204, static segments win over {runner_id}', async () => {
      await clearRunners();
      const reg = async (scope: ScopeColumns, name: string) =>
        (await runners().registerRunner(scope, { name })).runner.id;
      const global = await reg(keyOf('admin'), 'global');
      const orgRunner = await reg(keyOf('org'), 'org');
      const userRunner = await reg(keyOf('user'), 'alice');
      const repoRunner = await reg(keyOf('repo'), 'app');
      const svcRunner = await reg({ ownerId: 0, repoId: svcRepoId }, 'svc');
      const notFound = (id: number | string) => errorBody(s.rootUrl, `runner with ID ${id}: resource does not exist`);
      const expect404 = async (a: Answer, body: object) => assert.deepEqual([a.status, a.error], [404, body]);

      await expect404(await api('org').get(alice.client, 999_999), notFound(999_999));
      await expect404(await api('org').get(alice.client, userRunner), notFound(userRunner));
      await expect404(await api('org').get(alice.client, svcRunner), notFound(svcRunner));
      await expect404(await api('org').get(alice.client, 'abc'), notFound(0));
      await expect404(await api('user').get(alice.client, orgRunner), notFound(orgRunner));
      await expect404(await api('repo').get(alice.client, orgRunner), notFound(orgRunner));
      const raw = await s.api('GET', `/orgs/acme/actions/runners/${userRunner}`, { token: alice.token });
      assert.deepEqual(Object.keys(raw.json as object), ['message', 'url'], 'no errors key');
      assert.equal(
        (await s.api('GET', `/orgs/acme/actions/runners/+0${orgRunner}`, { token: alice.token })).status,
        200,
        'leading + and zeros parse',
      );

      // Inherited runners are readable, not deletable.
      assert.equal(((await api('org').get(alice.client, global)).data as RunnerJson).id, global);
      await expect404(
        await api('org').remove(alice.client, global),
        errorBody(s.rootUrl, 'No permission to delete this runner'),
      );
      assert.equal(
        (await api('repo').get(alice.client, userRunner)).status,
        200,
        "a repository sees its owner's runners",
      );
      assert.equal((await api('repo').get(alice.client, global)).status, 200);
      await expect404(
        await api('repo').remove(alice.client, userRunner),
        errorBody(s.rootUrl, 'No permission to delete this runner'),
      );
      await expect404(
        await api('user').remove(alice.client, global),
        errorBody(s.rootUrl, 'No permission to delete this runner'),
      );
      await expect404(await api('org').remove(alice.client, userRunner), notFound(userRunner));

      // Own runners: 204, no body; then gone.
      for (const [label, id] of [
        ['org', orgRunner],
        ['user', userRunner],
        ['repo', repoRunner],
      ] as const) {
        const removed = await api(label).remove(alice.client, id);
        assert.equal(removed.status, 204, label);
        assert.equal(removed.headers['content-type'], undefined);
        await expect404(await api(label).get(alice.client, id), notFound(id));
        await expect404(await api(label).remove(alice.client, id), notFound(id));
      }
      // The instance sees and deletes every runner.
      assert.equal((await api('admin').get(s.admin.client, svcRunner)).status, 200);
      assert.equal((await api('admin').remove(s.admin.client, svcRunner)).status, 204);
      assert.equal((await api('admin').remove(s.admin.client, global)).status, 204);
      assert.equal((await db().selectFrom('action_runner').select('id').execute()).length, 0);

      // `jobs` and `registration-token` are routes of their own, not runner ids.
      for (const label of [...SCOPED, 'admin'] as Label[]) {
        const token = label === 'admin' ? s.admin.token : alice.token;
        assert.match(
          (await s.api('GET', `${api(label).base}/runners/registration-token`, { token })).text,
          /^\{"token":"[A-Za-z0-9_-]{43}"\}$/,
        );
        const jobs = await s.api('GET', `${api(label).base}/runners/jobs?labels=nothing-runs-here`, { token });
        assert.deepEqual([jobs.status, jobs.text], [200, 'null']);
      }
    });

    test('guards: no token 401, non-owners 403, Actions disabled 404, token scopes, instance scope for site admins only', async () => {
      const paths = (base: string) => [
        ['GET', `${base}/runners`],
        ['POST', `${base}/runners`],
        ['GET', `${base}/runners/registration-token`],
        ['POST', `${base}/runners/registration-token`],
        ['GET', `${base}/runners/jobs`],
        ['GET', `${base}/runners/1`],
        ['DELETE', `${base}/runners/1`],
      ];
      for (const label of [...SCOPED, 'admin'] as Label[]) {
        for (const [method, path] of paths(api(label).base)) {
          const res = await s.api(method as string, path as string, method === 'POST' ? { body: { name: 'r' } } : {});
          assert.deepEqual(
            [res.status, res.json],
            [401, errorBody(s.rootUrl, 'token is required')],
            `${method} ${path}`,
          );
        }
      }
      for (const [method, path] of paths('/orgs/acme/actions')) {
        const res = await s.api(method as string, path as string, {
          token: bob.token,
          ...(method === 'POST' ? { body: { name: 'r' } } : {}),
        });
        assert.deepEqual(
          [res.status, res.json],
          [403, errorBody(s.rootUrl, 'Must be an organization owner')],
          `${method} ${path}`,
        );
      }
      for (const [method, path] of paths('/repos/alice/app/actions')) {
        const res = await s.api(method as string, path as string, {
          token: bob.token,
          ...(method === 'POST' ? { body: { name: 'r' } } : {}),
        });
        assert.deepEqual(
          [res.status, res.json],
          [403, errorBody(s.rootUrl, 'user should be the owner of the repo')],
          `${method} ${path}`,
        );
      }
      for (const [method, path] of paths('/admin/actions')) {
        const res = await s.api(method as string, path as string, {
          token: alice.token,
          ...(method === 'POST' ? { body: { name: 'r' } } : {}),
        });
        assert.deepEqual(
          [res.status, res.json],
          [403, errorBody(s.rootUrl, 'user should be the site admin')],
          `${method} ${path}`,
        );
      }
      const deprecated = await s.api('GET', '/admin/runners/registration-token', { token: alice.token });
      assert.equal(deprecated.status, 403);
      // bob's own scope is his: he sees none of alice's runners there.
      assert.equal((await api('user').list(bob.client)).status, 200);
      // An unknown organization or repository is 404 before anything else.
      assert.equal((await s.api('GET', '/orgs/nope/actions/runners', { token: alice.token })).status, 404);
      assert.equal((await s.api('GET', '/repos/alice/nope/actions/runners', { token: alice.token })).status, 404);

      // Actions disabled: 404 for every repository runner route, even for the owner.
      assert.equal(
        (await repoEdit({ client: alice.client, path: { owner: 'acme', repo: 'svc' }, body: { has_actions: false } }))
          .status,
        200,
      );
      for (const [method, path] of paths('/repos/acme/svc/actions')) {
        const res = await s.api(method as string, path as string, {
          token: alice.token,
          ...(method === 'POST' ? { body: { name: 'r' } } : {}),
        });
        assert.equal(res.status, 404, `${method} ${path}`);
      }
      assert.equal(
        (await repoEdit({ client: alice.client, path: { owner: 'acme', repo: 'svc' }, body: { has_actions: true } }))
          .status,
        200,
      );

      // Token scopes: read works for GET, writing needs write; a registration token needs
      // write even on GET (a runner registered with it receives the scope's secrets).
      const readOrg = await s.tokenFor(alice, ['read:organization']);
      const readToken = await s.api('GET', '/orgs/acme/actions/runners/registration-token', { token: readOrg });
      assert.deepEqual(
        [readToken.status, readToken.json],
        [403, errorBody(s.rootUrl, 'token does not have at least one of required scope(s): [write:organization]')],
      );
      assert.equal((await s.api('GET', '/orgs/acme/actions/runners', { token: readOrg })).status, 200);
      const denied = await s.api('POST', '/orgs/acme/actions/runners', { token: readOrg, body: { name: 'r' } });
      assert.deepEqual(
        [denied.status, denied.json],
        [403, errorBody(s.rootUrl, 'token does not have at least one of required scope(s): [write:organization]')],
      );
      const repoOnly = await s.tokenFor(alice, ['write:repository']);
      assert.equal((await s.api('GET', '/orgs/acme/actions/runners', { token: repoOnly })).status, 403);
      assert.equal((await s.api('GET', '/user/actions/runners', { token: repoOnly })).status, 403);
      assert.equal((await s.api('GET', '/repos/alice/app/actions/runners', { token: repoOnly })).status, 200);
      const adminRead = await s.tokenFor(s.admin, ['read:admin']);
      assert.equal((await s.api('GET', '/admin/actions/runners', { token: adminRead })).status, 200);
      assert.equal(
        (await s.api('POST', '/admin/actions/runners', { token: adminRead, body: { name: 'r' } })).status,
        403,
      );
      // Site admins pass the owner guards of every scope.
      assert.equal((await s.api('GET', '/orgs/acme/actions/runners', { token: s.admin.token })).status, 200);
      assert.equal((await s.api('GET', '/repos/alice/app/actions/runners', { token: s.admin.token })).status, 200);
    });

    test('jobs search: waiting and running jobs of the scope, id DESC, labels as Forgejo parses them, null when none', async () => {
      const now = nowSec();
      const insertJobs = async (
        repoId: number,
        ownerId: number,
        jobs: { name: string; runsOn: string[]; needs?: string[]; status: ActionStatusValue }[],
      ) =>
        db()
          .transaction()
          .execute(async (tx) => {
            const { jobs: rows } = await insertRunWithJobs(
              tx,
              {
                repoId,
                ownerId,
                title: 'seeded',
                workflowId: 'seed.yml',
                workflowDirectory: '.forgejo/workflows',
                triggerUserId: alice.user.id,
                ref: 'refs/heads/main',
                commitSha: 'a'.repeat(40),
                event: 'push',
                eventPayload: '{}',
                triggerEvent: 'push',
                status: ActionStatus.waiting,
              },
              jobs.map((j, i) => ({
                name: j.name,
                jobId: `job${i}`,
                handle: `handle-${repoId}-${j.name}`,
                needs: j.needs ?? [],
                runsOn: j.runsOn,
                hasIf: false,
                workflowPayload: '',
                status: j.status,
              })),
              now,
            );
            return rows;
          });
      const app = await insertJobs(aliceRepoId, alice.user.id, [
        { name: 'fedora', runsOn: ['fedora'], status: ActionStatus.waiting },
        { name: 'docker', runsOn: ['ubuntu', 'docker'], needs: ['fedora'], status: ActionStatus.running },
        { name: 'bare', runsOn: [], status: ActionStatus.waiting },
        { name: 'blocked', runsOn: ['fedora'], status: ActionStatus.blocked },
        { name: 'done', runsOn: ['fedora'], status: ActionStatus.success },
      ]);
      const svc = await insertJobs(svcRepoId, acmeId, [
        { name: 'svc-fedora', runsOn: ['fedora'], status: ActionStatus.waiting },
        { name: 'svc-cancelled', runsOn: ['fedora'], status: ActionStatus.cancelled },
      ]);
      const [fedora, docker, bare] = app as [(typeof app)[0], (typeof app)[0], (typeof app)[0]];
      await forceJobs(db(), [docker.id], { taskId: 77, attempt: 1 });
      const ids = (a: Answer) => (a.data === null ? null : (a.data as JobJson[]).map((j) => j.name));

      const all = await api('repo').jobs(alice.client);
      assert.equal(all.status, 200);
      assert.deepEqual(ids(all), ['bare', 'docker', 'fedora'], 'waiting and running only, newest first');
      assert.equal(all.headers['x-total-count'], undefined, 'not paginated, no count');
      assert.deepEqual((all.data as JobJson[])[1], {
        id: docker.id,
        attempt: 1,
        handle: docker.handle,
        repo_id: aliceRepoId,
        owner_id: alice.user.id,
        name: 'docker',
        needs: ['fedora'],
        runs_on: ['ubuntu', 'docker'],
        task_id: 77,
        status: 'running',
      });
      assert.deepEqual(Object.keys((all.data as JobJson[])[0] as object), [
        'id',
        'attempt',
        'handle',
        'repo_id',
        'owner_id',
        'name',
        'needs',
        'runs_on',
        'task_id',
        'status',
      ]);
      const bareJson = (all.data as JobJson[])[0] as JobJson;
      assert.deepEqual(
        [bareJson.id, bareJson.needs, bareJson.runs_on, bareJson.status],
        [bare.id, null, null, 'waiting'],
        'empty lists are null, as Forgejo',
      );

      const search = async (query: string) => {
        const res = await s.api('GET', `/repos/alice/app/actions/runners/jobs${query}`, { token: alice.token });
        assert.equal(res.status, 200, query);
        return res.json === null ? null : (res.json as JobJson[]).map((j) => j.name);
      };
      assert.deepEqual(ids(await api('repo').jobs(alice.client, 'fedora')), ['fedora']);
      assert.deepEqual(await search('?labels=docker,ubuntu,extra'), ['docker'], "the job's labels ⊆ the given ones");
      assert.deepEqual(await search('?labels=ubuntu'), null, 'a subset of the job labels is not enough');
      assert.equal(
        (await s.api('GET', '/repos/alice/app/actions/runners/jobs?labels=ubuntu', { token: alice.token })).text,
        'null',
      );
      assert.deepEqual(await search('?labels='), ['bare'], 'empty: jobs without runs-on');
      assert.deepEqual(await search('?labels'), ['bare']);
      assert.deepEqual(await search('?labels=%20fedora%20'), ['fedora'], 'the value is trimmed as a whole');
      assert.deepEqual(
        await search('?labels=fedora,%20docker,ubuntu'),
        ['fedora'],
        "items are not trimmed: ' docker' is not docker",
      );
      assert.deepEqual(
        await search('?labels=,fedora'),
        ['bare', 'fedora'],
        'a leading empty item also selects jobs without runs-on',
      );
      assert.deepEqual(
        await search('?labels=fedora&labels=docker,ubuntu'),
        ['fedora'],
        'only the first labels= counts',
      );
      assert.deepEqual(await search('?labels=FEDORA'), null, 'case-sensitive');

      // Owner scopes cover every repository of the owner; the instance every job.
      assert.deepEqual(ids(await api('org').jobs(alice.client)), ['svc-fedora']);
      assert.deepEqual(ids(await api('user').jobs(alice.client)), ['bare', 'docker', 'fedora']);
      const none = await s.api('GET', '/user/actions/runners/jobs', { token: bob.token });
      assert.deepEqual([none.status, none.text], [200, 'null'], "bob's repositories have no jobs");
      assert.deepEqual(ids(await api('admin').jobs(s.admin.client, 'fedora')), ['svc-fedora', 'fedora']);
      const deprecated = await s.api('GET', '/admin/runners/jobs', { token: s.admin.token });
      assert.deepEqual(
        (deprecated.json as JobJson[]).map((j) => j.name),
        ['svc-fedora', 'bare', 'docker', 'fedora'],
      );
      assert.equal(svc.length, 2);

      // Jobs that finish leave the search.
      await forceJobs(db(), [fedora.id, docker.id, bare.id], { status: ActionStatus.success });
      assert.equal((await s.api('GET', '/repos/alice/app/actions/runners/jobs', { token: alice.token })).text, 'null');
    });

    test('jobs search finds the jobs of a dispatched workflow', async () => {
      assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name: 'wf' } })).status, 201);
      const work = await createWorkDir(remoteUrl(s.url, 'alice', 'wf', { user: 'alice', password: alice.token }));
      try {
        await work.commit(
          {
            '.forgejo/workflows/build.yml': `on: workflow_dispatch
jobs:
  compile:
    runs-on: [self-hosted, linux]
    steps:
      - run: make
  package:
    needs: compile
    runs-on: docker
    steps:
      - run: make dist
`,
          },
          'workflow',
        );
        assert.equal((await work.push('main')).code, 0);
        const dispatched = await dispatchWorkflow({
          client: alice.client,
          path: { owner: 'alice', repo: 'wf', workflowfilename: 'build.yml' },
          body: { ref: 'main' },
        });
        assert.equal(dispatched.status, 204);
        const found = await repoSearchRunJobs({
          client: alice.client,
          path: { owner: 'alice', repo: 'wf' },
          query: { labels: 'linux,self-hosted,x64' },
        });
        assert.equal(found.status, 200);
        const jobs = found.data as JobJson[];
        assert.deepEqual(
          jobs.map((j) => [j.name, j.runs_on, j.needs, j.status]),
          [['compile', ['self-hosted', 'linux'], null, 'waiting']],
          'the blocked job that needs it is not listed',
        );
        assert.match(jobs[0]?.handle ?? '', /.+/);
      } finally {
        await work.remove();
      }
    });

    test('registration tokens follow key rotation (REGISTRATION_TOKEN_COLUMN)', async () => {
      const tokens = new Map<Label, string>();
      for (const label of [...SCOPED, 'admin'] as Label[])
        tokens.set(label, ((await api(label).token(clientOf(label))).data as { token: string }).token);
      // A ring whose current key is new, with the data folder's key for decryption.
      const { ring } = openKeyRing({
        dataDir: s.dataDir,
        configuredKey: 'a-brand-new-key-for-rotating-runner-tokens',
        previousKeys: [],
      });
      const service = new RunnerService(db(), systemClock, ring);
      assert.equal(REGISTRATION_TOKEN_COLUMN.label, 'action_runner_token');
      const rotation = new KeyRotationService(db(), ring, [REGISTRATION_TOKEN_COLUMN]);
      const total = (await db().selectFrom('action_runner_token').select('id').execute()).length;
      assert.equal(await rotation.countRemaining(), total);
      const report = await rotation.reencryptAll();
      assert.deepEqual([report.reencrypted, report.failed, report.remaining], [total, [], 0]);
      assert.deepEqual([...(await rotation.keyIdsInUse())], [ring.currentKeyId()]);
      for (const label of [...SCOPED, 'admin'] as Label[]) {
        assert.equal(
          await service.registrationToken(keyOf(label)),
          tokens.get(label),
          `${label}: same token after rotation`,
        );
      }
    });
  });
}
