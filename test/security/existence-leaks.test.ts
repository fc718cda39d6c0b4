// Nobody can tell a private account or repository from a missing one: whoever
// may not see an organization, a user or a repository gets exactly the answer
// a missing one gives (same status, same body, same content type), on every
// route family: organization routes, user routes, repository routes and git.
// Public ones keep Forgejo's 401/403 answers.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCurrentUserRepo, createOrgRepo, orgCreate } from '@llamaduck/forgejo-ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createUserAs, gitInfoRefs } from '../support/security.ts';

interface Route {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** `{}` is replaced by the account or repository name. */
  path: string;
  body?: unknown;
}

const ORG_ROUTES: Route[] = [
  { method: 'GET', path: '/orgs/{}' },
  { method: 'DELETE', path: '/orgs/{}' },
  { method: 'POST', path: '/orgs/{}/repos', body: { name: 'probe' } },
  { method: 'POST', path: '/orgs/{}/teams', body: { name: 'probe', permission: 'read', units: ['repo.code'] } },
  { method: 'GET', path: '/orgs/{}/actions/secrets' },
  { method: 'GET', path: '/orgs/{}/actions/variables' },
  { method: 'GET', path: '/orgs/{}/actions/runners' },
  { method: 'GET', path: '/orgs/{}/actions/runners/registration-token' },
  { method: 'GET', path: '/orgs/{}/hooks' },
];
const USER_ROUTES: Route[] = [{ method: 'GET', path: '/users/{}/tokens' }];
const REPO_ROUTES: Route[] = [
  { method: 'GET', path: '/repos/{}' },
  { method: 'PATCH', path: '/repos/{}', body: { description: 'probe' } },
  { method: 'DELETE', path: '/repos/{}' },
  { method: 'GET', path: '/repos/{}/actions/runs' },
  { method: 'GET', path: '/repos/{}/actions/tasks' },
  { method: 'GET', path: '/repos/{}/actions/secrets' },
  { method: 'GET', path: '/repos/{}/actions/variables' },
  // The hidden repositories hold this variable: its guard reads it with the repository.
  { method: 'GET', path: '/repos/{}/actions/variables/PROBE' },
  { method: 'GET', path: '/repos/{}/actions/runners' },
];

/** `text` with each path segment of `from` that differs from `to` replaced by `to`'s ('nosuchowner/app' → 'privco/app'). */
function renamed(text: string, from: string, to: string): string {
  const toSegments = to.split('/');
  return from
    .split('/')
    .reduce(
      (out, segment, i) => (segment === toSegments[i] ? out : out.split(segment).join(toSegments[i] ?? '')),
      text,
    );
}

interface Seen {
  status: number;
  contentType: string;
  text: string;
}

