// Organizations, teams, repositories and collaborators, with the guards of
// Forgejo's routers/api/v1/api.go guards (who gets 401, 403 or 404).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  createCurrentUserRepo,
  createOrgRepo,
  orgAddTeamMember,
  orgCreate,
  orgCreateTeam,
  orgDelete,
  orgGet,
  orgRemoveTeamMember,
  repoAddCollaborator,
  repoDelete,
  repoDeleteCollaborator,
  repoEdit,
  repoGet,
} from '@llamaduck/forgejo-ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { git } from '../support/git.ts';

function messageOf(res: { json: unknown }): string {
  return (res.json as { message: string }).message;
}

for (const dialect of testDialects()) {
  describe(`organizations, teams, repositories [${dialect}]`, () => {
    let s: TestServer;
    let owner: TestUser;
    let member: TestUser;
    let outsider: TestUser;
    let teamId = 0;

    before(async () => {
      s = await startTestServer(dialect);
      owner = await s.createUser('olivia');
      member = await s.createUser('mike');
      outsider = await s.createUser('oscar');
    });
    after(async () => {
      await s.stop();
    });

    test('creating an organization makes the creator an owner', async () => {
      const created = await orgCreate({
        client: owner.client,
        body: { username: 'acme', full_name: 'Acme Inc', visibility: 'public' },
      });
      assert.equal(created.status, 201);
      assert.equal(created.data?.name, 'acme');
      assert.equal(created.data?.username, 'acme');
      assert.equal(created.data?.visibility, 'public');
      const team = await orgCreateTeam({
        client: owner.client,
        path: { org: 'acme' },
        body: { name: 'devs', permission: 'write', includes_all_repositories: true },
      });
      assert.equal(team.status, 201, 'only an owner can create teams');
      assert.equal(team.data?.permission, 'write');
      assert.equal(team.data?.organization?.name, 'acme');
      teamId = team.data?.id ?? 0;
      const fetched = await orgGet({ client: s.anonymous, path: { org: 'acme' } });
      assert.equal(fetched.status, 200);
      assert.equal(fetched.data?.full_name, 'Acme Inc');
    });

    test('organization names are validated like user names', async () => {
      const taken = await s.api('POST', '/orgs', { token: owner.token, body: { username: 'ACME' } });
      assert.equal(taken.status, 422);
      assert.equal(messageOf(taken), 'user already exists [name: ACME]');
      const reserved = await s.api('POST', '/orgs', { token: owner.token, body: { username: 'api' } });
      assert.equal(reserved.status, 422);
      assert.equal(messageOf(reserved), 'name is reserved [name: api]');
      const invalid = await s.api('POST', '/orgs', { token: owner.token, body: { username: '-bad-' } });
      assert.equal(invalid.status, 422);
      const anonymous = await s.api('POST', '/orgs', { body: { username: 'anon-org' } });
      assert.equal(anonymous.status, 401);
    });

    test('org guard chain: missing org 404 (GetOrgByName), anonymous 401, member 403, owner passes', async () => {
      const missing = await s.api('DELETE', '/orgs/no-such-org', { token: owner.token });
      assert.equal(missing.status, 404);
      assert.deepEqual(missing.json, {
        message: 'GetOrgByName',
        url: `${s.rootUrl}api/swagger`,
        errors: ['org does not exist [id: 0, name: no-such-org]'],
      });
      assert.equal((await s.api('POST', '/orgs/acme/teams', { body: { name: 'x' } })).status, 401);
      const added = await orgAddTeamMember({ client: owner.client, path: { id: teamId, username: 'mike' } });
      assert.equal(added.status, 204);
      const asMember = await s.api('POST', '/orgs/acme/teams', { token: member.token, body: { name: 'x' } });
      assert.equal(asMember.status, 403);
      assert.equal(messageOf(asMember), 'Must be an organization owner');
      // Guards run before validation: a member's invalid body is still a 403.
      assert.equal((await s.api('POST', '/orgs/acme/teams', { token: member.token, body: {} })).status, 403);
      const asAdmin = await s.api('POST', '/orgs/acme/teams', {
        token: s.admin.token,
        body: { name: 'ops', permission: 'admin', includes_all_repositories: true },
      });
      assert.equal(asAdmin.status, 201, 'site admins pass reqOrgOwnership');
      const dup = await s.api('POST', '/orgs/acme/teams', { token: owner.token, body: { name: 'OPS' } });
      assert.equal(dup.status, 422);
      const noName = await s.api('POST', '/orgs/acme/teams', { token: owner.token, body: {} });
      assert.equal(noName.status, 422);
      assert.equal(messageOf(noName), '[Name]: Required');
    });

    test('team members: only owners manage them (404 otherwise); the last owner cannot leave', async () => {
      assert.equal((await s.api('PUT', `/teams/${teamId}/members/oscar`, { token: member.token })).status, 404);
      assert.equal((await s.api('PUT', `/teams/999999/members/oscar`, { token: owner.token })).status, 404);
      assert.equal((await s.api('PUT', `/teams/${teamId}/members/nobody-here`, { token: owner.token })).status, 404);
      const ownersTeam = await s.server.deps.database.db
        .selectFrom('team')
        .select('id')
        .where('name', '=', 'Owners')
        .executeTakeFirstOrThrow();
      const last = await orgRemoveTeamMember({ client: owner.client, path: { id: ownersTeam.id, username: 'olivia' } });
      assert.equal(last.status, 409);
      assert.equal(
        (await orgAddTeamMember({ client: owner.client, path: { id: teamId, username: 'oscar' } })).status,
        204,
      );
      assert.equal(
        (await orgRemoveTeamMember({ client: owner.client, path: { id: teamId, username: 'oscar' } })).status,
        204,
      );
    });

    test('a private organization is invisible to outsiders', async () => {
      assert.equal(
        (await orgCreate({ client: owner.client, body: { username: 'secretco', visibility: 'private' } })).status,
        201,
      );
      assert.equal((await s.api('GET', '/orgs/secretco', { token: outsider.token })).status, 404);
      assert.equal((await s.api('GET', '/orgs/secretco')).status, 404);
      assert.equal((await s.api('GET', '/orgs/secretco', { token: owner.token })).status, 200);
      assert.equal((await s.api('GET', '/orgs/secretco', { token: s.admin.token })).status, 200);
    });

    test('auto_init creates a real bare repository with README on the chosen default branch', async () => {
      const created = await createCurrentUserRepo({
        client: owner.client,
        body: { name: 'tools', description: 'Build tools', auto_init: true, default_branch: 'trunk', private: false },
      });
      assert.equal(created.status, 201);
      const repo = created.data!;
      assert.equal(repo.full_name, 'olivia/tools');
      assert.equal(repo.default_branch, 'trunk');
      assert.equal(repo.empty, false);
      assert.equal(repo.has_actions, true);
      assert.deepEqual(repo.permissions, { admin: true, push: true, pull: true });
      assert.equal(repo.clone_url, `${s.rootUrl}olivia/tools.git`);
      assert.equal(repo.html_url, `${s.rootUrl}olivia/tools`);
      assert.equal(repo.owner?.login, 'olivia');

      const bare = path.join(s.dataDir, 'git', 'repositories', 'olivia', 'tools.git');
      assert.ok(existsSync(bare));
      const clone = await mkdtemp(path.join(os.tmpdir(), 'gantry-clone-'));
      try {
        await git(['clone', '--quiet', bare, clone]);
        assert.equal((await git(['rev-parse', '--abbrev-ref', 'HEAD'], clone)).trim(), 'trunk');
        assert.equal(await readFile(path.join(clone, 'README.md'), 'utf8'), '# tools\n\nBuild tools\n');
        assert.equal(
          (await git(['log', '--format=%an <%ae>|%s'], clone)).trim(),
          'olivia <olivia@example.com>|Initial commit',
        );
      } finally {
        await rm(clone, { recursive: true, force: true });
      }

      const empty = await createCurrentUserRepo({ client: owner.client, body: { name: 'blank' } });
      assert.equal(empty.data?.empty, true);
      assert.equal(empty.data?.default_branch, 'main');
    });

    test('repository creation validation', async () => {
      const dup = await s.api('POST', '/user/repos', { token: owner.token, body: { name: 'TOOLS' } });
      assert.equal(dup.status, 409);
      assert.equal(messageOf(dup), 'The repository with the same name already exists.');
      assert.equal(
        messageOf(await s.api('POST', '/user/repos', { token: owner.token, body: { name: 'x.git' } })),
        'name pattern is not allowed [pattern: *.git]',
      );
      assert.equal(
        messageOf(await s.api('POST', '/user/repos', { token: owner.token, body: { name: 'a/b' } })),
        '[Name]: AlphaDashDot',
      );
      assert.equal(messageOf(await s.api('POST', '/user/repos', { token: owner.token, body: {} })), '[Name]: Required');
      assert.equal(
        (
          await s.api('POST', '/user/repos', {
            token: owner.token,
            body: { name: 'refs', default_branch: 'bad..name' },
          })
        ).status,
        422,
      );
      assert.equal((await s.api('POST', '/user/repos', { token: owner.token, body: { name: 123 } })).status, 422);
    });

    test('org repositories: owners and can_create_org_repo teams create them; others 403', async () => {
      const created = await createOrgRepo({
        client: owner.client,
        path: { org: 'acme' },
        body: { name: 'api', private: true, auto_init: true },
      });
      assert.equal(created.status, 201);
      assert.equal(created.data?.private, true);
      const byMember = await s.api('POST', '/orgs/acme/repos', { token: member.token, body: { name: 'nope' } });
      assert.equal(byMember.status, 403);
      assert.equal(messageOf(byMember), 'User is not allowed to create repositories in this organization.');
    });

    test('repository visibility and permissions follow teams and collaborators', async () => {
      // mike is in the write team `devs` (all repositories): he reads and pushes, is not admin.
      const asMember = await repoGet({ client: member.client, path: { owner: 'acme', repo: 'api' } });
      assert.equal(asMember.status, 200);
      assert.deepEqual(asMember.data?.permissions, { admin: false, push: true, pull: true });
      // A private repository does not exist for outsiders or anonymous callers.
      for (const token of [outsider.token, undefined]) {
        const res = await s.api('GET', '/repos/acme/api', token ? { token } : {});
        assert.equal(res.status, 404);
        assert.deepEqual(res.json, {
          message: "The target couldn't be found.",
          url: `${s.rootUrl}api/swagger`,
          errors: [],
        });
      }
      const missingOwner = await s.api('GET', '/repos/nobody-at-all/x');
      assert.deepEqual(missingOwner.json, {
        message: 'GetUserByName',
        url: `${s.rootUrl}api/swagger`,
        errors: ['user does not exist [uid: 0, name: nobody-at-all]'],
      });
      // Public repositories are readable anonymously, with read permission.
      const pub = await s.api('GET', '/repos/olivia/tools');
      assert.equal(pub.status, 200);
      assert.deepEqual((pub.json as { permissions: unknown }).permissions, { admin: false, push: false, pull: true });

      // A collaborator with read access sees the private repository but cannot edit it.
      assert.equal(
        (
          await repoAddCollaborator({
            client: owner.client,
            path: { owner: 'acme', repo: 'api', collaborator: 'oscar' },
            body: { permission: 'read' },
          })
        ).status,
        204,
      );
      assert.deepEqual(
        (await repoGet({ client: outsider.client, path: { owner: 'acme', repo: 'api' } })).data?.permissions,
        { admin: false, push: false, pull: true },
      );
      const edit = await s.api('PATCH', '/repos/acme/api', { token: outsider.token, body: { description: 'x' } });
      assert.equal(edit.status, 403);
      assert.equal(messageOf(edit), 'user should be an owner or a collaborator with admin write of a repository');
      // An admin collaborator may edit but is not the repository owner: delete is refused.
      await repoAddCollaborator({
        client: owner.client,
        path: { owner: 'acme', repo: 'api', collaborator: 'oscar' },
        body: { permission: 'admin' },
      });
      assert.equal(
        (await s.api('PATCH', '/repos/acme/api', { token: outsider.token, body: { description: 'edited' } })).status,
        200,
      );
      const del = await s.api('DELETE', '/repos/acme/api', { token: outsider.token });
      assert.equal(del.status, 403);
      assert.equal(messageOf(del), 'user should be the owner of the repo');
      assert.equal(
        (
          await repoDeleteCollaborator({
            client: owner.client,
            path: { owner: 'acme', repo: 'api', collaborator: 'oscar' },
          })
        ).status,
        204,
      );
      assert.equal(
        (await s.api('GET', '/repos/acme/api', { token: outsider.token })).status,
        404,
        'removed collaborator loses access',
      );
      const unknown = await s.api('PUT', '/repos/acme/api/collaborators/nobody-x', {
        token: owner.token,
        body: { permission: 'read' },
      });
      assert.equal(unknown.status, 422);
    });

    test('PATCH: archived, has_actions, private, default_branch', async () => {
      await git([
        '--git-dir',
        path.join(s.dataDir, 'git', 'repositories', 'olivia', 'tools.git'),
        'branch',
        'release',
        'trunk',
      ]);
      const edited = await repoEdit({
        client: owner.client,
        path: { owner: 'olivia', repo: 'tools' },
        body: { archived: true, has_actions: false, private: true, default_branch: 'release' },
      });
      assert.equal(edited.status, 200);
      assert.equal(edited.data?.archived, true);
      assert.equal(edited.data?.has_actions, false);
      assert.equal(edited.data?.private, true);
      assert.equal(edited.data?.default_branch, 'release');
      assert.notEqual(edited.data?.archived_at, '1970-01-01T00:00:00Z');
      const head = await git([
        '--git-dir',
        path.join(s.dataDir, 'git', 'repositories', 'olivia', 'tools.git'),
        'symbolic-ref',
        'HEAD',
      ]);
      assert.equal(head.trim(), 'refs/heads/release');
      // A branch that does not exist is not taken as default (Forgejo ignores it).
      const ignored = await repoEdit({
        client: owner.client,
        path: { owner: 'olivia', repo: 'tools' },
        body: { default_branch: 'no-such-branch' },
      });
      assert.equal(ignored.data?.default_branch, 'release');
      assert.equal((await s.api('GET', '/repos/olivia/tools')).status, 404, 'now private');
      const back = await repoEdit({
        client: owner.client,
        path: { owner: 'olivia', repo: 'tools' },
        body: { archived: false, private: false, has_actions: true },
      });
      assert.equal(back.data?.archived, false);
      assert.equal(back.data?.archived_at, '1970-01-01T00:00:00Z');
    });

    test('delete: org repositories need an org owner; the bare repository is removed', async () => {
      const teamAdmin = await s.createUser('tina');
      const opsTeam = await s.server.deps.database.db
        .selectFrom('team')
        .select('id')
        .where('name', '=', 'ops')
        .executeTakeFirstOrThrow();
      await orgAddTeamMember({ client: owner.client, path: { id: opsTeam.id, username: 'tina' } });
      const notOrgOwner = await s.api('DELETE', '/repos/acme/api', { token: teamAdmin.token });
      assert.equal(notOrgOwner.status, 403);
      assert.equal(messageOf(notOrgOwner), 'Given user is not owner of organization.');
      const blocked = await orgDelete({ client: owner.client, path: { org: 'acme' } });
      assert.equal(blocked.status, 409, 'an organization with repositories is not deleted');
      const bare = path.join(s.dataDir, 'git', 'repositories', 'acme', 'api.git');
      assert.ok(existsSync(bare));
      assert.equal((await repoDelete({ client: owner.client, path: { owner: 'acme', repo: 'api' } })).status, 204);
      assert.ok(!existsSync(bare));
      assert.equal((await s.api('GET', '/repos/acme/api', { token: owner.token })).status, 404);
      assert.equal((await orgDelete({ client: owner.client, path: { org: 'acme' } })).status, 204);
      assert.equal((await s.api('GET', '/orgs/acme')).status, 404);
    });
  });
}
