// Who may use the secrets and variables API, at each scope and for every
// method (Forgejo: routers/api/v1/api.go): Forgejo's guard chains, statuses and
// messages, role by role, on every database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createCurrentUserRepo,
  createOrgRepo,
  orgAddTeamMember,
  orgCreate,
  orgCreateTeam,
  repoAddCollaborator,
  repoEdit,
} from '@llamaduck/forgejo-ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { orgApi, repoApi, userApi } from '../support/actions.ts';
import type { ScopeApi } from '../support/actions.ts';

type Target =
  'user' | 'org' | 'userRepoPublic' | 'userRepoPrivate' | 'orgRepoPublic' | 'orgRepoPrivate' | 'actionsDisabled';
type Role =
  | 'anonymous'
  | 'badToken'
  | 'tokenWithoutScope'
  | 'nonMember'
  | 'orgMember'
  | 'teamWrite'
  | 'collaboratorAdmin'
  | 'teamAdmin'
  | 'repoOwner'
  | 'orgOwner'
  | 'siteAdmin';

const BASE: Record<Target, string> = {
  user: '/user/actions',
  org: '/orgs/acme/actions',
  userRepoPublic: '/repos/olivia/pub/actions',
  userRepoPrivate: '/repos/olivia/priv/actions',
  orgRepoPublic: '/repos/acme/app/actions',
  orgRepoPrivate: '/repos/acme/hidden/actions',
  actionsDisabled: '/repos/olivia/noact/actions',
};
const CATEGORY: Record<Target, string> = {
  user: 'user',
  org: 'organization',
  userRepoPublic: 'repository',
  userRepoPrivate: 'repository',
  orgRepoPublic: 'repository',
  orgRepoPrivate: 'repository',
  actionsDisabled: 'repository',
};

interface Op {
  method: 'GET' | 'PUT' | 'POST' | 'DELETE';
  path: string;
  body?: unknown;
  notForUser?: boolean;
}
/** Every route of the API, with a valid body: only the guards can refuse. */
const OPS: Op[] = [
  { method: 'GET', path: '/secrets', notForUser: true },
  { method: 'PUT', path: '/secrets/MATRIX', body: { data: 'v' } },
  { method: 'DELETE', path: '/secrets/MATRIX' },
  { method: 'GET', path: '/variables' },
  { method: 'POST', path: '/variables/MATRIX', body: { value: 'v' } },
  { method: 'GET', path: '/variables/MATRIX' },
  { method: 'PUT', path: '/variables/MATRIX', body: { value: 'w' } },
  { method: 'DELETE', path: '/variables/MATRIX' },
];

type Expect = 'pass' | 'scope' | { status: number; message?: string };
const PASS: Expect = 'pass';
const TOKEN_REQUIRED: Expect = { status: 401, message: 'token is required' };
const BAD_CREDENTIALS: Expect = { status: 401, message: 'invalid username, password or token' };
/** The standard not-found body ({message, url, errors: []}). */
const NOT_FOUND: Expect = { status: 404 };
const NOT_ORG_OWNER: Expect = { status: 403, message: 'Must be an organization owner' };
const NOT_REPO_OWNER: Expect = { status: 403, message: 'user should be the owner of the repo' };

function row(e: Expect): Record<Target, Expect> {
  return {
    user: e,
    org: e,
    userRepoPublic: e,
    userRepoPrivate: e,
    orgRepoPublic: e,
    orgRepoPrivate: e,
    actionsDisabled: e,
  };
}

