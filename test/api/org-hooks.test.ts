// Organization webhooks (Forgejo: routers/api/v1/org/hook.go), through the forgejo-ts client and
// raw requests, on every database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  orgAddTeamMember,
  orgCreate,
  orgCreateHook,
  orgCreateTeam,
  orgDeleteHook,
  orgEditHook,
  orgGetHook,
  orgListHooks,
} from '@llamaduck/forgejo-ts';
import type { CreateHookOption, Hook } from '@llamaduck/forgejo-ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { errorBody } from '../support/actions.ts';
import { compileBranchFilter } from '../../src/modules/glob.ts';
import { orgScope } from '../../src/modules/scope.ts';
import { hookWantsEvent, hookWantsRef, internalEventsFromApi } from '../../src/services/webhooks/hook-events.ts';
import { WEBHOOK_COLUMNS } from '../../src/services/webhooks/hooks.ts';

const SECRET = 'hmac-s3cr3t-value-7f2a';
const AUTH = 'Bearer s3cr3t-token-91bc';

/** A header of a forgejo-ts (axios) answer, success or failure. */
const headerOf = (res: unknown, name: string): unknown =>
  (res as { headers?: Record<string, unknown> }).headers?.[name];

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

describe('branch filter globs and event matching (no I/O)', () => {
  test('gobwas syntax without separators; errors carry gobwas texts', () => {
    const matches = (pattern: string, text: string) => compileBranchFilter(pattern)(text);
    assert.ok(matches('', 'anything') && matches('*', 'a/b'));
    assert.ok(matches('{main,feature/*}', 'feature/x/y'), '* crosses / without separators');
    assert.ok(!matches('{main,feature/*}', 'mainline'));
    assert.ok(matches('release/v[0-9]*', 'release/v1.2') && !matches('release/v[0-9]*', 'release/vx'));
    assert.ok(matches('[!ab]?', 'cx') && !matches('[!ab]?', 'ax'));
    assert.ok(matches('a\\*b', 'a*b') && !matches('a\\*b', 'axb'));
    for (const [pattern, message] of [
      ['[', 'unexpected end of input'],
      ['[a', 'unexpected end of input'],
      ['[]', 'could not parse range'],
      ['[!]', 'could not parse range'],
      ['[z-a]', "hi character 'a' should be greater than lo 'z'"],
      ['[a-bc]', 'expected close range character'],
    ]) {
      assert.throws(() => compileBranchFilter(pattern as string), { message: message as string }, pattern);
    }
  });

  test('hookWantsEvent maps delivered types to subscriptions; hookWantsRef filters push/create/delete only', () => {
    const hook = {
      events: internalEventsFromApi(['push', 'pull_request_review', 'pull_request_comment', 'workflow_run']),
      branchFilter: 'main',
    };
    for (const e of [
      'push',
      'pull_request_review_approved',
      'pull_request_review_rejected',
      'pull_request_review_comment',
      'workflow_run',
    ])
      assert.ok(hookWantsEvent(hook, e), e);
    for (const e of ['create', 'workflow_job', 'action_run_success', 'status']) assert.ok(!hookWantsEvent(hook, e), e);
    assert.ok(hookWantsRef(hook, 'push', 'refs/heads/main'));
    assert.ok(!hookWantsRef(hook, 'push', 'refs/heads/dev'));
    assert.ok(!hookWantsRef(hook, 'push', 'refs/tags/v1'), 'a branch filter suppresses tag pushes (Gitea #35567)');
    assert.ok(hookWantsRef({ branchFilter: 'refs/tags/*' }, 'create', 'refs/tags/v1'));
    assert.ok(hookWantsRef(hook, 'workflow_run', 'refs/heads/dev'), 'not a ref event');
  });
});

