// Typed webhooks end to end: organization hooks of the chat and CI types
// pointing at a local receiver, a git push to a repository of the
// organization, and what each receiver gets — Slack, Discord, Teams and
// Telegram messages POSTed with Forgejo's signed headers, a Matrix event PUT
// to <room URL>/<transaction id> with the bearer token, a Packagist update —
// and what the delivery history shows: the request as sent, or why nothing
// was sent; then a run on a real runner (Connect client) reaching a Slack hook
// as Actions messages. Every test runs on every database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { parse } from 'yaml';
import { updateWebhook } from '../../src/models/webhooks.ts';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { createRunnerClient, decodeTask } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { startWebhookReceiver, verifySignature } from '../support/webhook-receiver.ts';
import type { ReceivedDelivery, WebhookReceiver } from '../support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';

const SECRET = 'typed-hook-secret-42';
const MATRIX_ROOM_PATH = '/_matrix/client/v3/rooms/!room:example.org/send/m.room.message';
const COMMIT_MESSAGE = 'Add <b>bold</b> & *stars*';

interface Delivery {
  id: number;
  guid: string;
  event: string;
  state: string;
  status: string;
}

interface DeliveryDetail extends Delivery {
  attempt_history: Array<{
    url: string;
    request: { headers: Record<string, string>; payload: string };
    response: { status_code: number };
    error: string;
  }>;
}

