// GET /metrics as Prometheus scrapes it: off (404) without GANTRY_METRICS_TOKEN,
// 401 without the right bearer token, and with it a text exposition that
// parses, counts requests by route template (never the raw URL), and reflects
// the webhook outbox, waiting jobs by label, and runners. Every database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCurrentUserRepo, dispatchWorkflow, repoGetRunnerRegistrationToken } from '@llamaduck/forgejo-ts';
import { registerRunner } from '../support/runner-client.ts';
import { basicAuth, startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { startWebhookReceiver } from '../support/webhook-receiver.ts';
import type { WebhookReceiver } from '../support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';

const METRICS_TOKEN = 'metrics-token-5f0c1d8e7a';
/** The database gauges are cached for 5 s: allow several refreshes on a busy machine. */
const DEADLINE_MS = 60_000;

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

interface Exposition {
  types: Map<string, string>;
  samples: Sample[];
}

const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL_PAIR = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/y;

/** A strict reader of the Prometheus text format (0.0.4): every line is a comment, a TYPE/HELP, or a sample of a typed family. */
function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  assert.ok(text.endsWith('\n'), 'the exposition ends with a newline');
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('# HELP ')) continue;
    if (line.startsWith('# TYPE ')) {
      const [name, type] = line.slice('# TYPE '.length).split(' ');
      assert.ok(name && type && ['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(type), line);
      assert.ok(!types.has(name), `one TYPE line per family: ${name}`);
      types.set(name, type);
      continue;
    }
    assert.ok(!line.startsWith('#'), `unexpected comment: ${line}`);
    const match = SAMPLE_LINE.exec(line);
    assert.ok(match, `not a sample line: ${line}`);
    const [, name = '', rawLabels = '', rawValue = ''] = match;
    const labels: Record<string, string> = {};
    LABEL_PAIR.lastIndex = 0;
    while (LABEL_PAIR.lastIndex < rawLabels.length) {
      const pair = LABEL_PAIR.exec(rawLabels);
      assert.ok(pair, `bad labels: ${line}`);
      labels[pair[1] ?? ''] = (pair[2] ?? '').replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    }
    // Prometheus reads values with Go's ParseFloat: NaN and Inf in any case.
    const value = /^[+-]?inf$/i.test(rawValue)
      ? rawValue.startsWith('-')
        ? -Infinity
        : Infinity
      : /^nan$/i.test(rawValue)
        ? NaN
        : Number(rawValue);
    assert.ok(/^nan$/i.test(rawValue) || !Number.isNaN(value), `bad value: ${line}`);
    const family = [name, name.replace(/_(bucket|sum|count|total|created)$/, '')].find((n) => types.has(n));
    assert.ok(family, `sample without a TYPE: ${line}`);
    samples.push({ name, labels, value });
  }
  return { types, samples };
}

