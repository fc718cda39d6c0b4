// Repository webhooks (Forgejo: routers/api/v1/repo/hook.go, run-control §7):
// the same CRUD, validation, delivery engine, signatures, history and
// redelivery as organization hooks, through the forgejo-ts client where it
// has the call; the test delivery; a push to an organization's repository
// going to the repository's hooks first, then the organization's; and who
// may manage them (repository admins; 404 for a repository one cannot see).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  orgAddTeamMember,
  orgCreate,
  orgCreateTeam,
  repoCreateHook,
  repoDeleteHook,
  repoEditHook,
  repoGetHook,
  repoListHooks,
  repoTestHook,
} from '@llamaduck/forgejo-ts';
import type { Hook } from '@llamaduck/forgejo-ts';
import { errorBody } from '../support/actions.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { startWebhookReceiver, verifySignature } from '../support/webhook-receiver.ts';
import type { ReceivedDelivery, WebhookReceiver } from '../support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

const SECRET = 'repo-hook-s3cr3t-4e1d';
const HOOK_KEYS = [
  'id',
  'type',
  'branch_filter',
  'url',
  'config',
  'events',
  'authorization_header',
  'content_type',
  'metadata',
  'active',
  'updated_at',
  'created_at',
];

interface DeliverySummary {
  id: number;
  guid: string;
  event: string;
  state: string;
  redelivery: boolean;
}

interface PushPayload {
  ref: string;
  before: string;
  after: string;
  total_commits: number;
  commits: Array<{ id: string }>;
  head_commit: { id: string } | null;
  compare_url: string;
  repository: { full_name: string };
  pusher: { login: string };
  sender: { login: string };
}

