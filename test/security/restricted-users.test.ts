// A restricted user (admin API `restricted: true`, or `gantry admin user
// create --restricted`) sees only what they belong to, as in Forgejo
// (models/organization/org.go HasOrgOrUserVisible, models/perm/access/
// repo_permission.go): organizations they are a member of, repositories they
// collaborate on or a team grants them. Public repositories of others and
// public or limited organizations do not exist for them, in the API, in the
// Actions runs lists and in git, while an ordinary user sees them all.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  createCurrentUserRepo,
  createOrgRepo,
  orgAddTeamMember,
  orgCreate,
  orgCreateTeam,
  repoAddCollaborator,
} from '@llamaduck/forgejo-ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createUserAs, gitInfoRefs } from '../support/security.ts';

for (const dialect of testDialects()) {
  describe(`restricted users see only what they belong to [${dialect}]`, () => {
    let s: TestServer;
    let olivia: TestUser;
    let nina: TestUser;
    let rita: TestUser;

    before(async () => {
      s = await startTestServer(dialect);
      olivia = await s.createUser('olivia');
      nina = await s.createUser('nina');
      rita = await createUserAs(s, 'rita', { restricted: true });
      const c = olivia.client;
      for (const [name, priv] of [
        ['pub', false],
        ['priv', true],
        ['shared', false],
      ] as const) {
        assert.equal(
          (await createCurrentUserRepo({ client: c, body: { name, private: priv, auto_init: true } })).status,
          201,
        );
      }
      assert.equal(
        (
          await repoAddCollaborator({
            client: c,
            path: { owner: 'olivia', repo: 'shared', collaborator: 'rita' },
            body: { permission: 'read' },
          })
        ).status,
        204,
      );
      for (const [org, visibility] of [
        ['openco', 'public'],
        ['limco', 'limited'],
        ['teamco', 'public'],
      ] as const) {
        assert.equal((await orgCreate({ client: c, body: { username: org, visibility } })).status, 201);
        assert.equal(
          (await createOrgRepo({ client: c, path: { org }, body: { name: 'app', private: false, auto_init: true } }))
            .status,
          201,
        );
      }
      assert.equal(
        (
          await createOrgRepo({
            client: c,
            path: { org: 'teamco' },
            body: { name: 'inner', private: true, auto_init: true },
          })
        ).status,
        201,
      );
      const team = await orgCreateTeam({
        client: c,
        path: { org: 'teamco' },
        body: {
          name: 'crew',
          permission: 'read',
          includes_all_repositories: true,
          units: ['repo.code', 'repo.actions'],
        },
      });
      assert.equal(team.status, 201);
      assert.equal((await orgAddTeamMember({ client: c, path: { id: team.data!.id!, username: 'rita' } })).status, 204);
    });
    after(async () => {
      await s.stop();
    });

    const status = async (who: TestUser, path: string) => (await s.api('GET', path, { token: who.token })).status;

    test('organizations: public and limited ones they are not a member of are 404; their own answer 200', async () => {
      for (const org of ['openco', 'limco', 'teamco'])
        assert.equal(await status(nina, `/orgs/${org}`), 200, `nina ${org}`);
      assert.equal(await status(rita, '/orgs/openco'), 404);
      assert.equal(await status(rita, '/orgs/limco'), 404);
      assert.equal(await status(rita, '/orgs/teamco'), 200);
      // Not seeing an organization is the same as it not existing.
      const hidden = await s.api('GET', '/orgs/openco', { token: rita.token });
      const missing = await s.api('GET', '/orgs/nosuchorg', { token: rita.token });
      assert.equal(hidden.text, missing.text.replace('nosuchorg', 'openco'));
    });

    test('repositories: public ones of others are 404 (API and Actions runs); collaborations and team grants work', async () => {
      for (const path of [
        '/repos/olivia/pub',
        '/repos/openco/app',
        '/repos/limco/app',
        '/repos/olivia/pub/actions/runs',
        '/repos/openco/app/actions/runs',
        '/repos/olivia/pub/actions/tasks',
      ]) {
        assert.equal(await status(nina, path), 200, `nina ${path}`);
        assert.equal(await status(rita, path), 404, `rita ${path}`);
      }
      for (const path of [
        '/repos/olivia/shared',
        '/repos/olivia/shared/actions/runs',
        '/repos/teamco/inner',
        '/repos/teamco/inner/actions/runs',
      ]) {
        assert.equal(await status(rita, path), 200, `rita ${path}`);
      }
      // The team covers all of teamco's repositories.
      assert.equal(await status(rita, '/repos/teamco/app'), 200);
      assert.equal(await status(rita, '/repos/olivia/priv'), 404);
    });

    test('git: cloning a public repository of someone else is refused as if it did not exist; collaborations clone', async () => {
      const missing = await gitInfoRefs(s, 'olivia', 'nosuchrepo', 'git-upload-pack', rita);
      for (const [owner, repo] of [
        ['olivia', 'pub'],
        ['openco', 'app'],
      ] as const) {
        assert.equal((await gitInfoRefs(s, owner, repo, 'git-upload-pack', nina)).status, 200, `nina ${owner}/${repo}`);
        const refused = await gitInfoRefs(s, owner, repo, 'git-upload-pack', rita);
        assert.equal(refused.status, 404, `rita ${owner}/${repo}`);
        assert.equal(refused.text, missing.text.replace('olivia/nosuchrepo', `${owner}/${repo}`));
      }
      assert.equal((await gitInfoRefs(s, 'olivia', 'shared', 'git-upload-pack', rita)).status, 200);
      assert.equal((await gitInfoRefs(s, 'teamco', 'inner', 'git-upload-pack', rita)).status, 200);
      // Read access only: pushing is refused with git's 403.
      assert.equal((await gitInfoRefs(s, 'olivia', 'shared', 'git-receive-pack', rita)).status, 403);
    });
  });
}
