// Team unit permissions (`units_map`, or `units` at the team's `permission`)
// decide what a team member may do unit by unit, as in Forgejo
// (models/perm/access/repo_permission.go): `repo.actions` governs the Actions
// routes (runs, tasks, dispatches), `repo.code` governs git, and a unit a
// team leaves out (or sets to none) grants nothing in a private repository.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createOrgRepo, orgAddTeamMember, orgCreate, orgCreateTeam } from '@llamaduck/forgejo-ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { gitInfoRefs } from '../support/security.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';

const WORKFLOW = `on: [workflow_dispatch]
jobs:
  build: { runs-on: docker, steps: [ { run: echo hello } ] }
`;

const CANNOT_READ = 'user should have specific read permission or be a repo admin or a site admin';
const CANNOT_WRITE = 'user should have a permission to write to a repo';

for (const dialect of testDialects()) {
  describe(`team unit permissions are enforced [${dialect}]`, () => {
    let s: TestServer;
    let olivia: TestUser;
    const members = new Map<string, TestUser>();
    const teamPermission = new Map<string, string | undefined>();

    before(async () => {
      s = await startTestServer(dialect);
      olivia = await s.createUser('olivia');
      const c = olivia.client;
      assert.equal((await orgCreate({ client: c, body: { username: 'unitco', visibility: 'public' } })).status, 201);
      assert.equal(
        (await createOrgRepo({ client: c, path: { org: 'unitco' }, body: { name: 'private-app', private: true } }))
          .status,
        201,
      );
      assert.equal(
        (
          await createOrgRepo({
            client: c,
            path: { org: 'unitco' },
            body: { name: 'public-app', private: false, auto_init: true },
          })
        ).status,
        201,
      );
      const work = await createWorkDir(
        remoteUrl(s.url, 'unitco', 'private-app', { user: 'olivia', password: olivia.token }),
      );
      try {
        await work.commit({ '.forgejo/workflows/ci.yml': WORKFLOW }, 'Add CI');
        const pushed = await work.push('main');
        assert.equal(pushed.code, 0, pushed.stderr);
      } finally {
        await work.remove();
      }
      const teams: [string, string, Record<string, unknown>][] = [
        ['coders', 'cody', { units_map: { 'repo.code': 'write', 'repo.actions': 'none' } }],
        ['watchers', 'wanda', { units_map: { 'repo.actions': 'read' } }],
        ['dispatchers', 'dora', { units_map: { 'repo.code': 'read', 'repo.actions': 'write' } }],
        ['nobody', 'nick', { units_map: { 'repo.code': 'none', 'repo.actions': 'none' } }],
        ['legacy', 'lee', { permission: 'write', units: ['repo.code'] }],
      ];
      for (const [team, member, body] of teams) {
        const user = await s.createUser(member);
        members.set(member, user);
        const created = await orgCreateTeam({
          client: c,
          path: { org: 'unitco' },
          body: { name: team, includes_all_repositories: true, ...body },
        });
        assert.equal(created.status, 201);
        teamPermission.set(team, created.data?.permission);
        assert.equal(
          (await orgAddTeamMember({ client: c, path: { id: created.data!.id!, username: member } })).status,
          204,
        );
      }
    });
    after(async () => {
      await s.stop();
    });

    const member = (name: string): TestUser => members.get(name)!;
    const get = (who: string, path: string) => s.api('GET', path, { token: member(who).token });
    const dispatch = (who: string) =>
      s.api('POST', '/repos/unitco/private-app/actions/workflows/ci.yml/dispatches', {
        token: member(who).token,
        body: { ref: 'main' },
      });
    const refusal = (message: string) => ({ message, url: `${s.rootUrl}api/swagger` });

    test('repo.actions none: the runs of a private repository are refused; code stays writable over git', async () => {
      for (const path of ['/repos/unitco/private-app/actions/runs', '/repos/unitco/private-app/actions/tasks']) {
        const res = await get('cody', path);
        assert.equal(res.status, 403, `${path}: ${res.text}`);
        assert.deepEqual(res.json, refusal(CANNOT_READ));
      }
      const dispatched = await dispatch('cody');
      assert.equal(dispatched.status, 403, dispatched.text);
      assert.deepEqual(dispatched.json, refusal(CANNOT_READ));
      assert.equal((await get('cody', '/repos/unitco/private-app')).status, 200);
      assert.equal((await gitInfoRefs(s, 'unitco', 'private-app', 'git-upload-pack', member('cody'))).status, 200);
      assert.equal((await gitInfoRefs(s, 'unitco', 'private-app', 'git-receive-pack', member('cody'))).status, 200);
      // A unit no team grants is readable in a public repository (Forgejo's default for non-restricted users).
      assert.equal((await get('cody', '/repos/unitco/public-app/actions/runs')).status, 200);
    });

    test('repo.actions read without repo.code: runs are listed, dispatching is refused, git does not find the repository', async () => {
      const runs = await get('wanda', '/repos/unitco/private-app/actions/runs');
      assert.equal(runs.status, 200, runs.text);
      const dispatched = await dispatch('wanda');
      assert.equal(dispatched.status, 403, dispatched.text);
      assert.deepEqual(dispatched.json, refusal(CANNOT_WRITE));
      const clone = await gitInfoRefs(s, 'unitco', 'private-app', 'git-upload-pack', member('wanda'));
      assert.equal(clone.status, 404);
      assert.equal(clone.text, 'Repository unitco/private-app not found\n');
    });

    test('repo.actions write on a read team: dispatching works; pushing code does not', async () => {
      assert.equal(teamPermission.get('dispatchers'), 'read');
      const dispatched = await dispatch('dora');
      assert.equal(dispatched.status, 204, dispatched.text);
      assert.equal((await gitInfoRefs(s, 'unitco', 'private-app', 'git-receive-pack', member('dora'))).status, 403);
      assert.equal((await gitInfoRefs(s, 'unitco', 'private-app', 'git-upload-pack', member('dora'))).status, 200);
    });

    test('a units_map of only none grants nothing (not admin): the private repository does not exist for its members', async () => {
      assert.equal(teamPermission.get('nobody'), 'none');
      for (const path of [
        '/repos/unitco/private-app',
        '/repos/unitco/private-app/actions/secrets',
        '/repos/unitco/private-app/actions/runs',
      ]) {
        assert.equal((await get('nick', path)).status, 404, path);
      }
      assert.equal((await gitInfoRefs(s, 'unitco', 'private-app', 'git-upload-pack', member('nick'))).status, 404);
    });

    test('units without repo.actions (at the team permission) leave Actions out', async () => {
      const res = await get('lee', '/repos/unitco/private-app/actions/runs');
      assert.equal(res.status, 403, res.text);
      assert.deepEqual(res.json, refusal(CANNOT_READ));
      assert.equal((await gitInfoRefs(s, 'unitco', 'private-app', 'git-receive-pack', member('lee'))).status, 200);
    });
  });
}
