// Actions variables at user, organization and repository scope (Forgejo: routers/api/v1/*/action.go, variables),
// through the forgejo-ts client, on every database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCurrentUserRepo, createOrgRepo, orgCreate, repoDelete } from '@llamaduck/forgejo-ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { errorBody, orgApi, repoApi, userApi } from '../support/actions.ts';
import type { ScopeApi, ScopeLabel } from '../support/actions.ts';
// Aliased: these tests call their own per-label record `Scope`.
import type { Scope as ActionsScope } from '../../src/modules/scope.ts';
import { insertLegacyVariable } from '../support/white-box.ts';

interface Scope {
  api: ScopeApi;
  key: ActionsScope;
}

interface VariableJson {
  owner_id: number;
  repo_id: number;
  name: string;
  data: string;
}

const LABELS: ScopeLabel[] = ['user', 'org', 'repo'];

for (const dialect of testDialects()) {
  describe(`actions variables [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    const scopes = new Map<ScopeLabel, Scope>();
    const scope = (label: ScopeLabel): Scope => scopes.get(label) as Scope;
    const db = () => s.server.deps.database.db;
    /** Deletes a scope's variables as their owner would, a page (at most 50) at a time. */
    const clear = async ({ api }: Scope) => {
      for (;;) {
        const listed = (await api.listVariables(alice.client, { limit: 50 })).data as { name: string }[];
        if (listed.length === 0) return;
        for (const { name } of listed) assert.equal((await api.deleteVariable(alice.client, name)).status, 204, name);
      }
    };

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      assert.equal((await orgCreate({ client: alice.client, body: { username: 'acme' } })).status, 201);
      const repo = await createCurrentUserRepo({ client: alice.client, body: { name: 'app' } });
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
      test(`[${label}] POST 204, GET {owner_id, repo_id, name, data} with the scope's ids, PUT 204, DELETE 204 then 404`, async () => {
        const { api, key } = scope(label);
        const created = await api.createVariable(alice.client, 'my_var', 'hello');
        assert.equal(created.status, 204, 'Forgejo answers 204, not 201');
        assert.equal(created.headers['content-type'], undefined);
        const got = await s.api('GET', `${api.base}/variables/MY_VAR`, { token: alice.token });
        assert.equal(got.status, 200);
        const expectedOwner = label === 'repo' ? 0 : key.ownerId;
        const expectedRepo = label === 'repo' ? key.repoId : 0;
        assert.deepEqual(got.json, { owner_id: expectedOwner, repo_id: expectedRepo, name: 'MY_VAR', data: 'hello' });
        assert.deepEqual(
          Object.keys(got.json as object),
          ['owner_id', 'repo_id', 'name', 'data'],
          "Forgejo's field order",
        );
        assert.equal(got.headers.get('content-type'), 'application/json;charset=utf-8');
        assert.ok(expectedOwner > 0 || expectedRepo > 0);

        assert.equal((await api.updateVariable(alice.client, 'My_Var', { value: 'changed' })).status, 204);
        assert.equal(((await api.getVariable(alice.client, 'my_var')).data as VariableJson).data, 'changed');
        assert.equal((await api.deleteVariable(alice.client, 'mY_vAr')).status, 204);
        for (const res of [
          await s.api('GET', `${api.base}/variables/MY_VAR`, { token: alice.token }),
          await s.api('DELETE', `${api.base}/variables/MY_VAR`, { token: alice.token }),
        ]) {
          assert.equal(res.status, 404);
          assert.deepEqual(res.json, errorBody(s.rootUrl, 'variable not found'), 'handler-level 404: no errors key');
        }
      });

      test(`[${label}] names: Forgejo's cases; CI is refused for variables; the 409 check comes first`, async () => {
        const { api, key } = scope(label);
        await clear(scope(label));
        const expect = async (name: string, status: number, message?: string) => {
          const res = await api.createVariable(alice.client, name, 'v');
          assert.equal(res.status, status, name);
          if (message) assert.deepEqual(res.error, errorBody(s.rootUrl, message), name);
        };
        await expect('-', 400, 'invalid secret name');
        await expect('_', 204);
        await expect('TEST_VAR', 204);
        await expect('test_var', 409, 'variable name test_var already exists');
        await expect('ci', 400, 'env name cannot be ci');
        await expect('Ci', 400, 'env name cannot be ci');
        await expect('123var', 400, 'invalid secret name');
        await expect('var@test', 400, 'invalid secret name');
        await expect('forgejo_var', 400, 'invalid secret name');
        await expect('github_var', 400, 'invalid secret name');
        await expect('gitea_var', 400, 'invalid secret name');
        await expect('V'.repeat(256), 400, 'invalid secret name');
        await expect('V'.repeat(255), 204);
        // An existing name is reported before the name is judged (a legacy row Forgejo would also refuse to create).
        await insertLegacyVariable(db(), key, 'GITHUB_LEGACY', 'x');
        await expect('github_legacy', 409, 'variable name github_legacy already exists');
        assert.equal(
          (await api.deleteVariable(alice.client, 'github_legacy')).status,
          204,
          'DELETE does not validate names',
        );
      });

      test(`[${label}] value: 422 [Value]: Required; whitespace passes; only CRLF is normalised; 64 KiB limit`, async () => {
        const { api } = scope(label);
        await clear(scope(label));
        for (const body of [undefined, {}, { value: '' }, { value: null }]) {
          const res = await s.api('POST', `${api.base}/variables/EMPTY`, {
            token: alice.token,
            ...(body === undefined ? {} : { body }),
          });
          assert.equal(res.status, 422, JSON.stringify(body));
          assert.deepEqual(res.json, errorBody(s.rootUrl, '[Value]: Required'));
        }
        assert.equal(
          (await s.api('POST', `${api.base}/variables/NUM`, { token: alice.token, body: { value: 7 } })).status,
          422,
        );
        const cases: [string, string][] = [
          ['   \r\ndàtä\t   \r\n  ', '   \ndàtä\t   \n  '],
          ['  \tvalüé\r\nX  \r\n', '  \tvalüé\nX  \n'],
          ['   ', '   '],
          ['a\rb', 'a\rb'],
          ['日本語 🚀', '日本語 🚀'],
        ];
        for (const [i, [sent, stored]] of cases.entries()) {
          assert.equal((await api.createVariable(alice.client, `V${i}`, sent)).status, 204);
          assert.equal(
            ((await api.getVariable(alice.client, `V${i}`)).data as VariableJson).data,
            stored,
            JSON.stringify(sent),
          );
        }
        assert.equal((await api.updateVariable(alice.client, 'V0', { value: 'x\r\ny' })).status, 204);
        assert.equal(((await api.getVariable(alice.client, 'V0')).data as VariableJson).data, 'x\ny');
        assert.equal((await api.createVariable(alice.client, 'BIG', 'x'.repeat(65_536))).status, 204);
        const tooBig = await api.createVariable(alice.client, 'BIGGER', 'x'.repeat(65_537));
        assert.deepEqual(
          [tooBig.status, tooBig.error],
          [422, errorBody(s.rootUrl, '[Value]: MaxSize (at most 65536 bytes)')],
        );
        const tooBigUpdate = await api.updateVariable(alice.client, 'BIG', { value: 'é'.repeat(40_000) });
        assert.equal(tooBigUpdate.status, 422);
        const missing = await s.api('PUT', `${api.base}/variables/BIG`, {
          token: alice.token,
          body: { name: 'OTHER' },
        });
        assert.deepEqual(missing.json, errorBody(s.rootUrl, '[Value]: Required'));
      });

      test(`[${label}] PUT: empty or absent name keeps it; rename upper-cases; onto an existing name 409; checks in Forgejo's order`, async () => {
        const { api, key } = scope(label);
        await clear(scope(label));
        assert.equal((await api.createVariable(alice.client, 'ONE', '1')).status, 204);
        assert.equal((await api.createVariable(alice.client, 'TWO', '2')).status, 204);
        assert.equal((await api.updateVariable(alice.client, 'one', { name: '', value: 'uno' })).status, 204);
        assert.equal((await api.updateVariable(alice.client, 'one', { value: 'eins' })).status, 204);
        assert.deepEqual((await api.getVariable(alice.client, 'ONE')).data, {
          owner_id: label === 'repo' ? 0 : key.ownerId,
          repo_id: label === 'repo' ? key.repoId : 0,
          name: 'ONE',
          data: 'eins',
        });
        // Rename (the new name is upper-cased); the old name is gone.
        assert.equal((await api.updateVariable(alice.client, 'one', { name: 'first', value: 'premier' })).status, 204);
        assert.equal((await api.getVariable(alice.client, 'ONE')).status, 404);
        assert.equal(((await api.getVariable(alice.client, 'FIRST')).data as VariableJson).data, 'premier');
        // Same name in another case is not a clash with itself.
        assert.equal((await api.updateVariable(alice.client, 'FIRST', { name: 'First', value: 'p' })).status, 204);
        // Renaming onto an existing name: 409 (Forgejo: 500), nothing changes.
        const clash = await api.updateVariable(alice.client, 'first', { name: 'two', value: 'x' });
        assert.deepEqual([clash.status, clash.error], [409, errorBody(s.rootUrl, 'variable name two already exists')]);
        assert.equal(((await api.getVariable(alice.client, 'TWO')).data as VariableJson).data, '2');
        assert.equal(((await api.getVariable(alice.client, 'FIRST')).data as VariableJson).data, 'p');
        // Invalid new names.
        for (const [name, message] of [
          ['ci', 'env name cannot be ci'],
          ['9lives', 'invalid secret name'],
          ['GITEA_X', 'invalid secret name'],
        ]) {
          const res = await api.updateVariable(alice.client, 'first', { name, value: 'x' });
          assert.deepEqual([res.status, res.error], [400, errorBody(s.rootUrl, message as string)], name);
        }
        // The variable is looked up before the new name is judged.
        const missing = await api.updateVariable(alice.client, 'no_such', { name: 'ci', value: 'x' });
        assert.deepEqual([missing.status, missing.error], [404, errorBody(s.rootUrl, 'variable not found')]);
      });

      test(`[${label}] list: ordered by name, X-Total-Count, bounded pages`, async () => {
        const { api, key } = scope(label);
        await clear(scope(label));
        for (const name of ['b_two', 'A_ONE', 'c', 'AB', 'A_A', '_Z'])
          assert.equal((await api.createVariable(alice.client, name, `v-${name}`)).status, 204);
        const list = await api.listVariables(alice.client);
        assert.equal(list.status, 200);
        const names = (list.data as VariableJson[]).map((v) => v.name);
        assert.deepEqual(
          names,
          ['AB', 'A_A', 'A_ONE', 'B_TWO', 'C', '_Z'],
          'byte order of upper-case names, on both databases',
        );
        assert.equal(list.headers['x-total-count'], '6');
        assert.match(list.headers['access-control-expose-headers'] ?? '', /X-Total-Count/);
        assert.deepEqual((list.data as VariableJson[])[0], {
          owner_id: label === 'repo' ? 0 : key.ownerId,
          repo_id: label === 'repo' ? key.repoId : 0,
          name: 'AB',
          data: 'v-AB',
        });
        const page = await api.listVariables(alice.client, { page: 2, limit: 4 });
        assert.deepEqual(
          (page.data as VariableJson[]).map((v) => v.name),
          ['C', '_Z'],
        );
        assert.equal(page.headers['x-total-count'], '6');
        for (let i = 0; i < 50; i += 1)
          await s.server.deps.services.variables.create(key, `BULK_${String(i).padStart(2, '0')}`, 'v');
        const capped = await s.api('GET', `${api.base}/variables?limit=1000`, { token: alice.token });
        assert.equal((capped.json as unknown[]).length, 50);
        assert.equal(capped.headers.get('x-total-count'), '56');
        // A page past the end is empty and still counts the whole scope.
        const beyond = await s.api('GET', `${api.base}/variables?page=9`, { token: alice.token });
        assert.deepEqual(beyond.json, []);
        assert.equal(beyond.headers.get('x-total-count'), '56');
        assert.equal(
          ((await s.api('GET', `${api.base}/variables`, { token: alice.token })).json as unknown[]).length,
          30,
          'a missing page is page 1 of 30',
        );
      });
    }

    test('scopes are separate; a repository job sees owner variables overridden by its own', async () => {
      for (const label of LABELS) await clear(scope(label));
      for (const label of LABELS)
        assert.equal((await scope(label).api.createVariable(alice.client, 'SAME', label)).status, 204);
      for (const label of LABELS)
        assert.equal(((await scope(label).api.getVariable(alice.client, 'SAME')).data as VariableJson).data, label);
      const userRepo = await s.server.deps.services.repos.findById(scope('repo').key.repoId);
      assert.equal((await s.server.deps.services.variables.variablesForRepo(userRepo!)).get('SAME'), 'repo');
      const orgRepo = await createOrgRepo({ client: alice.client, path: { org: 'acme' }, body: { name: 'svc' } });
      const svc = await s.server.deps.services.repos.findById(orgRepo.data!.id!);
      assert.equal((await s.server.deps.services.variables.variablesForRepo(svc!)).get('SAME'), 'org');
      assert.equal((await repoDelete({ client: alice.client, path: { owner: 'acme', repo: 'svc' } })).status, 204);
    });

    test("a repository's GET answers its own variable only: not its owner's nor another repository's of that name", async () => {
      const other = await createCurrentUserRepo({ client: alice.client, body: { name: 'other' } });
      assert.equal(other.status, 201);
      assert.equal((await repoApi('alice', 'other').createVariable(alice.client, 'ONLY_THERE', 'other')).status, 204);
      assert.equal((await scope('user').api.createVariable(alice.client, 'ONLY_THERE', 'user')).status, 204);
      const res = await s.api('GET', `${scope('repo').api.base}/variables/only_there`, { token: alice.token });
      assert.equal(res.status, 404);
      assert.deepEqual(res.json, errorBody(s.rootUrl, 'variable not found'));
      const there = await s.api('GET', '/repos/alice/other/actions/variables/only_There', { token: alice.token });
      assert.deepEqual(there.json, { owner_id: 0, repo_id: other.data!.id!, name: 'ONLY_THERE', data: 'other' });
      assert.equal((await scope('user').api.deleteVariable(alice.client, 'ONLY_THERE')).status, 204);
      assert.equal((await repoDelete({ client: alice.client, path: { owner: 'alice', repo: 'other' } })).status, 204);
    });

    test('concurrent POSTs of one name: one 204, the others 409, one row', async () => {
      const { api, key } = scope('org');
      const statuses = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          s
            .api('POST', `${api.base}/variables/${i % 2 ? 'racer' : 'RACER'}`, {
              token: alice.token,
              body: { value: `v${i}` },
            })
            .then((r) => r.status),
        ),
      );
      assert.equal(statuses.filter((x) => x === 204).length, 1, statuses.join(','));
      assert.equal(statuses.filter((x) => x === 409).length, 11, statuses.join(','));
      const rows = await db()
        .selectFrom('action_variable')
        .select('id')
        .where('name', '=', 'RACER')
        .where('owner_id', '=', key.ownerId)
        .execute();
      assert.equal(rows.length, 1);
    });

    test('deleting a repository deletes its variables', async () => {
      const repo = await createCurrentUserRepo({ client: alice.client, body: { name: 'tmp' } });
      assert.equal((await repoApi('alice', 'tmp').createVariable(alice.client, 'GONE', 'v')).status, 204);
      assert.equal((await repoDelete({ client: alice.client, path: { owner: 'alice', repo: 'tmp' } })).status, 204);
      assert.equal(
        (await db().selectFrom('action_variable').select('id').where('repo_id', '=', repo.data!.id!).execute()).length,
        0,
      );
    });
  });
}