for (const dialect of testDialects()) {
  describe(`org webhooks [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let bob: TestUser;
    let orgId = 0;
    const db = () => s.server.deps.database.db;
    const notFound = () => ({ ...errorBody(s.rootUrl, "The target couldn't be found."), errors: [] });
    /** Removes acme's hooks as its owner would, a page (at most 50) at a time. */
    const clearHooks = async () => {
      for (;;) {
        const hooks = (await s.api('GET', '/orgs/acme/hooks?limit=50', { token: alice.token })).json as {
          id: number;
        }[];
        if (hooks.length === 0) return;
        for (const hook of hooks)
          assert.equal((await s.api('DELETE', `/orgs/acme/hooks/${hook.id}`, { token: alice.token })).status, 204);
      }
    };
    const create = (body: unknown) => s.api('POST', '/orgs/acme/hooks', { token: alice.token, body });
    const basic = (extra: Record<string, unknown> = {}) => ({
      type: 'forgejo',
      config: { url: 'http://example.com/hook', content_type: 'json' },
      ...extra,
    });

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      bob = await s.createUser('bob');
      assert.equal((await orgCreate({ client: alice.client, body: { username: 'acme' } })).status, 201);
      assert.equal((await orgCreate({ client: bob.client, body: { username: 'other' } })).status, 201);
      const team = await orgCreateTeam({
        client: alice.client,
        path: { org: 'acme' },
        body: { name: 'devs', permission: 'write', includes_all_repositories: true },
      });
      assert.equal(
        (await orgAddTeamMember({ client: alice.client, path: { id: team.data!.id!, username: 'bob' } })).status,
        204,
      );
      orgId = (await s.server.deps.services.accounts.findByName('acme'))!.id;
    });
    after(async () => {
      await s.stop();
    });

    test('create 201, get, list, delete through the client; Hook field order; secret never shown, header shown in clear', async () => {
      await clearHooks();
      const body: CreateHookOption = {
        type: 'gitea',
        config: { url: 'https://ci.example.com/hook', content_type: 'form', secret: SECRET },
        events: ['push', 'create'],
        branch_filter: '{main,release/*}',
        authorization_header: AUTH,
        active: true,
      };
      const created = await orgCreateHook({ client: alice.client, path: { org: 'acme' }, body });
      assert.equal(created.status, 201);
      const hook = created.data as Hook;
      assert.deepEqual(Object.keys(hook), HOOK_KEYS, "Forgejo's field order");
      assert.equal(hook.type, 'gitea');
      assert.equal(hook.url, 'https://ci.example.com/hook');
      assert.deepEqual(hook.config, { content_type: 'form', url: 'https://ci.example.com/hook' });
      assert.deepEqual(hook.events, ['create', 'push'], 'fixed order');
      assert.equal(hook.authorization_header, AUTH);
      assert.equal(hook.content_type, 'form');
      assert.equal(hook.metadata, null);
      assert.equal(hook.active, true);
      assert.equal(hook.branch_filter, '{main,release/*}');
      assert.match(hook.created_at!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);

      const got = await orgGetHook({ client: alice.client, path: { org: 'acme', id: hook.id! } });
      assert.equal(got.status, 200);
      assert.deepEqual(got.data, hook);
      const listed = await orgListHooks({ client: alice.client, path: { org: 'acme' } });
      assert.equal(listed.status, 200);
      assert.deepEqual(listed.data, [hook]);
      assert.equal(headerOf(listed, 'x-total-count'), '1');

      // The secret is in no answer and not in plain in the database; the header is encrypted at rest.
      for (const res of [
        await s.api('GET', `/orgs/acme/hooks/${hook.id}`, { token: alice.token }),
        await s.api('GET', '/orgs/acme/hooks', { token: alice.token }),
      ]) {
        assert.ok(!res.text.includes(SECRET));
      }
      const row = await db().selectFrom('webhook').selectAll().where('id', '=', hook.id!).executeTakeFirstOrThrow();
      assert.ok(!JSON.stringify(row).includes(SECRET) && !JSON.stringify(row).includes(AUTH));
      assert.notEqual(row.secret_encrypted, '');
      const record = await s.server.deps.services.webhooks.get(orgScope({ id: orgId }), hook.id!);
      assert.equal(s.server.deps.services.webhooks.secretOf(record), SECRET);
      assert.equal(s.server.deps.services.webhooks.authorizationHeaderOf(record), AUTH);
      const columns = WEBHOOK_COLUMNS;
      assert.equal(columns.length, 2);
      for (const column of columns) {
        assert.equal(await column.count(db(), 'v1:none:'), 1, column.label);
        const [value] = await column.batch(db(), 'v1:none:', 0, 10);
        assert.equal(
          s.server.deps.services.keys.decrypt(value!.stored, value!.associatedData),
          column.label.endsWith('secret_encrypted') ? SECRET : AUTH,
        );
        assert.equal((await column.prefixesInUse(db())).length, 1);
      }

      const deleted = await orgDeleteHook({ client: alice.client, path: { org: 'acme', id: hook.id! } });
      assert.equal(deleted.status, 204);
      assert.equal(headerOf(deleted, 'content-type'), undefined);
      for (const method of ['GET', 'PATCH', 'DELETE']) {
        const res = await s.api(method, `/orgs/acme/hooks/${hook.id}`, {
          token: alice.token,
          ...(method === 'PATCH' ? { body: {} } : {}),
        });
        assert.deepEqual([res.status, res.json], [404, notFound()], method);
      }
    });

    test('defaults: inactive, events ["push"], empty branch filter and header; every registered type accepted with its metadata', async () => {
      await clearHooks();
      const minimal = await create(basic());
      assert.equal(minimal.status, 201);
      const h = minimal.json as Hook;
      assert.equal(h.active, false);
      assert.deepEqual(h.events, ['push']);
      assert.equal(h.branch_filter, '');
      assert.equal(h.authorization_header, '');
      const expected: Record<string, unknown> = {
        forgejo: null,
        gitea: null,
        gogs: null,
        dingtalk: null,
        msteams: null,
        feishu: null,
        wechatwork: null,
        discord: { username: '', icon_url: '' },
        telegram: { bot_token: '', chat_id: '', thread_id: '' },
        matrix: { homeserver_url: '', room_id: '', message_type: 0 },
        packagist: { username: '', api_token: '', package_url: '' },
        sourcehut_builds: { manifest_path: '', visibility: '', secrets: false },
      };
      for (const [type, metadata] of Object.entries(expected)) {
        const res = await create(basic({ type }));
        assert.equal(res.status, 201, type);
        assert.deepEqual((res.json as Hook).metadata, metadata, type);
      }
      const slack = await create(
        basic({
          type: 'slack',
          config: {
            url: 'http://x.test/s',
            content_type: 'json',
            channel: '  #builds ',
            username: 'ci',
            color: 'good',
          },
        }),
      );
      assert.equal(slack.status, 201);
      assert.deepEqual((slack.json as Hook).metadata, {
        channel: '#builds',
        username: 'ci',
        icon_url: '',
        color: 'good',
      });
      assert.deepEqual((slack.json as Hook).config, {
        channel: '#builds',
        color: 'good',
        content_type: 'json',
        icon_url: '',
        url: 'http://x.test/s',
        username: 'ci',
      });
    });

    test('validation table, in order, with statuses and messages', async () => {
      const cases: [unknown, number, string][] = [
        [{}, 422, '[Type]: Required'],
        [{ type: '', config: null, branch_filter: '[' }, 422, '[Type]: Required'],
        [{ type: 'nope', branch_filter: '[' }, 422, '[Config]: Required'],
        [{ type: 'nope', config: {}, branch_filter: '[' }, 422, '[BranchFilter]: unexpected end of input'],
        [
          { type: 'nope', config: {}, branch_filter: '[z-a]' },
          422,
          "[BranchFilter]: hi character 'a' should be greater than lo 'z'",
        ],
        [{ type: 'nope', config: {} }, 422, 'Invalid hook type: nope'],
        [{ type: ' gitea', config: {} }, 422, 'Invalid hook type:  gitea'],
        [{ type: 'gitea', config: { content_type: 'xml' } }, 422, 'Missing config option: url'],
        [{ type: 'gitea', config: { url: 'ftp://x' } }, 422, 'Missing config option: content_type'],
        [{ type: 'gitea', config: { url: 'ftp://x', content_type: 'application/json' } }, 422, 'Invalid content type'],
        [{ type: 'gitea', config: { url: 'ftp://x', content_type: 'json' } }, 422, 'Invalid url'],
        [{ type: 'gitea', config: { url: 'http://x:port/', content_type: 'json' } }, 422, 'Invalid url'],
        [{ type: 'gitea', config: { url: '', content_type: 'json' } }, 422, 'Invalid url'],
        [
          { type: 'gitea', config: { url: 'http://x', content_type: 'json', is_system_webhook: 'yes' } },
          422,
          'Invalid is_system_webhook value',
        ],
        [
          { type: 'slack', config: { url: 'http://x', content_type: 'json', is_system_webhook: 'maybe' } },
          422,
          'Invalid is_system_webhook value',
        ],
        [{ type: 'slack', config: { url: 'http://x', content_type: 'json' } }, 422, 'Missing config option: channel'],
        [
          { type: 'slack', config: { url: 'http://x', content_type: 'json', channel: 'Bad Channel' } },
          400,
          'Invalid slack channel name',
        ],
        [
          { type: 'slack', config: { url: 'http://x', content_type: 'json', channel: '#' } },
          400,
          'Invalid slack channel name',
        ],
      ];
      await clearHooks();
      for (const [body, status, message] of cases) {
        const res = await create(body);
        assert.deepEqual([res.status, res.json], [status, errorBody(s.rootUrl, message)], JSON.stringify(body));
      }
      assert.equal((await create(undefined)).status, 422, 'no body');
      const count = await db()
        .selectFrom('webhook')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow();
      assert.equal(Number(count.n), 0, 'nothing stored');
      assert.equal(
        (
          await create(
            basic({ config: { url: 'HTTPS://x.test:8443/p?q=1', content_type: 'json', is_system_webhook: 'false' } }),
          )
        ).status,
        201,
      );
    });

    test('branch_filter on create and PATCH: every glob Forgejo accepts is accepted (`release-*`); `{unclosed`, over 1,000 characters or 64 wildcards is a 422', async () => {
      await clearHooks();
      // Forgejo's GlobPattern binding compiles all of these.
      for (const filter of ['release-*', 'feature/{a,b}-[0-9]*', 'x'.repeat(1000), '*'.repeat(64)]) {
        const res = await create(basic({ branch_filter: filter }));
        assert.equal(res.status, 201, `${filter.slice(0, 30)}: ${res.text}`);
        assert.equal((res.json as Hook).branch_filter, filter);
      }
      const tooLong = 'x'.repeat(1001);
      const tooWild = `${'*a'.repeat(64)}?`;
      const refused: [string, string][] = [
        [tooLong, '[BranchFilter]: longer than 1000 characters'],
        [tooWild, '[BranchFilter]: more than 64 wildcards (* and ?)'],
        ['[a-', '[BranchFilter]: unexpected end of input'],
        ['{unclosed', '[BranchFilter]: unexpected end of input'],
      ];
      for (const [filter, message] of refused) {
        const res = await create(basic({ branch_filter: filter }));
        assert.deepEqual([res.status, res.json], [422, errorBody(s.rootUrl, message)], filter.slice(0, 30));
      }
      const id = ((await create(basic({ branch_filter: 'main' }))).json as Hook).id!;
      for (const [filter, message] of refused) {
        const res = await s.api('PATCH', `/orgs/acme/hooks/${id}`, {
          token: alice.token,
          body: { branch_filter: filter },
        });
        assert.deepEqual([res.status, res.json], [422, errorBody(s.rootUrl, message)], filter.slice(0, 30));
      }
      assert.equal(
        (await orgGetHook({ client: alice.client, path: { org: 'acme', id } })).data?.branch_filter,
        'main',
        'refused PATCHes change nothing',
      );
      const edited = await s.api('PATCH', `/orgs/acme/hooks/${id}`, {
        token: alice.token,
        body: { branch_filter: 'release-*' },
      });
      assert.equal(edited.status, 200, edited.text);
      assert.equal((edited.json as Hook).branch_filter, 'release-*');
    });

    test('events: API names map to subscriptions and come back in the fixed order; unknown ignored; case-insensitive; workflow events accepted', async () => {
      await clearHooks();
      const eventsOf = async (events: string[]) => {
        const res = await create(basic({ events }));
        assert.equal(res.status, 201);
        return (res.json as Hook).events;
      };
      assert.deepEqual(await eventsOf([]), ['push']);
      assert.deepEqual(await eventsOf(['bogus']), [], 'unknown names are ignored');
      assert.deepEqual(
        await eventsOf(['status', 'package', 'push']),
        ['push', 'package', 'status'],
        'commit statuses are an event, after package',
      );
      assert.deepEqual(await eventsOf(['PUSH', 'Release']), ['push', 'release']);
      assert.deepEqual(await eventsOf(['issues']), [
        'issues',
        'issue_assign',
        'issue_label',
        'issue_milestone',
        'issue_comment',
      ]);
      assert.deepEqual(await eventsOf(['issues_only', 'issue_label']), ['issues', 'issue_label']);
      assert.deepEqual(await eventsOf(['pull_request']), [
        'pull_request',
        'pull_request_assign',
        'pull_request_label',
        'pull_request_milestone',
        'pull_request_comment',
        'pull_request_review_approved',
        'pull_request_review_rejected',
        'pull_request_review_comment',
        'pull_request_sync',
        'pull_request_review_request',
      ]);
      assert.deepEqual(await eventsOf(['pull_request_review']), [
        'pull_request_review_approved',
        'pull_request_review_rejected',
      ]);
      assert.deepEqual(
        await eventsOf([
          'workflow_job',
          'workflow_run',
          'action_run_success',
          'action_run_recover',
          'action_run_failure',
          'package',
          'repository',
          'wiki',
          'fork',
          'delete',
          'create',
        ]),
        [
          'create',
          'delete',
          'fork',
          'wiki',
          'repository',
          'package',
          'action_run_failure',
          'action_run_recover',
          'action_run_success',
          'workflow_run',
          'workflow_job',
        ],
      );
    });

    test('PATCH: not a partial update (events reset, branch filter and header cleared, active kept); create-only events kept; secret unchanged', async () => {
      await clearHooks();
      const created = await create({
        type: 'slack',
        config: { url: 'http://x.test/a', content_type: 'json', channel: 'builds', secret: SECRET },
        events: ['push', 'release', 'package', 'action_run_failure', 'workflow_run'],
        branch_filter: 'main',
        authorization_header: AUTH,
        active: true,
      });
      assert.equal(created.status, 201);
      const id = (created.json as Hook).id!;
      const edited = await orgEditHook({
        client: alice.client,
        path: { org: 'acme', id },
        body: { config: { secret: 'other' } },
      });
      assert.equal(edited.status, 200);
      const h = edited.data as Hook;
      assert.deepEqual(
        h.events,
        ['push', 'package', 'action_run_failure'],
        'reset to push; package/action_run_* untouched',
      );
      assert.equal(h.branch_filter, '');
      assert.equal(h.authorization_header, '');
      assert.equal(h.active, true, 'active omitted: unchanged');
      assert.equal(h.url, 'http://x.test/a');
      const record = await s.server.deps.services.webhooks.get(orgScope({ id: orgId }), id);
      assert.equal(s.server.deps.services.webhooks.secretOf(record), SECRET, 'config.secret is ignored by PATCH');

      const second = await s.api('PATCH', `/orgs/acme/hooks/${id}`, {
        token: alice.token,
        body: {
          config: { url: 'https://y.test/b', content_type: 'form', channel: 'Not Validated' },
          events: ['issues_only', 'action_run_success'],
          branch_filter: 'release/*',
          authorization_header: 'Basic abc',
          active: false,
        },
      });
      assert.equal(second.status, 200);
      const h2 = second.json as Hook;
      assert.deepEqual(
        h2.events,
        ['issues', 'package', 'action_run_failure'],
        'action_run_success cannot be added by PATCH',
      );
      assert.equal(h2.url, 'https://y.test/b');
      assert.equal(h2.content_type, 'form');
      assert.equal(h2.branch_filter, 'release/*');
      assert.equal(h2.authorization_header, 'Basic abc');
      assert.equal(h2.active, false);
      assert.deepEqual(h2.metadata, { channel: 'Not Validated', username: '', icon_url: '', color: '' });
      assert.deepEqual(
        (await orgGetHook({ client: alice.client, path: { org: 'acme', id } })).data,
        h2,
        'answer re-read after save',
      );

      const failures: [unknown, string][] = [
        [{ config: { url: 'ftp://x' } }, 'Invalid url'],
        [{ config: { content_type: 'xml' } }, 'Invalid content type'],
        [{ branch_filter: '[!]' }, '[BranchFilter]: could not parse range'],
      ];
      for (const [body, message] of failures) {
        const res = await s.api('PATCH', `/orgs/acme/hooks/${id}`, { token: alice.token, body });
        assert.deepEqual([res.status, res.json], [422, errorBody(s.rootUrl, message)], JSON.stringify(body));
      }
      const bad = await s.api('PATCH', '/orgs/acme/hooks/999999', { token: alice.token, body: { branch_filter: '[' } });
      assert.equal(bad.status, 422, 'binding comes before the lookup');
      assert.deepEqual(
        (await orgGetHook({ client: alice.client, path: { org: 'acme', id } })).data,
        h2,
        'failed PATCHes change nothing',
      );
    });

    test('404s: unknown id, non-numeric id, another org’s hook; list pagination id ascending with X-Total-Count', async () => {
      await clearHooks();
      const ids: number[] = [];
      for (let i = 0; i < 5; i += 1) ids.push(((await create(basic())).json as Hook).id!);
      const foreign = await s.api('POST', '/orgs/other/hooks', { token: bob.token, body: basic() });
      assert.equal(foreign.status, 201);
      const foreignId = (foreign.json as Hook).id!;
      for (const path of [
        `/orgs/acme/hooks/${foreignId}`,
        '/orgs/acme/hooks/abc',
        '/orgs/acme/hooks/0',
        '/orgs/acme/hooks/99999',
      ]) {
        for (const method of ['GET', 'DELETE']) {
          const res = await s.api(method, path, { token: alice.token });
          assert.deepEqual([res.status, res.json], [404, notFound()], `${method} ${path}`);
        }
      }
      const missingOrg = await s.api('GET', '/orgs/nope/hooks', { token: alice.token });
      assert.deepEqual(
        [missingOrg.status, missingOrg.json],
        [404, { ...errorBody(s.rootUrl, 'GetOrgByName'), errors: ['org does not exist [id: 0, name: nope]'] }],
      );

      const page2 = await orgListHooks({ client: alice.client, path: { org: 'acme' }, query: { page: 2, limit: 2 } });
      assert.deepEqual(
        page2.data!.map((h) => h.id),
        ids.slice(2, 4),
      );
      assert.equal(headerOf(page2, 'x-total-count'), '5');
      const all = await orgListHooks({ client: alice.client, path: { org: 'acme' } });
      assert.deepEqual(
        all.data!.map((h) => h.id),
        ids,
      );
      const other = await s.api('GET', '/orgs/other/hooks', { token: bob.token });
      assert.deepEqual(
        (other.json as Hook[]).map((h) => h.id),
        [foreignId],
      );
    });

    test('guards: anonymous 401, member 403 even with a bad body, read-scoped token cannot write, site admin passes', async () => {
      await clearHooks();
      const id = ((await create(basic())).json as Hook).id!;
      const routes: [string, string][] = [
        ['GET', '/orgs/acme/hooks'],
        ['POST', '/orgs/acme/hooks'],
        ['GET', `/orgs/acme/hooks/${id}`],
        ['PATCH', `/orgs/acme/hooks/${id}`],
        ['DELETE', `/orgs/acme/hooks/${id}`],
      ];
      for (const [method, path] of routes) {
        const anon = await s.api(method, path, { body: method === 'POST' || method === 'PATCH' ? {} : undefined });
        assert.deepEqual(
          [anon.status, anon.json],
          [401, errorBody(s.rootUrl, 'token is required')],
          `anonymous ${method} ${path}`,
        );
        const member = await s.api(method, path, {
          token: bob.token,
          body: method === 'POST' || method === 'PATCH' ? {} : undefined,
        });
        assert.deepEqual(
          [member.status, member.json],
          [403, errorBody(s.rootUrl, 'Must be an organization owner')],
          `member ${method} ${path}`,
        );
      }
      const readOnly = await s.tokenFor(alice, ['read:organization']);
      assert.equal((await s.api('GET', '/orgs/acme/hooks', { token: readOnly })).status, 200);
      const denied = await s.api('POST', '/orgs/acme/hooks', { token: readOnly, body: basic() });
      assert.deepEqual(
        [denied.status, denied.json],
        [403, errorBody(s.rootUrl, 'token does not have at least one of required scope(s): [write:organization]')],
      );
      const repoOnly = await s.tokenFor(alice, ['read:repository']);
      assert.equal((await s.api('GET', '/orgs/acme/hooks', { token: repoOnly })).status, 403);
      assert.equal((await s.api('GET', '/orgs/acme/hooks', { token: s.admin.token })).status, 200, 'site admin');
      assert.equal((await s.api('DELETE', `/orgs/acme/hooks/${id}`, { token: s.admin.token })).status, 204);
    });
  });
}