// Reading guide: a private repository does not exist for whoever cannot read it
// (404, before reqToken); a disabled Actions unit is 404 for everyone past reqToken;
// repository scope needs the owner level (owner, org owner, admin team, site admin).
const MATRIX: Record<Role, Record<Target, Expect>> = {
  anonymous: { ...row(TOKEN_REQUIRED), userRepoPrivate: NOT_FOUND, orgRepoPrivate: NOT_FOUND },
  badToken: row(BAD_CREDENTIALS),
  tokenWithoutScope: row('scope'),
  nonMember: {
    user: PASS,
    org: NOT_ORG_OWNER,
    userRepoPublic: NOT_REPO_OWNER,
    userRepoPrivate: NOT_FOUND,
    orgRepoPublic: NOT_REPO_OWNER,
    orgRepoPrivate: NOT_FOUND,
    actionsDisabled: NOT_FOUND,
  },
  orgMember: {
    user: PASS,
    org: NOT_ORG_OWNER,
    userRepoPublic: NOT_REPO_OWNER,
    userRepoPrivate: NOT_FOUND,
    orgRepoPublic: NOT_REPO_OWNER,
    orgRepoPrivate: NOT_REPO_OWNER,
    actionsDisabled: NOT_FOUND,
  },
  teamWrite: {
    user: PASS,
    org: NOT_ORG_OWNER,
    userRepoPublic: NOT_REPO_OWNER,
    userRepoPrivate: NOT_FOUND,
    orgRepoPublic: NOT_REPO_OWNER,
    orgRepoPrivate: NOT_REPO_OWNER,
    actionsDisabled: NOT_FOUND,
  },
  collaboratorAdmin: {
    user: PASS,
    org: NOT_ORG_OWNER,
    userRepoPublic: NOT_REPO_OWNER,
    userRepoPrivate: NOT_FOUND,
    orgRepoPublic: NOT_REPO_OWNER,
    orgRepoPrivate: NOT_FOUND,
    actionsDisabled: NOT_FOUND,
  },
  teamAdmin: {
    user: PASS,
    org: NOT_ORG_OWNER,
    userRepoPublic: NOT_REPO_OWNER,
    userRepoPrivate: NOT_FOUND,
    orgRepoPublic: PASS,
    orgRepoPrivate: PASS,
    actionsDisabled: NOT_FOUND,
  },
  repoOwner: { ...row(PASS), actionsDisabled: NOT_FOUND },
  orgOwner: {
    user: PASS,
    org: PASS,
    userRepoPublic: NOT_REPO_OWNER,
    userRepoPrivate: NOT_FOUND,
    orgRepoPublic: PASS,
    orgRepoPrivate: PASS,
    actionsDisabled: NOT_FOUND,
  },
  siteAdmin: { ...row(PASS), actionsDisabled: NOT_FOUND },
};

/** Answers a handler gives once the guards let the request through. */
const HANDLER_MESSAGES = ['variable not found', 'secret was not found [name: ]', 'variable name MATRIX already exists'];

function passedGuards(res: { status: number; json: unknown }): boolean {
  if (res.status >= 200 && res.status < 300) return true;
  const message = (res.json as { message?: string } | null)?.message ?? '';
  return (res.status === 404 || res.status === 409) && HANDLER_MESSAGES.includes(message);
}