/** The value of the one sample with this name and these labels (exactly), or undefined. */
function valueOf(exposition: Exposition, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = JSON.stringify(Object.entries(labels).sort());
  return exposition.samples.find((s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === wanted)
    ?.value;
}

function seriesOf(exposition: Exposition, name: string): Sample[] {
  return exposition.samples.filter((s) => s.name === name);
}

async function scrape(
  s: TestServer,
  authorization = `Bearer ${METRICS_TOKEN}`,
): Promise<{ status: number; headers: Headers; text: string }> {
  const res = await fetch(`${s.url}/metrics`, { headers: authorization ? { authorization } : {} });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

async function metrics(s: TestServer): Promise<Exposition> {
  const res = await scrape(s);
  assert.equal(res.status, 200, res.text);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4; charset=utf-8$/);
  return parseExposition(res.text);
}

/** Scrapes until `check` passes (the database gauges refresh every few seconds); fails with its last complaint. */
async function eventually(s: TestServer, check: (m: Exposition) => void): Promise<Exposition> {
  const deadline = Date.now() + DEADLINE_MS;
  for (;;) {
    const m = await metrics(s);
    try {
      check(m);
      return m;
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

const WORKFLOW = `on: workflow_dispatch
jobs:
  pair:
    runs-on: [metrics-b, metrics-a]
    steps: [ { run: echo pair } ]
  solo:
    runs-on: metrics-solo
    steps: [ { run: echo solo } ]
  after:
    runs-on: metrics-solo
    needs: [solo]
    steps: [ { run: echo after } ]
`;

for (const dialect of testDialects()) {
  describe(`GET /metrics [${dialect}]`, () => {
    test('without GANTRY_METRICS_TOKEN: 404 saying how to turn it on, whatever the credentials', async () => {
      const s = await startTestServer(dialect);
      try {
        for (const authorization of ['', `Bearer ${METRICS_TOKEN}`, `token ${s.admin.token}`]) {
          const res = await scrape(s, authorization);
          assert.equal(res.status, 404);
          const body = JSON.parse(res.text) as { message: string; url: string };
          assert.deepEqual(Object.keys(body).sort(), ['message', 'url']);
          assert.match(body.message, /metrics are disabled: set GANTRY_METRICS_TOKEN/);
          assert.equal(body.url, `${s.rootUrl}api/swagger`);
        }
      } finally {
        await s.stop();
      }
    });

    describe('with GANTRY_METRICS_TOKEN', () => {
      let s: TestServer;
      let alice: TestUser;

      before(async () => {
        s = await startTestServer(dialect, {
          GANTRY_METRICS_TOKEN: METRICS_TOKEN,
          GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback',
          // One delivery at a time, and a slow receiver may hold it: deliveries queue up behind it.
          GANTRY_WEBHOOK_CONCURRENCY: '1',
          GANTRY_WEBHOOK_DELIVER_TIMEOUT: '300',
        });
        alice = await s.createUser('alice');
        assert.equal(
          (
            await createCurrentUserRepo({
              client: alice.client,
              body: { name: 'app', auto_init: true, default_branch: 'main' },
            })
          ).status,
          201,
        );
      });

      after(async () => {
        await s?.stop();
      });

      test('401 with a clear message without the bearer token, with a wrong one, or with other credentials', async () => {
        const cases: [string, RegExp][] = [
          ['', /needs "Authorization: Bearer <token>"/],
          ['Bearer', /needs "Authorization: Bearer <token>"/],
          [`token ${METRICS_TOKEN}`, /needs "Authorization: Bearer <token>"/],
          [basicAuth('alice', METRICS_TOKEN), /needs "Authorization: Bearer <token>"/],
          ['Bearer wrong-token', /not the server's GANTRY_METRICS_TOKEN/],
          [`Bearer ${METRICS_TOKEN}x`, /not the server's GANTRY_METRICS_TOKEN/],
          [`Bearer ${alice.token}`, /not the server's GANTRY_METRICS_TOKEN/],
        ];
        for (const [authorization, message] of cases) {
          const res = await scrape(s, authorization);
          assert.equal(res.status, 401, authorization);
          assert.match((JSON.parse(res.text) as { message: string }).message, message, authorization);
          assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer /);
          assert.ok(!res.text.includes('gantry_'), 'no metric leaks into a refusal');
        }
        // The scheme is case-insensitive, as in RFC 9110.
        assert.equal((await scrape(s, `bearer ${METRICS_TOKEN}`)).status, 200);
      });

      test('the exposition parses; requests are counted and timed by route template, never by raw URL', async () => {
        const before = await metrics(s);
        for (const type of [
          'process_cpu_user_seconds_total',
          'process_resident_memory_bytes',
          'nodejs_heap_size_used_bytes',
        ]) {
          assert.ok(seriesOf(before, type).length > 0, `default metric ${type}`);
        }
        assert.equal(before.types.get('gantry_http_requests_total'), 'counter');
        assert.equal(before.types.get('gantry_http_request_duration_seconds'), 'histogram');
        const route = '/api/v1/repos/:owner/:repo';
        const count = (m: Exposition, labels: Record<string, string>) =>
          valueOf(m, 'gantry_http_requests_total', labels) ?? 0;
        const okBefore = count(before, { method: 'GET', route, status: '200' });
        const missingBefore = count(before, { method: 'GET', route, status: '404' });
        const unmatchedBefore = count(before, { method: 'GET', route: 'unmatched', status: '404' });
        const timedBefore =
          valueOf(before, 'gantry_http_request_duration_seconds_count', { method: 'GET', route }) ?? 0;

        for (let i = 0; i < 3; i += 1)
          assert.equal((await s.api('GET', '/repos/alice/app', { token: alice.token })).status, 200);
        assert.equal((await s.api('GET', '/repos/alice/repo-name-in-url', { token: alice.token })).status, 404);
        assert.equal((await fetch(`${s.url}/no-such-path-7b1e/x?token=query-token-7b1e`)).status, 404);

        const after = await metrics(s);
        assert.equal(count(after, { method: 'GET', route, status: '200' }) - okBefore, 3);
        assert.equal(count(after, { method: 'GET', route, status: '404' }) - missingBefore, 1);
        assert.equal(count(after, { method: 'GET', route: 'unmatched', status: '404' }) - unmatchedBefore, 1);
        assert.equal(
          (valueOf(after, 'gantry_http_request_duration_seconds_count', { method: 'GET', route }) ?? 0) - timedBefore,
          4,
        );
        const text = (await scrape(s)).text;
        for (const raw of ['repo-name-in-url', 'no-such-path-7b1e', 'query-token-7b1e', alice.token])
          assert.ok(!text.includes(raw), `${raw} is not in the metrics`);

        // A histogram's buckets are cumulative and end at +Inf = _count.
        const buckets = seriesOf(after, 'gantry_http_request_duration_seconds_bucket').filter(
          (b) => b.labels.route === route && b.labels.method === 'GET',
        );
        assert.ok(buckets.length > 5);
        for (let i = 1; i < buckets.length; i += 1) assert.ok((buckets[i]?.value ?? 0) >= (buckets[i - 1]?.value ?? 0));
        assert.equal(buckets.at(-1)?.labels.le, '+Inf');
        assert.equal(
          buckets.at(-1)?.value,
          valueOf(after, 'gantry_http_request_duration_seconds_count', { method: 'GET', route }),
        );
        assert.equal(valueOf(after, 'gantry_metrics_database_up'), 1);
      });

      test('waiting jobs by label set, jobs by status and runners by status follow a dispatched workflow and its runners', async () => {
        const work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
        try {
          await work.git(['fetch', '-q', 'origin', 'main']);
          await work.git(['reset', '-q', '--hard', 'origin/main']);
          await work.commit({ '.forgejo/workflows/metrics.yml': WORKFLOW }, 'Add a workflow');
          const pushed = await work.push('main');
          assert.equal(pushed.code, 0, pushed.stderr);
        } finally {
          await work.remove();
        }
        const dispatched = await dispatchWorkflow({
          client: alice.client,
          path: { owner: 'alice', repo: 'app', workflowfilename: 'metrics.yml' },
          body: { ref: 'main', inputs: {} },
        });
        assert.equal(dispatched.status, 204, JSON.stringify(dispatched.error));

        await eventually(s, (m) => {
          assert.equal(
            valueOf(m, 'gantry_actions_jobs_waiting', { labels: 'metrics-a,metrics-b' }),
            1,
            'runs-on sorted and joined',
          );
          assert.equal(valueOf(m, 'gantry_actions_jobs_waiting', { labels: 'metrics-solo' }), 1);
          assert.deepEqual(
            ['waiting', 'running', 'blocked'].map((status) => valueOf(m, 'gantry_actions_jobs', { status })),
            [2, 0, 1],
          );
          assert.deepEqual(
            ['online', 'offline', 'idle', 'active'].map((status) => valueOf(m, 'gantry_runners', { status })),
            [0, 0, 0, 0],
          );
        });

        const tokenRes = await repoGetRunnerRegistrationToken({
          client: alice.client,
          path: { owner: 'alice', repo: 'app' },
        });
        assert.equal(tokenRes.status, 200);
        const registrationToken = (tokenRes.data as { token: string }).token;
        // Registered and never heard from since: offline.
        await registerRunner(s.url, registrationToken, { name: 'silent', labels: ['metrics-none'] });
        const runner = await registerRunner(s.url, registrationToken, { name: 'worker', labels: ['metrics-solo'] });
        await runner.runner.declare({ version: 'v12.0.0-test', labels: ['metrics-solo'] });
        await eventually(s, (m) => {
          assert.deepEqual(
            ['online', 'offline', 'idle', 'active'].map((status) => valueOf(m, 'gantry_runners', { status })),
            [1, 1, 1, 0],
          );
        });

        const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
        assert.ok(fetched.task, 'the runner got the solo job');
        // A report makes the runner active.
        await runner.runner.updateTask({
          state: {
            id: fetched.task.id,
            result: 0,
            startedAt: { seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 },
            steps: [],
          },
        });
        await eventually(s, (m) => {
          assert.equal(
            valueOf(m, 'gantry_actions_jobs_waiting', { labels: 'metrics-solo' }),
            undefined,
            'a label set with no waiting job is gone',
          );
          assert.equal(valueOf(m, 'gantry_actions_jobs_waiting', { labels: 'metrics-a,metrics-b' }), 1);
          assert.deepEqual(
            ['waiting', 'running', 'blocked'].map((status) => valueOf(m, 'gantry_actions_jobs', { status })),
            [1, 1, 1],
          );
          assert.deepEqual(
            ['online', 'offline', 'idle', 'active'].map((status) => valueOf(m, 'gantry_runners', { status })),
            [1, 1, 0, 1],
          );
        });
      });

      test('the webhook outbox by state: pending, retrying, delivering, delivered, failed', async () => {
        const receiver: WebhookReceiver = await startWebhookReceiver();
        let release: (status: number) => void = () => undefined;
        const held = new Promise<number>((resolve) => (release = resolve));
        receiver.respond = (delivery) => (delivery.path === '/bad' ? 500 : delivery.path === '/hold' ? held : 200);
        try {
          assert.equal(
            (await s.api('POST', '/orgs', { token: alice.token, body: { username: 'metrics-org' } })).status,
            201,
          );
          const createHook = async (type: string, config: Record<string, string>): Promise<number> => {
            const res = await s.api('POST', '/orgs/metrics-org/hooks', {
              token: alice.token,
              body: { type, config: { content_type: 'json', ...config }, events: ['push'], active: true },
            });
            assert.equal(res.status, 201, res.text);
            return (res.json as { id: number }).id;
          };
          const ping = async (hookId: number) =>
            assert.equal(
              (await s.api('POST', `/orgs/metrics-org/hooks/${hookId}/pings`, { token: alice.token })).status,
              202,
            );
          const states = (m: Exposition) =>
            Object.fromEntries(
              ['pending', 'retrying', 'delivering', 'delivered', 'failed'].map((state) => [
                state,
                valueOf(m, 'gantry_webhook_deliveries', { state }),
              ]),
            );

          const ok = await createHook('forgejo', { url: `${receiver.url}/ok` });
          const bad = await createHook('forgejo', { url: `${receiver.url}/bad` });
          const slack = await createHook('slack', { url: `${receiver.url}/slack`, channel: '#ci' });
          const hold = await createHook('forgejo', { url: `${receiver.url}/hold` });

          await ping(ok);
          await receiver.waitFor((r) => r.some((d) => d.path === '/ok'), DEADLINE_MS);
          await ping(bad);
          await receiver.waitFor((r) => r.some((d) => d.path === '/bad'), DEADLINE_MS);
          await ping(slack);
          await eventually(s, (m) =>
            assert.deepEqual(states(m), { pending: 0, retrying: 1, delivering: 0, delivered: 1, failed: 1 }),
          );

          // The one delivery slot is held by a slow receiver: what the worker
          // claimed behind it is delivering (leased), the rest waits pending.
          await ping(hold);
          await receiver.waitFor((r) => r.some((d) => d.path === '/hold'), DEADLINE_MS);
          for (let i = 0; i < 20; i += 1) await ping(ok);
          await eventually(s, (m) => {
            const now = states(m);
            // `bad` is retrying, or due again (pending) or claimed (delivering) once its back-off ends.
            assert.equal((now.pending ?? 0) + (now.retrying ?? 0) + (now.delivering ?? 0), 22, JSON.stringify(now));
            assert.ok((now.delivering ?? 0) >= 1 && (now.pending ?? 0) >= 1, JSON.stringify(now));
            assert.deepEqual([now.delivered, now.failed], [1, 1]);
          });

          release(200);
          await eventually(s, (m) =>
            assert.deepEqual(states(m), { pending: 0, retrying: 1, delivering: 0, delivered: 22, failed: 1 }),
          );
        } finally {
          release(200);
          await receiver.close();
        }
      });
    });
  });
}