for (const dialect of testDialects()) {
  describe(`repository webhooks [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let bob: TestUser;
    let carol: TestUser;
    let receiver: WebhookReceiver;
    let work: WorkDir;
    let headSha = '';
    const notFound = () => ({ ...errorBody(s.rootUrl, "The target couldn't be found."), errors: [] });
    const hooksOf = (path: string) => receiver.received.filter((d) => d.path === path);
    const create = (body: unknown, token = alice.token, repo = 'acme/app') =>
      s.api('POST', `/repos/${repo}/hooks`, { token, body });
    const basic = (path: string, extra: Record<string, unknown> = {}) => ({
      type: 'forgejo',
      config: { url: `${receiver.url}${path}`, content_type: 'json', secret: SECRET },
      events: ['push'],
      active: true,
      ...extra,
    });
    const deliveries = async (base: string, hookId: number): Promise<DeliverySummary[]> => {
      const res = await s.api('GET', `${base}/hooks/${hookId}/deliveries`, { token: alice.token });
      assert.equal(res.status, 200, res.text);
      return res.json as DeliverySummary[];
    };

    before(async () => {
      receiver = await startWebhookReceiver();
      s = await startTestServer(dialect, { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' });
      alice = await s.createUser('alice');
      bob = await s.createUser('bob');
      carol = await s.createUser('carol');
      assert.equal((await orgCreate({ client: alice.client, body: { username: 'acme' } })).status, 201);
      // bob may push to every acme repository, but is no repository admin.
      const team = await orgCreateTeam({
        client: alice.client,
        path: { org: 'acme' },
        body: { name: 'devs', permission: 'write', includes_all_repositories: true },
      });
      assert.equal(
        (await orgAddTeamMember({ client: alice.client, path: { id: team.data!.id!, username: 'bob' } })).status,
        204,
      );
      assert.equal(
        (await s.api('POST', '/orgs/acme/repos', { token: alice.token, body: { name: 'app', private: true } })).status,
        201,
      );
      assert.equal(
        (await s.api('POST', '/orgs/acme/repos', { token: alice.token, body: { name: 'other' } })).status,
        201,
      );
      work = await createWorkDir(remoteUrl(s.url, 'acme', 'app', { user: 'alice', password: alice.token }));
      headSha = await work.commit({ 'README.md': '# app\n' }, 'First commit');
      assert.equal((await work.push('main')).code, 0);
    });

    after(async () => {
      await work?.remove();
      await s?.stop();
      await receiver?.close();
    });

    test('CRUD through the client: 201 with owner-less Hook JSON, get, list with X-Total-Count, edit as Forgejo, delete', async () => {
      const created = await repoCreateHook({
        client: alice.client,
        path: { owner: 'acme', repo: 'app' },
        body: {
          type: 'gitea',
          config: { url: 'https://ci.example.com/hook', content_type: 'form', secret: SECRET },
          events: ['push', 'create'],
          branch_filter: 'main',
          active: true,
        },
      });
      assert.equal(created.status, 201);
      const hook = created.data as Hook;
      assert.deepEqual(Object.keys(hook), HOOK_KEYS, "Forgejo's field order");
      assert.deepEqual(hook.config, { content_type: 'form', url: 'https://ci.example.com/hook' });
      assert.deepEqual(hook.events, ['create', 'push']);
      assert.ok(!JSON.stringify(hook).includes(SECRET), 'the secret is never shown');

      const got = await repoGetHook({ client: alice.client, path: { owner: 'acme', repo: 'app', id: hook.id! } });
      assert.deepEqual([got.status, got.data], [200, hook]);
      const second = await create({ type: 'forgejo', config: { url: 'http://example.com/2', content_type: 'json' } });
      assert.equal(second.status, 201);
      const listed = await repoListHooks({
        client: alice.client,
        path: { owner: 'acme', repo: 'app' },
        query: { limit: 1, page: 2 },
      });
      assert.equal(listed.status, 200);
      assert.deepEqual(
        (listed.data as Hook[]).map((h) => h.id),
        [(second.json as Hook).id],
        'id ascending, paginated',
      );
      assert.equal((listed as unknown as { headers: Record<string, unknown> }).headers['x-total-count'], '2');

      const edited = await repoEditHook({
        client: alice.client,
        path: { owner: 'acme', repo: 'app', id: hook.id! },
        body: { config: { url: 'https://ci.example.com/other' } },
      });
      assert.equal(edited.status, 200);
      const after = edited.data as Hook;
      assert.equal(after.url, 'https://ci.example.com/other');
      assert.deepEqual(after.events, ['push'], 'omitted events reset to push, as Forgejo');
      assert.equal(after.branch_filter, '', 'omitted branch_filter cleared');
      assert.equal(after.active, true, 'omitted active kept');

      for (const id of [hook.id!, (second.json as Hook).id!]) {
        assert.equal(
          (await repoDeleteHook({ client: alice.client, path: { owner: 'acme', repo: 'app', id } })).status,
          204,
        );
      }
      const gone = await s.api('GET', `/repos/acme/app/hooks/${hook.id}`, { token: alice.token });
      assert.deepEqual([gone.status, gone.json], [404, notFound()]);
    });

    test('validation is the organization hooks’ own, in the same order and with the same messages', async () => {
      const cases: Array<[unknown, string]> = [
        [{}, '[Type]: Required'],
        [{ type: 'nope', config: {}, branch_filter: '[' }, '[BranchFilter]: unexpected end of input'],
        [{ type: 'nope', config: {} }, 'Invalid hook type: nope'],
        [{ type: 'gitea', config: { content_type: 'xml' } }, 'Missing config option: url'],
        [{ type: 'gitea', config: { url: 'ftp://x', content_type: 'json' } }, 'Invalid url'],
        [{ type: 'gitea', config: { url: 'http://x', content_type: 'application/json' } }, 'Invalid content type'],
      ];
      for (const [body, message] of cases) {
        for (const base of ['/repos/acme/app', '/orgs/acme']) {
          const res = await s.api('POST', `${base}/hooks`, { token: alice.token, body });
          assert.deepEqual(
            [res.status, res.json],
            [422, errorBody(s.rootUrl, message)],
            `${base} ${JSON.stringify(body)}`,
          );
        }
      }
    });

    test('a hook belongs to one scope: another repository’s or the organization’s hook is 404 here, and the reverse', async () => {
      const repoHook = (await create(basic('/unused', { active: false }))).json as Hook;
      const otherHook = (await create(basic('/unused', { active: false }), alice.token, 'acme/other')).json as Hook;
      const orgHook = (
        await s.api('POST', '/orgs/acme/hooks', { token: alice.token, body: basic('/unused', { active: false }) })
      ).json as Hook;
      for (const [path, id] of [
        ['/repos/acme/app/hooks', otherHook.id],
        ['/repos/acme/app/hooks', orgHook.id],
        ['/orgs/acme/hooks', repoHook.id],
        ['/repos/acme/app/hooks', 'abc'],
      ] as const) {
        const res = await s.api('GET', `${path}/${id}`, { token: alice.token });
        assert.deepEqual([res.status, res.json], [404, notFound()], `${path}/${id}`);
        assert.equal((await s.api('DELETE', `${path}/${id}`, { token: alice.token })).status, 404);
      }
      assert.equal(
        ((await s.api('GET', '/orgs/acme/hooks', { token: alice.token })).json as Hook[]).length,
        1,
        'the org list holds no repository hook',
      );
      for (const [path, id] of [
        ['/repos/acme/app/hooks', repoHook.id],
        ['/repos/acme/other/hooks', otherHook.id],
        ['/orgs/acme/hooks', orgHook.id],
      ] as const) {
        assert.equal((await s.api('DELETE', `${path}/${id}`, { token: alice.token })).status, 204);
      }
    });

    test('permissions: anonymous 401 (404 if private), a writer 403, an outsider 404 on a private repository, a read-only token 403, a site admin passes', async () => {
      assert.equal((await s.api('GET', '/repos/acme/other/hooks')).status, 401, 'a public repository');
      assert.equal((await s.api('GET', '/repos/acme/app/hooks')).status, 404, 'a private repository is not seen');
      const writer = await s.api('GET', '/repos/acme/app/hooks', { token: bob.token });
      assert.deepEqual(
        [writer.status, writer.json],
        [403, errorBody(s.rootUrl, 'user should be an owner or a collaborator with admin write of a repository')],
      );
      assert.equal((await create(basic('/x'), bob.token)).status, 403);
      const outsider = await s.api('GET', '/repos/acme/app/hooks', { token: carol.token });
      assert.equal(outsider.status, 404);
      const readOnly = await s.tokenFor(alice, ['read:repository']);
      assert.equal((await s.api('GET', '/repos/acme/app/hooks', { token: readOnly })).status, 200);
      assert.equal((await create(basic('/x'), readOnly)).status, 403);
      assert.equal((await s.api('GET', '/repos/acme/app/hooks', { token: s.admin.token })).status, 200);
    });

    test('a push to the repository reaches its hook signed, then the organization’s hook: repository first', async () => {
      const repoHook = (await create(basic('/repo-push'))).json as Hook;
      const orgRes = await s.api('POST', '/orgs/acme/hooks', { token: alice.token, body: basic('/org-push') });
      assert.equal(orgRes.status, 201, orgRes.text);
      const orgHook = orgRes.json as Hook;
      headSha = await work.commit({ 'README.md': '# app\nmore\n' }, 'Second commit');
      assert.equal((await work.push('main')).code, 0);
      await receiver.waitFor(() => hooksOf('/repo-push').length === 1 && hooksOf('/org-push').length === 1);

      const [delivery] = hooksOf('/repo-push') as [ReceivedDelivery];
      assert.equal(delivery.headers['x-forgejo-event'], 'push');
      assert.ok(
        verifySignature(SECRET, delivery.rawBody, delivery.headers['x-forgejo-signature'] as string),
        'signed with the repository hook’s secret',
      );
      assert.equal(delivery.headers['x-gitea-hook-installation-target-type'], 'repository');
      assert.equal(delivery.headers['x-github-hook-installation-target-type'], 'repository');
      const [orgDelivered] = hooksOf('/org-push') as [ReceivedDelivery];
      assert.equal(orgDelivered.headers['x-gitea-hook-installation-target-type'], 'organization');
      const payload = delivery.json as PushPayload;
      assert.equal(payload.after, headSha);
      assert.equal(payload.repository.full_name, 'acme/app');

      // One hook_task row per hook, the repository's written first (Forgejo's PrepareWebhooks order).
      const [repoDelivery] = await deliveries('/repos/acme/app', repoHook.id!);
      const [orgDelivery] = await deliveries('/orgs/acme', orgHook.id!);
      assert.ok(repoDelivery && orgDelivery);
      assert.equal(repoDelivery.event, 'push');
      assert.ok(
        repoDelivery.id < orgDelivery.id,
        `repository delivery ${repoDelivery.id} before organization delivery ${orgDelivery.id}`,
      );

      // History and redelivery work for repository hooks as for organization hooks.
      const detail = await s.api('GET', `/repos/acme/app/hooks/${repoHook.id}/deliveries/${repoDelivery.id}`, {
        token: alice.token,
      });
      assert.equal(detail.status, 200, detail.text);
      const again = await s.api('POST', `/repos/acme/app/hooks/${repoHook.id}/deliveries/${repoDelivery.id}/attempts`, {
        token: alice.token,
      });
      assert.equal(again.status, 202, again.text);
      assert.equal((again.json as DeliverySummary).redelivery, true);
      await receiver.waitFor(() => hooksOf('/repo-push').length === 2);
      assert.equal(
        (await s.api('GET', `/orgs/acme/hooks/${repoHook.id}/deliveries`, { token: alice.token })).status,
        404,
        'not through the organization',
      );

      for (const path of [`/repos/acme/app/hooks/${repoHook.id}`, `/orgs/acme/hooks/${orgHook.id}`])
        assert.equal((await s.api('DELETE', path, { token: alice.token })).status, 204);
    });

    test('POST …/hooks/{id}/tests: 204, a signed push of the default branch head even to a hook that wants only `create`', async () => {
      const hook = (await create(basic('/test-delivery', { events: ['create'] }))).json as Hook;
      const res = await repoTestHook({ client: alice.client, path: { owner: 'acme', repo: 'app', id: hook.id! } });
      assert.equal(res.status, 204);
      await receiver.waitFor(() => hooksOf('/test-delivery').length === 1);
      const [delivery] = hooksOf('/test-delivery') as [ReceivedDelivery];
      assert.equal(delivery.headers['x-forgejo-event'], 'push');
      assert.ok(verifySignature(SECRET, delivery.rawBody, delivery.headers['x-forgejo-signature'] as string));
      const payload = delivery.json as PushPayload;
      assert.equal(payload.ref, 'refs/heads/main');
      assert.deepEqual([payload.before, payload.after, payload.total_commits], [headSha, headSha, 1]);
      assert.deepEqual(
        payload.commits.map((c) => c.id),
        [headSha],
      );
      assert.equal(payload.head_commit?.id, headSha);
      assert.equal(payload.compare_url, `${s.rootUrl}acme/app/compare/${headSha}...${headSha}`);
      assert.deepEqual([payload.pusher.login, payload.sender.login], ['alice', 'alice']);

      const byRef = await s.api('POST', `/repos/acme/app/hooks/${hook.id}/tests?ref=${headSha}`, {
        token: alice.token,
      });
      assert.equal(byRef.status, 204);
      await receiver.waitFor(() => hooksOf('/test-delivery').length === 2);
      assert.equal((hooksOf('/test-delivery')[1]?.json as PushPayload).ref, headSha, 'the ref as given');

      for (const path of [
        `/repos/acme/app/hooks/${hook.id}/tests?ref=nope`,
        '/repos/acme/app/hooks/999999/tests',
        `/repos/acme/other/hooks/${hook.id}/tests`,
      ]) {
        assert.equal((await s.api('POST', path, { token: alice.token })).status, 404, path);
      }
      const empty = (await create(basic('/never'), alice.token, 'acme/other')).json as Hook;
      assert.equal(
        (await s.api('POST', `/repos/acme/other/hooks/${empty.id}/tests`, { token: alice.token })).status,
        404,
        'an empty repository has no commit to send',
      );
      assert.equal((await s.api('POST', `/repos/acme/app/hooks/${hook.id}/tests`, { token: bob.token })).status, 403);
    });

    test('the test of an inactive hook is queued and recorded, not sent (the delivery engine drops deactivated hooks’ deliveries)', async () => {
      const hook = (await create(basic('/inactive', { active: false }))).json as Hook;
      assert.equal((await s.api('POST', `/repos/acme/app/hooks/${hook.id}/tests`, { token: alice.token })).status, 204);
      const deadline = Date.now() + 10_000;
      let list = await deliveries('/repos/acme/app', hook.id!);
      while (list[0]?.state !== 'failed') {
        assert.ok(Date.now() < deadline, `not settled: ${JSON.stringify(list)}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
        list = await deliveries('/repos/acme/app', hook.id!);
      }
      assert.deepEqual(
        list.map((d) => d.event),
        ['push'],
      );
      assert.equal(hooksOf('/inactive').length, 0);
    });

    test('a user’s own repository has hooks too, delivered on push', async () => {
      assert.equal((await s.api('POST', '/user/repos', { token: carol.token, body: { name: 'solo' } })).status, 201);
      assert.equal((await create(basic('/solo'), carol.token, 'carol/solo')).status, 201);
      const solo = await createWorkDir(remoteUrl(s.url, 'carol', 'solo', { user: 'carol', password: carol.token }));
      try {
        await solo.commit({ 'a.txt': 'a\n' }, 'Solo');
        assert.equal((await solo.push('main')).code, 0);
        await receiver.waitFor(() => hooksOf('/solo').length === 1);
      } finally {
        await solo.remove();
      }
    });
  });
}