for (const dialect of testDialects()) {
  describe(`a hidden account or repository answers as a missing one [${dialect}]`, () => {
    let s: TestServer;
    let olivia: TestUser;
    let nina: TestUser;
    let paula: TestUser;

    before(async () => {
      s = await startTestServer(dialect);
      olivia = await s.createUser('olivia');
      nina = await s.createUser('nina');
      paula = await createUserAs(s, 'paula', { visibility: 'private' });
      for (const [org, visibility] of [
        ['pubco', 'public'],
        ['limco', 'limited'],
        ['privco', 'private'],
      ] as const) {
        assert.equal((await orgCreate({ client: olivia.client, body: { username: org, visibility } })).status, 201);
        assert.equal(
          (
            await createOrgRepo({
              client: olivia.client,
              path: { org },
              body: { name: 'app', private: false, auto_init: true },
            })
          ).status,
          201,
        );
      }
      assert.equal(
        (
          await createCurrentUserRepo({
            client: olivia.client,
            body: { name: 'secret', private: true, auto_init: true },
          })
        ).status,
        201,
      );
      assert.equal(
        (await createCurrentUserRepo({ client: paula.client, body: { name: 'tool', private: false, auto_init: true } }))
          .status,
        201,
      );
      for (const repo of ['privco/app', 'limco/app', 'olivia/secret', 'paula/tool']) {
        const who = repo.startsWith('paula/') ? paula : olivia;
        const res = await s.api('POST', `/repos/${repo}/actions/variables/PROBE`, {
          token: who.token,
          body: { value: 'probe' },
        });
        assert.equal(res.status, 204, `${repo}: ${res.text}`);
      }
    });
    after(async () => {
      await s.stop();
    });

    const call = async (route: Route, name: string, who: TestUser | null): Promise<Seen> => {
      const res = await s.api(route.method, route.path.replace('{}', name), {
        ...(who ? { token: who.token } : {}),
        ...(route.body ? { body: route.body } : {}),
      });
      return { status: res.status, contentType: res.headers.get('content-type') ?? '', text: res.text };
    };

    /** The hidden target's answer must be the missing one's, with only the name in it changed. */
    const assertSameAsMissing = async (routes: Route[], hidden: string, missing: string, who: TestUser | null) => {
      for (const route of routes) {
        const hiddenSeen = await call(route, hidden, who);
        const missingSeen = await call(route, missing, who);
        const where = `${who?.name ?? 'anonymous'} ${route.method} ${route.path}: ${hidden} → ${hiddenSeen.status} ${hiddenSeen.text} / ${missing} → ${missingSeen.status} ${missingSeen.text}`;
        assert.equal(hiddenSeen.status, 404, where);
        assert.deepEqual(hiddenSeen, { ...missingSeen, text: renamed(missingSeen.text, missing, hidden) }, where);
      }
    };

    test('organization routes: a private organization (and a limited one, anonymously) answers as a missing one', async () => {
      for (const who of [null, nina]) await assertSameAsMissing(ORG_ROUTES, 'privco', 'nosuchorg', who);
      await assertSameAsMissing(ORG_ROUTES, 'limco', 'nosuchorg', null);
      const missing = await s.api('GET', '/orgs/nosuchorg/actions/secrets', { token: nina.token });
      assert.deepEqual(missing.json, {
        message: 'GetOrgByName',
        url: `${s.rootUrl}api/swagger`,
        errors: ['org does not exist [id: 0, name: nosuchorg]'],
      });
    });

    test('user routes: a private user answers as a missing one', async () => {
      for (const who of [null, nina]) await assertSameAsMissing(USER_ROUTES, 'paula', 'nosuchuser', who);
    });

    test('repository routes: repositories of a hidden owner answer as a missing owner, a private repository as a missing repository', async () => {
      for (const who of [null, nina]) {
        await assertSameAsMissing(REPO_ROUTES, 'privco/app', 'nosuchowner/app', who);
        await assertSameAsMissing(REPO_ROUTES, 'paula/tool', 'nosuchowner/tool', who);
        await assertSameAsMissing(REPO_ROUTES, 'privco/nothing', 'nosuchowner/nothing', who);
        await assertSameAsMissing(REPO_ROUTES, 'olivia/secret', 'olivia/nosuchrepo', who);
      }
      await assertSameAsMissing(REPO_ROUTES, 'limco/app', 'nosuchowner/app', null);
    });

    test('git: a hidden repository answers as a missing one (401 challenge anonymously, 404 signed in)', async () => {
      for (const who of [null, nina]) {
        for (const service of ['git-upload-pack', 'git-receive-pack'] as const) {
          for (const [hidden, missing] of [
            ['privco/app', 'nosuchowner/app'],
            ['paula/tool', 'nosuchowner/tool'],
            ['olivia/secret', 'olivia/nosuchrepo'],
          ] as const) {
            const [ho, hr] = hidden.split('/') as [string, string];
            const [mo, mr] = missing.split('/') as [string, string];
            const hiddenSeen = await gitInfoRefs(s, ho, hr, service, who);
            const missingSeen = await gitInfoRefs(s, mo, mr, service, who);
            const where = `${who?.name ?? 'anonymous'} ${service} ${hidden}`;
            assert.equal(hiddenSeen.status, who ? 404 : 401, where);
            assert.deepEqual(hiddenSeen, { ...missingSeen, text: renamed(missingSeen.text, missing, hidden) }, where);
          }
        }
      }
    });

    test('what the caller may see keeps Forgejo 401/403 answers; members and admins reach everything', async () => {
      const expectAnswer = async (path: string, who: TestUser | null, status: number, message: string) => {
        const res = await s.api('GET', path, who ? { token: who.token } : {});
        assert.equal(res.status, status, `${path}: ${res.text}`);
        assert.deepEqual(res.json, { message, url: `${s.rootUrl}api/swagger` });
      };
      await expectAnswer('/orgs/pubco/actions/secrets', null, 401, 'token is required');
      await expectAnswer('/orgs/pubco/actions/secrets', nina, 403, 'Must be an organization owner');
      await expectAnswer('/orgs/limco/actions/secrets', nina, 403, 'Must be an organization owner');
      await expectAnswer('/repos/pubco/app/actions/secrets', null, 401, 'token is required');
      await expectAnswer('/repos/pubco/app/actions/secrets', nina, 403, 'user should be the owner of the repo');
      await expectAnswer('/repos/limco/app/actions/variables/PROBE', nina, 403, 'user should be the owner of the repo');
      await expectAnswer(
        '/users/olivia/tokens',
        nina,
        403,
        'doer should be the site admin or be same as the contextUser',
      );
      for (const who of [olivia, s.admin]) {
        for (const path of [
          '/orgs/privco',
          '/orgs/privco/actions/secrets',
          '/repos/privco/app',
          '/repos/privco/app/actions/secrets',
          '/repos/privco/app/actions/variables/probe',
          '/repos/olivia/secret',
        ]) {
          assert.equal((await s.api('GET', path, { token: who.token })).status, 200, `${who.name} ${path}`);
        }
      }
      assert.equal((await gitInfoRefs(s, 'privco', 'app', 'git-upload-pack', olivia)).status, 200);
      assert.equal((await gitInfoRefs(s, 'pubco', 'app', 'git-upload-pack', null)).status, 200);
    });
  });
}