for (const dialect of testDialects()) {
  describe(`typed webhook payloads [${dialect}]`, () => {
    let s: TestServer;
    let owner: TestUser;
    let receiver: WebhookReceiver;
    const hookIds: Record<string, number> = {};
    let sha = '';
    let remote = '';

    const createHook = async (name: string, body: Record<string, unknown>) => {
      const created = await s.api('POST', '/orgs/acme/hooks', {
        token: owner.token,
        body: { events: ['push'], active: true, ...body },
      });
      assert.equal(created.status, 201, created.text);
      hookIds[name] = (created.json as { id: number }).id;
    };

    const deliveriesOf = async (name: string): Promise<Delivery[]> => {
      const list = await s.api('GET', `/orgs/acme/hooks/${hookIds[name]}/deliveries`, { token: owner.token });
      assert.equal(list.status, 200, list.text);
      return list.json as Delivery[];
    };

    /** The one delivery of a hook once it is settled, with its attempts. */
    const settledDeliveryOf = async (name: string): Promise<DeliveryDetail> => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const [first] = await deliveriesOf(name);
        if (first && (first.state === 'delivered' || first.state === 'failed')) {
          const detail = await s.api('GET', `/orgs/acme/hooks/${hookIds[name]}/deliveries/${first.id}`, {
            token: owner.token,
          });
          assert.equal(detail.status, 200, detail.text);
          return detail.json as DeliveryDetail;
        }
        assert.ok(Date.now() < deadline, `the ${name} delivery was not settled in time`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };

    const receivedAt = (pathPrefix: string): ReceivedDelivery => {
      const got = receiver.received.filter((d) => d.path.startsWith(pathPrefix));
      assert.equal(got.length, 1, `one request at ${pathPrefix}, got ${got.length}`);
      return got[0] as ReceivedDelivery;
    };

    before(async () => {
      s = await startTestServer(dialect, { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' });
      owner = await s.createUser('owner');
      receiver = await startWebhookReceiver();
      assert.equal((await s.api('POST', '/orgs', { token: owner.token, body: { username: 'acme' } })).status, 201);
      assert.equal(
        (await s.api('POST', '/orgs/acme/repos', { token: owner.token, body: { name: 'app' } })).status,
        201,
      );
      await createHook('slack', {
        type: 'slack',
        config: {
          url: `${receiver.url}/slack`,
          content_type: 'json',
          channel: '#ci',
          username: 'Gantry',
          color: 'good',
          secret: SECRET,
        },
      });
      await createHook('discord', {
        type: 'discord',
        config: { url: `${receiver.url}/discord`, content_type: 'json', secret: SECRET },
      });
      await createHook('msteams', {
        type: 'msteams',
        config: { url: `${receiver.url}/msteams`, content_type: 'json' },
      });
      await createHook('matrix', {
        type: 'matrix',
        config: { url: `${receiver.url}${MATRIX_ROOM_PATH}`, content_type: 'json' },
        authorization_header: 'Bearer mx-token-1',
      });
      await createHook('telegram', {
        type: 'telegram',
        config: { url: `${receiver.url}/bot123:abc/sendMessage?chat_id=42`, content_type: 'json' },
      });
      await createHook('packagist', {
        type: 'packagist',
        config: { url: `${receiver.url}/api/update-package?username=u&apiToken=t`, content_type: 'json' },
      });
      // The API cannot set a manifest path (as in Forgejo): this hook records why it sent nothing.
      await createHook('sourcehut', {
        type: 'sourcehut_builds',
        config: { url: `${receiver.url}/builds`, content_type: 'json' },
        authorization_header: 'Bearer srht',
      });

      remote = remoteUrl(s.url, 'acme', 'app', { user: 'owner', password: owner.password });
      const work = await createWorkDir(remote);
      sha = await work.commit({ 'README.md': 'hello\n' }, COMMIT_MESSAGE);
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      await work.remove();
      await receiver.waitFor((r) => r.length >= 6, 30_000);
    });

    after(async () => {
      await s?.stop();
      await receiver?.close();
    });

    test('slack: a POST of the message, signed over the bytes sent, with the channel and settings of the hook', () => {
      const d = receivedAt('/slack');
      assert.equal(d.method, 'POST');
      assert.equal(d.headers['content-type'], 'application/json');
      assert.equal(d.headers['x-forgejo-event'], 'push');
      assert.ok(verifySignature(SECRET, d.rawBody, d.headers['x-forgejo-signature'] as string));
      const body = d.json as {
        channel: string;
        username: string;
        text: string;
        attachments: Array<{ color: string; text: string }>;
      };
      assert.deepEqual([body.channel, body.username], ['#ci', 'Gantry']);
      assert.equal(
        body.text,
        `[acme/app:<${s.rootUrl}acme/app/src/branch/main|main>] 1 new commit pushed by \`owner\``,
      );
      assert.equal(body.attachments[0]?.color, 'good');
      assert.equal(
        body.attachments[0]?.text,
        `<${s.rootUrl}acme/app/commit/${sha}|${sha.slice(0, 7)}>: Add &lt;b&gt;bold&lt;/b&gt; &amp; *stars* - \`Test Author\``,
      );
    });

    test('discord: one embed, the commit summary Markdown-escaped, the pusher as author', () => {
      const d = receivedAt('/discord');
      assert.equal(d.method, 'POST');
      assert.ok(
        verifySignature(SECRET, d.rawBody, d.headers['x-hub-signature-256']?.toString().replace('sha256=', '')),
      );
      const embed = (
        d.json as { embeds: Array<{ title: string; description: string; url: string; author: { name: string } }> }
      ).embeds[0];
      assert.equal(embed?.title, '[acme/app:main] 1 new commit');
      assert.equal(embed?.url, `${s.rootUrl}acme/app/commit/${sha}`);
      assert.equal(
        embed?.description,
        `[\`${sha.slice(0, 7)}\`](${s.rootUrl}acme/app/commit/${sha}) Add \\<b\\>bold\\</b\\> & \\*stars\\* \\- Test Author`,
      );
      assert.equal(embed?.author.name, 'owner');
    });

    test('msteams: an Adaptive Card naming the repository, linking the commit', () => {
      const d = receivedAt('/msteams');
      const card = d.json as {
        type: string;
        version: string;
        body: Array<{ items: Array<{ text: string }> }>;
        actions: Array<{ url: string }>;
      };
      assert.deepEqual([d.method, card.type, card.version], ['POST', 'AdaptiveCard', '1.5']);
      assert.equal(card.body[0]?.items[0]?.text, `💬 Update | [acme/app](${s.rootUrl}acme/app)`);
      assert.match(card.body[1]?.items[0]?.text ?? '', /^\[main\] 1 new commit by \[@owner\]/);
      assert.equal(card.actions[0]?.url, `${s.rootUrl}acme/app/commit/${sha}`);
    });

    test('matrix: a PUT to <room URL>/<delivery id> with the bearer token and no Forgejo headers', async () => {
      const d = receivedAt(MATRIX_ROOM_PATH);
      const [delivery] = await deliveriesOf('matrix');
      assert.ok(delivery);
      assert.equal(d.method, 'PUT');
      assert.equal(d.path, `${MATRIX_ROOM_PATH}/${delivery.guid}`);
      assert.equal(d.headers.authorization, 'Bearer mx-token-1');
      assert.equal(d.headers['x-forgejo-signature'], undefined);
      const event = d.json as {
        msgtype: string;
        format: string;
        body: string;
        formatted_body: string;
        'io.gitea.commits': Array<{ id: string }>;
      };
      assert.deepEqual([event.msgtype, event.format], ['m.notice', 'org.matrix.custom.html']);
      assert.equal(
        event.body,
        `[acme/app] owner pushed 1 commit to main:\n[${sha.slice(0, 7)}](${s.rootUrl}acme/app/commit/${sha}): ${COMMIT_MESSAGE} - Test Author`,
      );
      assert.match(event.formatted_body, /: Add &lt;b&gt;bold&lt;\/b&gt; &amp; \*stars\* - Test Author$/);
      assert.deepEqual(
        event['io.gitea.commits'].map((c) => c.id),
        [sha],
      );
    });

    test('telegram: HTML parse mode to the hook URL (chat id and all), user text escaped', () => {
      const d = receivedAt('/bot123:abc/sendMessage');
      assert.deepEqual([d.method, d.path], ['POST', '/bot123:abc/sendMessage?chat_id=42']);
      assert.equal(d.headers['x-forgejo-event'], 'push');
      const message = d.json as { text: string; parse_mode: string; disable_web_page_preview: boolean };
      assert.deepEqual([message.parse_mode, message.disable_web_page_preview], ['HTML', true]);
      assert.equal(
        message.text,
        `[acme/app:main] 1 new commit\n[<a href="${s.rootUrl}acme/app/commit/${sha}">${sha.slice(0, 7)}</a>] Add &lt;b&gt;bold&lt;/b&gt; &amp; *stars* - Test Author`,
      );
    });

    test('packagist: the update request with the repository URL, no Forgejo headers', () => {
      const d = receivedAt('/api/update-package');
      assert.deepEqual([d.method, d.path], ['POST', '/api/update-package?username=u&apiToken=t']);
      assert.deepEqual(d.json, { repository: { url: `${s.rootUrl}acme/app` } });
      assert.equal(d.headers['x-forgejo-event'], undefined);
    });

    test('the delivery history shows each request as sent: its URL, headers (Authorization hidden) and body', async () => {
      const matrix = await settledDeliveryOf('matrix');
      assert.equal(matrix.state, 'delivered');
      assert.equal(matrix.attempt_history.length, 1);
      const attempt = matrix.attempt_history[0];
      const received = receivedAt(MATRIX_ROOM_PATH);
      assert.equal(attempt?.url, `${receiver.url}${MATRIX_ROOM_PATH}/${matrix.guid}`);
      assert.equal(attempt?.request.payload, received.rawBody.toString('utf8'));
      assert.equal(attempt?.request.headers.authorization, '******');
      assert.equal(attempt?.response.status_code, 200);

      const slack = await settledDeliveryOf('slack');
      assert.equal(slack.state, 'delivered');
      assert.equal(slack.attempt_history[0]?.request.payload, receivedAt('/slack').rawBody.toString('utf8'));
      assert.equal(
        slack.attempt_history[0]?.request.headers['x-forgejo-signature'],
        receivedAt('/slack').headers['x-forgejo-signature'],
      );
    });

    test('a hook that cannot send an event records why, once, and nothing reaches its URL', async () => {
      const sourcehut = await settledDeliveryOf('sourcehut');
      assert.equal(sourcehut.state, 'failed');
      assert.equal(
        sourcehut.status,
        "not sent: sourcehut_builds hooks need a manifest path (manifest_path in the hook's settings), and this hook has none",
      );
      assert.equal(sourcehut.attempt_history.length, 1);
      assert.equal(sourcehut.attempt_history[0]?.response.status_code, 0);
      assert.equal(receiver.received.filter((d) => d.path.startsWith('/builds')).length, 0);
    });

    test('sourcehut_builds with a manifest path: the manifest at the pushed commit, pinned, submitted with the token', async () => {
      // Settings the API cannot write (Forgejo's UI form does): set in the database.
      await updateWebhook(
        s.server.deps.database.db,
        hookIds.sourcehut as number,
        { meta: { manifest_path: '.build.yml', visibility: 'PUBLIC', secrets: false } },
        Math.floor(Date.now() / 1000),
      );
      const work = await createWorkDir(remote);
      await work.git(['fetch', '-q', 'origin', 'main']);
      await work.git(['reset', '-q', '--hard', 'FETCH_HEAD']);
      const head = await work.commit(
        { '.build.yml': 'image: alpine/edge\ntasks:\n  - build: echo hi\n' },
        'Add a build manifest',
      );
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      await work.remove();
      await receiver.waitFor((r) => r.some((d) => d.path === '/builds'), 30_000);
      const d = receivedAt('/builds');
      assert.equal(d.method, 'POST');
      assert.equal(d.headers.authorization, 'Bearer srht');
      const { query, variables } = d.json as {
        query: string;
        variables: { manifest: string; tags: string[]; note: string; visibility: string; execute: boolean };
      };
      assert.match(query, /^mutation .*submit\(/s);
      assert.deepEqual(
        [variables.tags, variables.note, variables.visibility, variables.execute],
        [['acme/app', 'branch/main', '.build.yml'], 'Add a build manifest\n', 'PUBLIC', true],
      );
      const manifest = parse(variables.manifest) as {
        image: string;
        sources: string[];
        environment: Record<string, string>;
      };
      assert.equal(manifest.image, 'alpine/edge');
      assert.deepEqual(manifest.sources, [`${s.rootUrl}acme/app.git#${head}`]);
      assert.deepEqual(manifest.environment, {
        BUILD_SUBMITTER: 'forgejo',
        BUILD_SUBMITTER_URL: s.rootUrl,
        GIT_REF: 'refs/heads/main',
      });
    });
  });
}

const WORKFLOW = [
  'on: workflow_dispatch',
  'jobs:',
  '  build:',
  '    runs-on: typed-label',
  '    steps:',
  '      - run: echo build',
  '',
].join('\n');

for (const dialect of testDialects()) {
  describe(`typed webhook payloads of Actions events [${dialect}]`, () => {
    let s: TestServer;
    let receiver: WebhookReceiver;

    before(async () => {
      s = await startTestServer(dialect, { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' });
      receiver = await startWebhookReceiver();
    });

    after(async () => {
      await s?.stop();
      await receiver?.close();
    });

    test('a dispatched run that succeeds: Slack gets workflow_run messages and "Action Succeeded"', async () => {
      const owner = await s.createUser('owner');
      assert.equal((await s.api('POST', '/orgs', { token: owner.token, body: { username: 'acme' } })).status, 201);
      assert.equal(
        (await s.api('POST', '/orgs/acme/repos', { token: owner.token, body: { name: 'app' } })).status,
        201,
      );
      const hook = await s.api('POST', '/orgs/acme/hooks', {
        token: owner.token,
        body: {
          type: 'slack',
          config: { url: `${receiver.url}/slack`, content_type: 'json', channel: 'builds' },
          events: ['workflow_run', 'action_run_success'],
          active: true,
        },
      });
      assert.equal(hook.status, 201, hook.text);
      const work = await createWorkDir(remoteUrl(s.url, 'acme', 'app', { user: 'owner', password: owner.password }));
      await work.commit({ '.forgejo/workflows/ci.yml': WORKFLOW }, 'CI');
      assert.equal((await work.push('main')).code, 0);
      await work.remove();
      const token = await s.api('GET', '/orgs/acme/actions/runners/registration-token', { token: owner.token });
      assert.equal(token.status, 200, token.text);
      const runner = createRunnerClient(s.url);
      const registered = await runner.runner.register({
        name: 'typed-runner',
        token: (token.json as { token: string }).token,
        version: 'v12',
        labels: ['typed-label'],
      });
      assert.ok(registered.runner);
      runner.credentials = {
        id: Number(registered.runner.id),
        uuid: registered.runner.uuid,
        token: registered.runner.token,
      };

      const dispatched = await s.api('POST', '/repos/acme/app/actions/workflows/ci.yml/dispatches', {
        token: owner.token,
        body: { ref: 'main', return_run_info: true },
      });
      assert.equal(dispatched.status, 201, dispatched.text);
      const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(fetched.task, 'a task to run');
      const task = decodeTask(fetched.task as Task);
      const now = { seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 };
      await runner.runner.updateTask({
        state: {
          id: BigInt(task.id),
          result: Result.SUCCESS,
          startedAt: now,
          stoppedAt: now,
          steps: [{ id: 0n, result: Result.SUCCESS, startedAt: now, stoppedAt: now, logIndex: 0n, logLength: 0n }],
        },
      });

      const texts = () => receiver.received.map((d) => d.json as { channel: string; text: string });
      await receiver.waitFor(
        () =>
          texts().some((m) => m.text.includes('Action Succeeded')) &&
          texts().some((m) => m.text.startsWith('Workflow Run completed')),
        30_000,
      );
      const repoUrl = `${s.rootUrl}acme/app`;
      const action = texts().find((m) => m.text.includes('Action Succeeded'));
      assert.equal(action?.channel, 'builds');
      assert.match(
        action?.text ?? '',
        new RegExp(`^<${repoUrl}/actions/runs/\\d+\\|[^>]+> Action Succeeded in <${repoUrl}\\|acme/app> main$`),
      );
      const completed = texts().find((m) => m.text.startsWith('Workflow Run completed'));
      assert.match(
        completed?.text ?? '',
        new RegExp(
          `^Workflow Run completed: <${repoUrl}/actions/runs/\\d+\\|.+\\(#\\d+\\)\\[[0-9a-f]{10}\\]:success> by <${s.rootUrl}owner\\|owner>$`,
        ),
      );
      assert.ok(
        texts().some((m) => m.text.startsWith('Workflow Run requested: ')),
        'the requested run was announced too',
      );
      for (const d of receiver.received)
        assert.equal(
          d.headers['x-forgejo-event-type'] === 'workflow_run' ||
            d.headers['x-forgejo-event-type'] === 'action_run_success',
          true,
        );
    });
  });
}