for (const dialect of testDialects()) {
  describe(`actions secrets and variables: access matrix [${dialect}]`, () => {
    let s: TestServer;
    const auth = new Map<Role, string | null>();
    const users = new Map<string, TestUser>();

    before(async () => {
      s = await startTestServer(dialect);
      for (const name of ['olivia', 'otto', 'nina', 'mike', 'walt', 'cara', 'adam'])
        users.set(name, await s.createUser(name));
      const olivia = users.get('olivia')!;
      const c = olivia.client;
      assert.equal((await orgCreate({ client: c, body: { username: 'acme', visibility: 'public' } })).status, 201);
      assert.equal((await orgCreate({ client: c, body: { username: 'hush', visibility: 'private' } })).status, 201);
      for (const [name, priv] of [
        ['pub', false],
        ['priv', true],
        ['noact', false],
      ] as const) {
        assert.equal((await createCurrentUserRepo({ client: c, body: { name, private: priv } })).status, 201);
      }
      assert.equal(
        (await createOrgRepo({ client: c, path: { org: 'acme' }, body: { name: 'app', private: false } })).status,
        201,
      );
      assert.equal(
        (await createOrgRepo({ client: c, path: { org: 'acme' }, body: { name: 'hidden', private: true } })).status,
        201,
      );
      assert.equal(
        (await repoEdit({ client: c, path: { owner: 'olivia', repo: 'noact' }, body: { has_actions: false } })).data
          ?.has_actions,
        false,
      );

      const team = async (name: string, permission: 'read' | 'write' | 'admin', member: string) => {
        const created = await orgCreateTeam({
          client: c,
          path: { org: 'acme' },
          body: { name, permission, includes_all_repositories: true },
        });
        assert.equal(created.status, 201);
        assert.equal(
          (await orgAddTeamMember({ client: c, path: { id: created.data!.id!, username: member } })).status,
          204,
        );
      };
      await team('readers', 'read', 'mike');
      await team('writers', 'write', 'walt');
      await team('admins', 'admin', 'adam');
      const owners = await s.server.deps.database.db
        .selectFrom('team')
        .select('id')
        .where('name', '=', 'Owners')
        .where('org_id', '=', (await s.server.deps.services.accounts.findByName('acme'))!.id)
        .executeTakeFirstOrThrow();
      assert.equal((await orgAddTeamMember({ client: c, path: { id: owners.id, username: 'otto' } })).status, 204);
      for (const repo of [
        ['olivia', 'pub'],
        ['acme', 'app'],
      ] as const) {
        assert.equal(
          (
            await repoAddCollaborator({
              client: c,
              path: { owner: repo[0], repo: repo[1], collaborator: 'cara' },
              body: { permission: 'admin' },
            })
          ).status,
          204,
        );
      }

      auth.set('anonymous', null);
      auth.set('badToken', `token ${'0'.repeat(40)}`);
      auth.set('tokenWithoutScope', `token ${await s.tokenFor(olivia, ['read:misc', 'write:issue'])}`);
      auth.set('nonMember', `token ${users.get('nina')!.token}`);
      auth.set('orgMember', `token ${users.get('mike')!.token}`);
      auth.set('teamWrite', `token ${users.get('walt')!.token}`);
      auth.set('collaboratorAdmin', `token ${users.get('cara')!.token}`);
      auth.set('teamAdmin', `token ${users.get('adam')!.token}`);
      auth.set('repoOwner', `token ${olivia.token}`);
      auth.set('orgOwner', `token ${users.get('otto')!.token}`);
      auth.set('siteAdmin', `token ${s.admin.token}`);
    });
    after(async () => {
      await s.stop();
    });

    for (const role of Object.keys(MATRIX) as Role[]) {
      test(`${role}: every method at every scope`, async () => {
        for (const target of Object.keys(BASE) as Target[]) {
          const expected = MATRIX[role][target];
          for (const op of OPS) {
            if (op.notForUser && target === 'user') continue;
            const authorization = auth.get(role);
            const res = await s.api(op.method, `${BASE[target]}${op.path}`, {
              ...(authorization ? { authorization } : {}),
              ...(op.body ? { body: op.body } : {}),
            });
            const where = `${role} ${op.method} ${BASE[target]}${op.path} → ${res.status} ${res.text}`;
            if (expected === 'pass') {
              assert.ok(passedGuards(res), where);
            } else if (expected === 'scope') {
              const level = op.method === 'GET' ? 'read' : 'write';
              assert.equal(res.status, 403, where);
              assert.deepEqual(
                res.json,
                {
                  message: `token does not have at least one of required scope(s): [${level}:${CATEGORY[target]}]`,
                  url: `${s.rootUrl}api/swagger`,
                },
                where,
              );
            } else if (expected.message === undefined) {
              assert.equal(res.status, expected.status, where);
              assert.deepEqual(
                res.json,
                { message: "The target couldn't be found.", url: `${s.rootUrl}api/swagger`, errors: [] },
                where,
              );
            } else {
              assert.equal(res.status, expected.status, where);
              assert.deepEqual(res.json, { message: expected.message, url: `${s.rootUrl}api/swagger` }, where);
            }
          }
        }
      });
    }

    test('every role that passes can do the whole cycle through the forgejo-ts client', async () => {
      const apis: Record<Target, ScopeApi> = {
        user: userApi(),
        org: orgApi('acme'),
        userRepoPublic: repoApi('olivia', 'pub'),
        userRepoPrivate: repoApi('olivia', 'priv'),
        orgRepoPublic: repoApi('acme', 'app'),
        orgRepoPrivate: repoApi('acme', 'hidden'),
        actionsDisabled: repoApi('olivia', 'noact'),
      };
      for (const role of Object.keys(MATRIX) as Role[]) {
        for (const target of Object.keys(BASE) as Target[]) {
          if (MATRIX[role][target] !== 'pass') continue;
          const client = s.clientWith(auth.get(role) as string);
          const api = apis[target];
          const name = `CYCLE_${role.toUpperCase()}`;
          const where = `${role} at ${target}`;
          assert.equal((await api.putSecret(client, name, 'v1')).status, 201, where);
          assert.equal((await api.putSecret(client, name, 'v2')).status, 204, where);
          if (api.listSecrets)
            assert.ok(
              ((await api.listSecrets(client, { limit: 50 })).data as { name: string }[]).some((x) => x.name === name),
              where,
            );
          assert.equal((await api.deleteSecret(client, name)).status, 204, where);
          assert.equal((await api.createVariable(client, name, 'v1')).status, 204, where);
          assert.equal(((await api.getVariable(client, name)).data as { data: string }).data, 'v1', where);
          assert.equal((await api.updateVariable(client, name, { value: 'v2' })).status, 204, where);
          assert.ok(
            ((await api.listVariables(client, { limit: 50 })).data as { name: string }[]).some((x) => x.name === name),
            where,
          );
          assert.equal((await api.deleteVariable(client, name)).status, 204, where);
        }
      }
    });

    test('the user scope is each user’s own', async () => {
      const nina = s.clientWith(auth.get('nonMember') as string);
      const mike = s.clientWith(auth.get('orgMember') as string);
      assert.equal((await userApi().createVariable(nina, 'MINE', 'nina')).status, 204);
      assert.equal((await userApi().createVariable(mike, 'MINE', 'mike')).status, 204, 'same name, other user');
      assert.equal(((await userApi().getVariable(nina, 'MINE')).data as { data: string }).data, 'nina');
      assert.equal(((await userApi().getVariable(mike, 'MINE')).data as { data: string }).data, 'mike');
      assert.equal((await userApi().deleteVariable(mike, 'MINE')).status, 204);
      assert.equal((await userApi().getVariable(nina, 'MINE')).status, 200);
    });

    test('guard order: scope before lookup, guards before the body, read scope does not write', async () => {
      const noScope = auth.get('tokenWithoutScope') as string;
      assert.equal(
        (await s.api('GET', '/orgs/no-such-org/actions/variables', { authorization: noScope })).status,
        403,
        'scope is checked first',
      );
      const missing = await s.api('GET', '/orgs/no-such-org/actions/variables');
      assert.deepEqual(missing.json, {
        message: 'GetOrgByName',
        url: `${s.rootUrl}api/swagger`,
        errors: ['org does not exist [id: 0, name: no-such-org]'],
      });
      const missingOwner = await s.api('GET', '/repos/nobody-here/x/actions/secrets', {
        authorization: auth.get('repoOwner') as string,
      });
      assert.equal(missingOwner.status, 404);
      // A refused caller learns nothing about the body: 403/401, not 422.
      assert.equal(
        (
          await s.api('PUT', '/orgs/acme/actions/secrets/X', {
            authorization: auth.get('nonMember') as string,
            body: {},
          })
        ).status,
        403,
      );
      assert.equal((await s.api('POST', '/repos/acme/app/actions/variables/X', { body: {} })).status, 401);
      const readOnly = `token ${await s.tokenFor(users.get('olivia')!, ['read:user', 'read:organization', 'read:repository'])}`;
      assert.equal((await s.api('GET', '/orgs/acme/actions/secrets', { authorization: readOnly })).status, 200);
      assert.equal((await s.api('GET', '/user/actions/variables', { authorization: readOnly })).status, 200);
      const write = await s.api('PUT', '/repos/olivia/pub/actions/secrets/X', {
        authorization: readOnly,
        body: { data: 'v' },
      });
      assert.deepEqual(write.json, {
        message: 'token does not have at least one of required scope(s): [write:repository]',
        url: `${s.rootUrl}api/swagger`,
      });
    });

    test('public-only tokens reach public orgs and repositories only; they lose site-admin powers', async () => {
      const olivia = users.get('olivia')!;
      const publicOnly = `token ${await s.tokenFor(olivia, ['public-only', 'write:organization', 'write:repository', 'write:user'])}`;
      const org = await s.api('GET', '/orgs/hush/actions/variables', { authorization: publicOnly });
      assert.deepEqual(
        [org.status, (org.json as { message: string }).message],
        [403, 'token scope is limited to public orgs'],
      );
      const repo = await s.api('GET', '/repos/olivia/priv/actions/variables', { authorization: publicOnly });
      assert.deepEqual(
        [repo.status, (repo.json as { message: string }).message],
        [403, 'token scope is limited to public repos'],
      );
      assert.equal((await s.api('GET', '/orgs/acme/actions/variables', { authorization: publicOnly })).status, 200);
      const adminPublic = `token ${await s.tokenFor(s.admin, ['public-only', 'write:organization'])}`;
      const asAdmin = await s.api('GET', '/orgs/acme/actions/variables', { authorization: adminPublic });
      assert.deepEqual(
        [asAdmin.status, (asAdmin.json as { message: string }).message],
        [403, 'Must be an organization owner'],
      );
    });
  });
}
