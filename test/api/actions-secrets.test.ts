// Actions secrets at user, organization and repository scope (Forgejo: routers/api/v1/*/action.go, secrets),
// through the forgejo-ts client, on every database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCurrentUserRepo, createOrgRepo, orgCreate, orgDelete, repoDelete } from '@llamaduck/forgejo-ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { errorBody, orgApi, repoApi, userApi } from '../support/actions.ts';
import type { ScopeApi, ScopeLabel } from '../support/actions.ts';
// Aliased: these tests call their own per-label record `Scope`.
import type { Scope as ActionsScope } from '../../src/modules/scope.ts';
import { secretAssociatedData } from '../../src/services/actions/scope.ts';
import { backdateSecret, insertStoredSecrets } from '../support/white-box.ts';

interface Scope {
  api: ScopeApi;
  key: ActionsScope;
}

const LABELS: ScopeLabel[] = ['user', 'org', 'repo'];

for (const dialect of testDialects()) {
  describe(`actions secrets [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    const scopes = new Map<ScopeLabel, Scope>();
    const scope = (label: ScopeLabel): Scope => scopes.get(label) as Scope;
    const db = () => s.server.deps.database.db;
    const readValue = (key: ActionsScope, name: string) => s.server.deps.services.secrets.readValue(key, name);
    /** Deletes a scope's secrets as their owner would (the org and repository scopes list them), a page at a time. */
    const clearSecrets = async (api: ScopeApi) => {
      const list = api.listSecrets;
      assert.ok(list, `${api.label} secrets are not listed`);
      for (;;) {
        const listed = (await list(alice.client, { limit: 50 })).data as { name: string }[];
        if (listed.length === 0) return;
        for (const { name } of listed) assert.equal((await api.deleteSecret(alice.client, name)).status, 204, name);
      }
    };
    /** All names a scope lists (secrets in id order). */
    const listed = async (sc: Scope): Promise<string[]> => {
      const rows = await db()
        .selectFrom('secret')
        .select('name')
        .where('owner_id', '=', sc.key.ownerId)
        .where('repo_id', '=', sc.key.repoId)
        .orderBy('id')
        .execute();
      return rows.map((r) => r.name);
    };

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      assert.equal((await orgCreate({ client: alice.client, body: { username: 'acme' } })).status, 201);
      const repo = await createCurrentUserRepo({ client: alice.client, body: { name: 'app' } });
      assert.equal(repo.status, 201);
      const org = await s.server.deps.services.accounts.findByName('acme');
      scopes.set('user', { api: userApi(), key: { kind: 'user', ownerId: alice.user.id, repoId: 0 } });
      scopes.set('org', { api: orgApi('acme'), key: { kind: 'org', ownerId: org!.id, repoId: 0 } });
      scopes.set('repo', {
        api: repoApi('alice', 'app'),
        key: { kind: 'repo', ownerId: 0, repoId: repo.data!.id!, repoOwnerId: alice.user.id },
      });
    });
    after(async () => {
      await s.stop();
    });

    for (const label of LABELS) {
      test(`[${label}] PUT creates (201) then replaces (204) with no body; the value is stored encrypted and never returned`, async () => {
        const { api, key } = scope(label);
        const created = await api.putSecret(alice.client, 'deploy_token', 'first-value');
        assert.equal(created.status, 201);
        assert.equal(created.headers['content-type'], undefined, 'no body, no JSON content type');
        const raw = await s.api('PUT', `${api.base}/secrets/DEPLOY_TOKEN`, {
          token: alice.token,
          body: { data: 'second-value' },
        });
        assert.equal(raw.status, 204);
        assert.equal(raw.text, '');
        assert.equal(await readValue(key, 'Deploy_Token'), 'second-value', 'names are case-insensitive');

        const rows = await db()
          .selectFrom('secret')
          .selectAll()
          .where('name', '=', 'DEPLOY_TOKEN')
          .where('owner_id', '=', key.ownerId)
          .where('repo_id', '=', key.repoId)
          .execute();
        assert.equal(rows.length, 1);
        assert.match(rows[0]!.data, /^v1:[0-9a-f]{8}:/);
        assert.ok(!rows[0]!.data.includes('second-value'));
        // Each scope's row carries its own owner_id/repo_id (user/org: owner set; repo: repo set).
        assert.equal(rows[0]!.owner_id, label === 'repo' ? 0 : key.ownerId);
        assert.equal(rows[0]!.repo_id, label === 'repo' ? key.repoId : 0);
        // A ciphertext is bound to its place: moved to another name it does not decrypt.
        assert.throws(() =>
          s.server.deps.services.keys.decrypt(rows[0]!.data, secretAssociatedData(key.ownerId, key.repoId, 'OTHER')),
        );
      });

      test(`[${label}] data: required and non-empty (422 [Data]: Required); whitespace passes; CRLF becomes LF, nothing else changes`, async () => {
        const { api, key } = scope(label);
        for (const body of [undefined, {}, { data: '' }, { data: null }]) {
          const res = await s.api('PUT', `${api.base}/secrets/EMPTY`, {
            token: alice.token,
            ...(body === undefined ? {} : { body }),
          });
          assert.equal(res.status, 422, JSON.stringify(body));
          assert.deepEqual(res.json, errorBody(s.rootUrl, '[Data]: Required'));
        }
        assert.equal(
          (await s.api('PUT', `${api.base}/secrets/WRONG_TYPE`, { token: alice.token, body: { data: 42 } })).status,
          422,
        );
        // Validation (422) comes before the name check (400), as Forgejo binds before its handler runs.
        assert.deepEqual(
          (await s.api('PUT', `${api.base}/secrets/bad-name`, { token: alice.token, body: {} })).json,
          errorBody(s.rootUrl, '[Data]: Required'),
        );
        assert.equal((await api.putSecret(alice.client, 'SPACES', '   ')).status, 201);
        assert.equal(await readValue(key, 'SPACES'), '   ');
        assert.equal((await api.putSecret(alice.client, 'CRLF', '   \r\ndàtä\t   \r\n  ')).status, 201);
        assert.equal(await readValue(key, 'CRLF'), '   \ndàtä\t   \n  ');
        assert.equal((await api.putSecret(alice.client, 'LONE_CR', 'a\rb')).status, 201);
        assert.equal(await readValue(key, 'LONE_CR'), 'a\rb');
        // Form-encoded bodies bind too.
        const form = await s.api('PUT', `${api.base}/secrets/FORM`, {
          token: alice.token,
          rawBody: 'data=from+a+form',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        });
        assert.equal(form.status, 201);
        assert.equal(await readValue(key, 'FORM'), 'from a form');
      });

      test(`[${label}] size limit: 65536 bytes accepted, one more is 422 naming the limit`, async () => {
        const { api, key } = scope(label);
        assert.equal((await api.putSecret(alice.client, 'BIG', 'é'.repeat(32_768))).status, 201);
        assert.equal((await readValue(key, 'BIG'))?.length, 32_768);
        const tooBig = await api.putSecret(alice.client, 'BIGGER', 'x'.repeat(65_537));
        assert.equal(tooBig.status, 422);
        assert.deepEqual(tooBig.error, errorBody(s.rootUrl, '[Data]: MaxSize (at most 65536 bytes)'));
        assert.equal(await readValue(key, 'BIGGER'), null);
      });

      test(`[${label}] names: Forgejo's rules, 400 invalid secret name; CI allowed for secrets; stored upper-case`, async () => {
        const { api, key } = scope(label);
        for (const ok of ['_', 'ci', 'lower_case_1'])
          assert.equal((await api.putSecret(alice.client, ok, 'v')).status, 201, ok);
        for (const bad of [
          '-',
          '2secret',
          'FORGEJO_secret',
          'GITEA_secret',
          'GITHUB_secret',
          'github_x',
          'var@test',
          'a b',
          'dä',
          'A'.repeat(256),
        ]) {
          const res = await api.putSecret(alice.client, bad, 'v');
          assert.equal(res.status, 400, bad);
          assert.deepEqual(res.error, errorBody(s.rootUrl, 'invalid secret name'));
        }
        assert.equal(
          (await api.putSecret(alice.client, 'B'.repeat(255), 'v')).status,
          201,
          '255 bytes is the longest name',
        );
        const names = await listed(scope(label));
        for (const n of ['_', 'CI', 'LOWER_CASE_1', 'B'.repeat(255)]) assert.ok(names.includes(n), n);
        assert.ok(!names.some((n) => /[a-z]/.test(n)), 'no lower-case name is stored');
        assert.equal(await readValue(key, 'Lower_Case_1'), 'v');
      });

      test(`[${label}] DELETE: 204, then 404 "secret was not found [name: ]" without errors; names are not validated`, async () => {
        const { api, key } = scope(label);
        assert.equal((await api.putSecret(alice.client, 'TO_DELETE', 'v')).status, 201);
        assert.equal((await api.deleteSecret(alice.client, 'to_delete')).status, 204);
        const again = await s.api('DELETE', `${api.base}/secrets/TO_DELETE`, { token: alice.token });
        assert.equal(again.status, 404);
        assert.deepEqual(again.json, errorBody(s.rootUrl, 'secret was not found [name: ]'));
        assert.equal((await api.deleteSecret(alice.client, 'never-existed!')).status, 404);
        // A stored name that today's rules refuse (e.g. from an older version) can still be deleted.
        const stored = s.server.deps.services.keys.encrypt(
          'legacy',
          secretAssociatedData(key.ownerId, key.repoId, 'FORGEJO_OLD'),
        );
        await insertStoredSecrets(db(), [{ key, name: 'FORGEJO_OLD', data: stored }]);
        assert.equal((await api.deleteSecret(alice.client, 'forgejo_old')).status, 204);
        assert.equal(await readValue(key, 'FORGEJO_OLD'), null);
      });
    }

    for (const label of ['org', 'repo'] as const) {
      test(`[${label}] list: {name, created_at} in creation order, X-Total-Count, bounded pages; an update keeps created_at`, async () => {
        const { api, key } = scope(label);
        // A scope of its own, so the count is known.
        await clearSecrets(api);
        for (const name of ['zeta', 'alpha', 'Mid'])
          assert.equal((await api.putSecret(alice.client, name, `value-of-${name}`)).status, 201);
        await backdateSecret(db(), key, 'ZETA', 1_600_000_000);
        assert.equal((await api.putSecret(alice.client, 'ZETA', 'changed')).status, 204);

        const list = await api.listSecrets!(alice.client);
        assert.equal(list.status, 200);
        assert.deepEqual(
          (list.data as { name: string }[]).map((x) => x.name),
          ['ZETA', 'ALPHA', 'MID'],
        );
        assert.equal(list.headers['x-total-count'], '3');
        assert.match(list.headers['access-control-expose-headers'] ?? '', /X-Total-Count/);
        const first = (list.data as { name: string; created_at: string }[])[0]!;
        assert.deepEqual(Object.keys(first).sort(), ['created_at', 'name'], 'no value, no other field');
        assert.equal(first.created_at, '2020-09-13T12:26:40Z', 'an update does not change created_at');
        assert.ok(!JSON.stringify(list.data).includes('value-of') && !JSON.stringify(list.data).includes('changed'));

        const page2 = await api.listSecrets!(alice.client, { page: 2, limit: 2 });
        assert.deepEqual(
          (page2.data as { name: string }[]).map((x) => x.name),
          ['MID'],
        );
        assert.equal(page2.headers['x-total-count'], '3');
        const beyond = await s.api('GET', `${api.base}/secrets?page=9`, { token: alice.token });
        assert.deepEqual(beyond.json, []);
        assert.equal(beyond.headers.get('x-total-count'), '3');
      });

      test(`[${label}] pages: default 30, at most 50, a missing page is page 1`, async () => {
        const { api, key } = scope(label);
        await clearSecrets(api);
        for (let i = 0; i < 55; i += 1)
          await s.server.deps.services.secrets.createOrUpdate(key, `S_${String(i).padStart(2, '0')}`, 'v');
        const names = async (query: string) =>
          ((await s.api('GET', `${api.base}/secrets${query}`, { token: alice.token })).json as { name: string }[]).map(
            (x) => x.name,
          );
        assert.equal((await names('')).length, 30);
        assert.equal((await names('?limit=100')).length, 50);
        assert.deepEqual(await names('?limit=abc&page=-1'), await names(''), 'nonsense is the default');
        const second = await names('?page=2');
        assert.equal(second.length, 25);
        assert.equal(second[0], 'S_30');
        assert.equal(
          (await s.api('GET', `${api.base}/secrets?limit=5`, { token: alice.token })).headers.get('x-total-count'),
          '55',
        );
      });
    }

    test("the OpenAPI document names the 23 operations as Forgejo's swagger (and the forgejo-ts client) do", async () => {
      const spec = (await (await fetch(`${s.url}/swagger.v1.json`)).json()) as {
        paths: Record<string, Record<string, { operationId?: string }>>;
      };
      const expected: [string, string, string][] = [];
      for (const [prefix, cap, list] of [
        ['/user/actions', 'User', null],
        ['/orgs/{org}/actions', 'Org', 'orgListActionsSecrets'],
        ['/repos/{owner}/{repo}/actions', 'Repo', 'repoListActionsSecrets'],
      ] as const) {
        if (list) expected.push([`${prefix}/secrets`, 'get', list]);
        expected.push(
          [`${prefix}/secrets/{secretname}`, 'put', `update${cap}Secret`],
          [`${prefix}/secrets/{secretname}`, 'delete', `delete${cap}Secret`],
        );
        expected.push([`${prefix}/variables`, 'get', `get${cap}VariablesList`]);
        for (const [method, op] of [
          ['get', 'get'],
          ['post', 'create'],
          ['put', 'update'],
          ['delete', 'delete'],
        ] as const) {
          expected.push([`${prefix}/variables/{variablename}`, method, `${op}${cap}Variable`]);
        }
      }
      assert.equal(expected.length, 23);
      for (const [p, method, operationId] of expected)
        assert.equal(spec.paths[p]?.[method]?.operationId, operationId, `${method} ${p}`);
      assert.equal(spec.paths['/user/actions/secrets'], undefined);
    });

    test('no GET /user/actions/secrets (404); GET of one secret is not a route either', async () => {
      assert.equal((await s.api('GET', '/user/actions/secrets', { token: alice.token })).status, 404);
      assert.equal((await s.api('GET', '/user/actions/secrets/ANY', { token: alice.token })).status, 404);
      assert.equal((await s.api('GET', '/orgs/acme/actions/secrets/ANY', { token: alice.token })).status, 404);
    });

    test("an empty secret name (PUT or DELETE …/actions/secrets/): 405 with an empty body for repo and org, 404 for user, as Forgejo's router answers; nothing is stored", async () => {
      // Forgejo strips the trailing slash before routing: …/actions/secrets only has GET
      // (repo, org: 405, Allow: GET), and /user/actions/secrets is no route (404).
      for (const label of ['repo', 'org'] as const) {
        const { api } = scope(label);
        for (const method of ['PUT', 'DELETE']) {
          const res = await s.api(method, `${api.base}/secrets/`, {
            token: alice.token,
            ...(method === 'PUT' ? { body: { data: 'v' } } : {}),
          });
          assert.equal(res.status, 405, `${method} ${label}`);
          assert.equal(res.text, '', `${method} ${label}`);
          assert.equal(res.headers.get('allow'), 'GET', `${method} ${label}`);
        }
        // Without a token too: the router answers before any guard.
        assert.equal((await s.api('PUT', `${api.base}/secrets/`, { body: { data: 'v' } })).status, 405, label);
      }
      for (const method of ['PUT', 'DELETE']) {
        const res = await s.api(method, '/user/actions/secrets/', {
          token: alice.token,
          ...(method === 'PUT' ? { body: { data: 'v' } } : {}),
        });
        assert.equal(res.status, 404, method);
        assert.deepEqual(res.json, { ...errorBody(s.rootUrl, "The target couldn't be found."), errors: [] });
      }
      const empty = await db().selectFrom('secret').select('id').where('name', '=', '').execute();
      assert.equal(empty.length, 0);
    });

    test('scopes are separate: one name in three scopes is three secrets', async () => {
      for (const label of LABELS)
        assert.ok(
          [201, 204].includes((await scope(label).api.putSecret(alice.client, 'SHARED_NAME', `in-${label}`)).status),
        );
      for (const label of LABELS) assert.equal(await readValue(scope(label).key, 'SHARED_NAME'), `in-${label}`);
      assert.equal((await scope('repo').api.deleteSecret(alice.client, 'SHARED_NAME')).status, 204);
      assert.equal(await readValue(scope('org').key, 'SHARED_NAME'), 'in-org');
      assert.equal(await readValue(scope('user').key, 'SHARED_NAME'), 'in-user');
    });

    test('secretsForRepo: the owner’s secrets, overridden by the repository’s own', async () => {
      const orgRepo = await createOrgRepo({ client: alice.client, path: { org: 'acme' }, body: { name: 'svc' } });
      assert.equal(orgRepo.status, 201);
      const orgKey = scope('org').key;
      const svcKey: ActionsScope = {
        kind: 'repo',
        ownerId: 0,
        repoId: orgRepo.data!.id!,
        repoOwnerId: orgKey.ownerId,
      };
      await s.server.deps.services.secrets.createOrUpdate(orgKey, 'ORG_ONLY', 'org');
      await s.server.deps.services.secrets.createOrUpdate(orgKey, 'BOTH', 'from-org');
      await s.server.deps.services.secrets.createOrUpdate(svcKey, 'BOTH', 'from-repo');
      const repo = await s.server.deps.services.repos.findById(svcKey.repoId);
      const values = await s.server.deps.services.secrets.secretsForRepo(repo!);
      assert.equal(values.get('ORG_ONLY'), 'org');
      assert.equal(values.get('BOTH'), 'from-repo');
      const userRepo = await s.server.deps.services.repos.findById(scope('repo').key.repoId);
      const userValues = await s.server.deps.services.secrets.secretsForRepo(userRepo!);
      assert.equal(userValues.get('SHARED_NAME'), 'in-user', 'a user repository sees its owner’s secrets');
      assert.equal(userValues.has('ORG_ONLY'), false);
    });

    test('20 concurrent PUTs of one name: one 201, nineteen 204, one row holding one of the values', async () => {
      for (const label of LABELS) {
        const { api, key } = scope(label);
        const values = Array.from({ length: 20 }, (_, i) => `concurrent-${label}-${i}`);
        const statuses = await Promise.all(
          values.map((v) =>
            s.api('PUT', `${api.base}/secrets/RACE`, { token: alice.token, body: { data: v } }).then((r) => r.status),
          ),
        );
        assert.equal(statuses.filter((x) => x === 201).length, 1, `${label}: ${statuses.join(',')}`);
        assert.equal(statuses.filter((x) => x === 204).length, 19, `${label}: ${statuses.join(',')}`);
        const rows = await db()
          .selectFrom('secret')
          .select('id')
          .where('name', '=', 'RACE')
          .where('owner_id', '=', key.ownerId)
          .where('repo_id', '=', key.repoId)
          .execute();
        assert.equal(rows.length, 1);
        assert.ok(values.includes((await readValue(key, 'RACE')) as string));
      }
      // Deletes racing with writes never answer 500 either.
      const { api } = scope('org');
      const mixed = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          s
            .api(i % 3 === 0 ? 'DELETE' : 'PUT', `${api.base}/secrets/RACE2`, {
              token: alice.token,
              ...(i % 3 === 0 ? {} : { body: { data: `v${i}` } }),
            })
            .then((r) => r.status),
        ),
      );
      assert.ok(
        mixed.every((x) => [201, 204, 404].includes(x)),
        mixed.join(','),
      );
    });

    test('deleting a repository or an organization deletes its secrets', async () => {
      const bob = await s.createUser('bob');
      assert.equal((await orgCreate({ client: bob.client, body: { username: 'tempco' } })).status, 201);
      const repo = await createCurrentUserRepo({ client: bob.client, body: { name: 'tmp' } });
      assert.equal((await orgApi('tempco').putSecret(bob.client, 'X', 'v')).status, 201);
      assert.equal((await repoApi('bob', 'tmp').putSecret(bob.client, 'X', 'v')).status, 201);
      assert.equal((await userApi().putSecret(bob.client, 'X', 'v')).status, 201);
      const tempco = await s.server.deps.services.accounts.findByName('tempco');
      assert.equal((await repoDelete({ client: bob.client, path: { owner: 'bob', repo: 'tmp' } })).status, 204);
      assert.equal(
        (await db().selectFrom('secret').select('id').where('repo_id', '=', repo.data!.id!).execute()).length,
        0,
      );
      assert.equal((await orgDelete({ client: bob.client, path: { org: 'tempco' } })).status, 204);
      assert.equal(
        (await db().selectFrom('secret').select('id').where('owner_id', '=', tempco!.id).execute()).length,
        0,
      );
      assert.equal(
        await readValue({ kind: 'user', ownerId: bob.user.id, repoId: 0 }, 'X'),
        'v',
        'other scopes keep theirs',
      );
    });

    test('no value is readable from the database (PostgreSQL too)', async () => {
      const marker = `marker-${Math.random().toString(36).slice(2)}`;
      for (const label of LABELS)
        assert.ok(
          [201, 204].includes((await scope(label).api.putSecret(alice.client, 'MARKED', `${marker}-${label}`)).status),
        );
      const rows = await db().selectFrom('secret').selectAll().execute();
      assert.ok(rows.length > 0);
      assert.ok(!JSON.stringify(rows).includes(marker));
    });
  });
}
