// Webhook delivery end to end: a git push to an organization repository
// reaches a local receiver signed (HMAC-SHA256 of the raw body), with the
// Forgejo/Gitea/GitHub headers and one delivery id; failures are retried with
// the same delivery id; a loopback target under the default `external` allow
// list is refused and recorded. Every test runs on every database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Agent } from 'undici';
import type { Dispatcher } from 'undici';
import { migrateToLatest, openDatabase } from '../../src/models/database.ts';
import type { DatabaseHandle } from '../../src/models/database.ts';
import { claimDueHookTasks, claimExpiredHookTasks, HookTaskStatus, insertHookTask, insertHookTasks, recordHookTaskAttempts } from '../../src/models/hook-tasks.ts';
import type { AttemptRecord } from '../../src/models/hook-tasks.ts';
import { insertWebhook } from '../../src/models/webhooks.ts';
import { systemClock } from '../../src/modules/clock.ts';
import { HookDeliveryService } from '../../src/services/webhooks/deliveries.ts';
import { WebhookDeliveryWorker } from '../../src/services/webhooks/delivery-worker.ts';
import { retryDelayMs, DEFAULT_RETRY_POLICY } from '../../src/services/webhooks/retry.ts';
import { buildRequest, sendRequest } from '../../src/services/webhooks/sender.ts';
import { createGuardedAgent, isAddressAllowed, parseAllowedHosts } from '../../src/services/webhooks/ssrf.ts';
import { freePort } from '../support/free-port.ts';
import { createScratchPgDatabase } from '../support/pg-database.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestDialect, TestServer, TestUser } from '../support/server.ts';
import { startWebhookReceiver, verifySignature } from '../support/webhook-receiver.ts';
import type { WebhookReceiver } from '../support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import { GANTRY, waitForHealthy } from '../support/gantry-process.ts';

const SECRET = 'hook-secret-0123456789';

/** An undici agent that counts the requests it sends (which worker delivered what). */
class CountingAgent extends Agent {
  requests = 0;
  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    this.requests += 1;
    return super.dispatch(options, handler);
  }
}

/** A bare migrated database of `dialect`, for worker tests that must not share rows with a server's own worker. */
async function openScratchDatabase(dialect: TestDialect): Promise<{ handle: DatabaseHandle; url: string | null; dataDir: string | null; drop(): Promise<void> }> {
  if (dialect === 'postgres') {
    const adminUrl = process.env.GANTRY_TEST_PG_URL;
    if (!adminUrl) throw new Error('GANTRY_TEST_PG_URL is not set');
    const scratch = await createScratchPgDatabase(adminUrl);
    const handle = openDatabase({ databaseUrl: scratch.url, dataDir: '' });
    await migrateToLatest(handle.db);
    return { handle, url: scratch.url, dataDir: null, drop: async () => (await handle.destroy(), await scratch.drop()) };
  }
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-hooks-'));
  const handle = openDatabase({ databaseUrl: null, dataDir });
  await migrateToLatest(handle.db);
  return { handle, url: null, dataDir, drop: async () => (await handle.destroy(), await fs.rm(dataDir, { recursive: true, force: true })) };
}

describe('webhook retry policy and allow list (unit)', () => {
  test('8 attempts over about a day by default, then none', () => {
    const waits = [1, 2, 3, 4, 5, 6, 7].map((n) => retryDelayMs(DEFAULT_RETRY_POLICY, n, null, () => 0) ?? -1);
    assert.ok(waits.every((w, i) => w > 0 && (i === 0 || w > (waits[i - 1] ?? 0))), String(waits));
    const total = waits.reduce((a, b) => a + b, 0);
    assert.ok(total > 12 * 3600_000 && total < 30 * 3600_000, `total ${total}`);
    assert.equal(retryDelayMs(DEFAULT_RETRY_POLICY, 8), null);
    // Jitter only shortens, by at most 20 %.
    const jittered = retryDelayMs(DEFAULT_RETRY_POLICY, 1, null, () => 1) ?? 0;
    assert.ok(jittered >= 12_000 && jittered <= 15_000);
  });

  test('external refuses loopback, private, link-local, CGNAT and NAT64; the other entries allow them', () => {
    const external = parseAllowedHosts('external');
    for (const ip of ['127.0.0.1', '::1', '10.1.2.3', '192.168.1.1', '169.254.169.254', '100.64.0.1', '64:ff9b::a00:1', '::ffff:127.0.0.1', 'fd00::1', '0.0.0.0'])
      assert.equal(isAddressAllowed(external, ip), false, ip);
    for (const ip of ['8.8.8.8', '2606:4700::1111']) assert.equal(isAddressAllowed(external, ip), true, ip);
    assert.equal(isAddressAllowed(parseAllowedHosts('loopback'), '127.0.0.2'), true);
    assert.equal(isAddressAllowed(parseAllowedHosts('private'), '172.16.5.4'), true);
    assert.equal(isAddressAllowed(parseAllowedHosts('10.0.0.0/8, 2001:db8::/32'), '2001:db8::5'), true);
    assert.equal(isAddressAllowed(parseAllowedHosts('*'), '127.0.0.1'), true);
  });

  test('a host name is judged by the address it resolves to at connect time; a name glob allows it', async () => {
    const receiver = await startWebhookReceiver();
    const port = new URL(receiver.url).port;
    const request = buildRequest({ url: `http://localhost:${port}/x`, contentType: 'json', uuid: 'u', eventType: 'push', payload: '{}', secret: '', authorizationHeader: '', hookId: 1, ownerId: 1, attempt: 1 });
    const external = createGuardedAgent('external');
    const byName = createGuardedAgent('external, LOCALHOST');
    try {
      const refused = await sendRequest(request, { dispatcher: external });
      assert.equal(refused.status, 0);
      assert.match(refused.error, /deny 'localhost\((127\.0\.0\.1|::1)/);
      assert.equal((await sendRequest(request, { dispatcher: byName })).status, 200);
      assert.equal(receiver.received.length, 1);
    } finally {
      await external.close();
      await byName.close();
      await receiver.close();
    }
  });
});

for (const dialect of testDialects()) {
  describe(`webhook delivery of a push [${dialect}]`, () => {
    let s: TestServer;
    let owner: TestUser;
    let receiver: WebhookReceiver;
    let hookId = 0;

    before(async () => {
      s = await startTestServer(dialect, { GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' });
      owner = await s.createUser('owner');
      receiver = await startWebhookReceiver();
      assert.equal((await s.api('POST', '/orgs', { token: owner.token, body: { username: 'acme' } })).status, 201);
      assert.equal((await s.api('POST', '/orgs/acme/repos', { token: owner.token, body: { name: 'app' } })).status, 201);
      const hook = await s.api('POST', '/orgs/acme/hooks', {
        token: owner.token,
        body: { type: 'forgejo', config: { url: `${receiver.url}/hook`, content_type: 'json', secret: SECRET }, events: ['push', 'create'], authorization_header: 'Bearer xyz', active: true },
      });
      assert.equal(hook.status, 201, hook.text);
      hookId = (hook.json as { id: number }).id;
    });

    after(async () => {
      await s?.stop();
      await receiver?.close();
    });

    test('a push delivers a signed push payload (and create for the new branch) with one delivery id each', async () => {
      const work = await createWorkDir(remoteUrl(s.url, 'acme', 'app', { user: 'owner', password: owner.password }));
      const sha = await work.commit({ 'README.md': 'hello\n' }, 'First commit');
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      await receiver.waitFor((r) => r.length >= 2);
      const push = receiver.received.find((d) => d.headers['x-forgejo-event'] === 'push');
      const create = receiver.received.find((d) => d.headers['x-forgejo-event'] === 'create');
      assert.ok(push && create);
      const h = push.headers;
      assert.equal(push.method, 'POST');
      assert.equal(push.path, '/hook');
      assert.equal(h['content-type'], 'application/json');
      assert.ok(verifySignature(SECRET, push.rawBody, h['x-forgejo-signature'] as string), 'X-Forgejo-Signature is the HMAC-SHA256 of the raw body');
      assert.equal(h['x-gitea-signature'], h['x-forgejo-signature']);
      assert.equal(h['x-hub-signature-256'], `sha256=${h['x-forgejo-signature'] as string}`);
      assert.equal(h['x-hub-signature'], `sha1=${createHmac('sha1', SECRET).update(push.rawBody).digest('hex')}`);
      assert.match(h['x-forgejo-delivery'] as string, /^[0-9a-f-]{36}$/);
      for (const name of ['x-gitea-delivery', 'x-gogs-delivery', 'x-github-delivery']) assert.equal(h[name], h['x-forgejo-delivery']);
      for (const name of ['x-gitea-event', 'x-gogs-event', 'x-github-event', 'x-gitea-event-type']) assert.equal(h[name], 'push');
      assert.equal(h.authorization, 'Bearer xyz');
      assert.notEqual(create.headers['x-forgejo-delivery'], h['x-forgejo-delivery']);
      const payload = push.json as Record<string, unknown>;
      assert.equal(payload.ref, 'refs/heads/main');
      assert.equal(payload.after, sha);
      assert.equal(payload.before, '0000000000000000000000000000000000000000');
      assert.equal(payload.total_commits, 1);
      assert.equal((payload.head_commit as { id: string }).id, sha);
      assert.equal((payload.repository as { full_name: string }).full_name, 'acme/app');
      assert.equal((payload.pusher as { login: string }).login, 'owner');

      // The history: newest first, delivered, 1 attempt; Authorization never stored.
      await new Promise((resolve) => setTimeout(resolve, 200));
      const list = await s.api('GET', `/orgs/acme/hooks/${hookId}/deliveries`, { token: owner.token });
      assert.equal(list.status, 200, list.text);
      const deliveries = list.json as Array<{ id: number; guid: string; event: string; state: string; status_code: number; attempts: number }>;
      assert.equal(deliveries.length, 2);
      assert.ok((deliveries[0]?.id ?? 0) > (deliveries[1]?.id ?? 0));
      const listed = deliveries.find((d) => d.guid === h['x-forgejo-delivery']);
      assert.equal(listed?.state, 'delivered');
      assert.equal(listed?.status_code, 200);
      assert.equal(listed?.attempts, 1);
      const one = await s.api('GET', `/orgs/acme/hooks/${hookId}/deliveries/${listed?.id ?? 0}`, { token: owner.token });
      assert.equal(one.status, 200, one.text);
      const detail = one.json as { request: { headers: Record<string, string> }; response: { payload: string }; attempt_history: unknown[] };
      assert.equal(detail.request.headers.authorization, '******');
      assert.equal(detail.response.payload, 'status 200');
      assert.equal(detail.attempt_history.length, 1);
      await work.remove();
    });

    test('redeliver queues a new delivery of the same payload; ping queues a ping; others get 404', async () => {
      const list = (await s.api('GET', `/orgs/acme/hooks/${hookId}/deliveries`, { token: owner.token })).json as Array<{ id: number; guid: string }>;
      const first = list[0];
      assert.ok(first);
      const before = receiver.received.length;
      const again = await s.api('POST', `/orgs/acme/hooks/${hookId}/deliveries/${first.id}/attempts`, { token: owner.token });
      assert.equal(again.status, 202, again.text);
      const redelivery = again.json as { guid: string; redelivery: boolean };
      assert.equal(redelivery.redelivery, true);
      assert.notEqual(redelivery.guid, first.guid);
      const ping = await s.api('POST', `/orgs/acme/hooks/${hookId}/pings`, { token: owner.token });
      assert.equal(ping.status, 202, ping.text);
      await receiver.waitFor((r) => r.length >= before + 2);
      assert.ok(receiver.received.some((d) => d.headers['x-forgejo-delivery'] === redelivery.guid));
      assert.ok(receiver.received.some((d) => d.headers['x-github-event'] === 'ping' && (d.json as { hook_id: number }).hook_id === hookId));
      const stranger = await s.createUser('stranger');
      assert.equal((await s.api('GET', `/orgs/acme/hooks/${hookId}/deliveries`, { token: stranger.token })).status, 403);
      assert.equal((await s.api('GET', `/orgs/acme/hooks/${hookId}/deliveries/999999`, { token: owner.token })).status, 404);
      assert.equal((await s.api('GET', `/orgs/acme/hooks/999999/deliveries`, { token: owner.token })).status, 404);
    });
  });

  describe(`webhook delivery worker [${dialect}]`, () => {
    let scratch: Awaited<ReturnType<typeof openScratchDatabase>>;
    let receiver: WebhookReceiver;
    const secrets = { secretOf: () => SECRET, authorizationHeaderOf: () => '' };

    before(async () => {
      scratch = await openScratchDatabase(dialect);
      receiver = await startWebhookReceiver();
    });
    after(async () => {
      await receiver?.close();
      await scratch?.drop();
    });

    const addHook = (url: string) =>
      insertWebhook(scratch.handle.db, {
        ownerId: 7, repoId: 0, type: 'gitea', url, contentType: 'json', events: ['push'], branchFilter: '', meta: null, isActive: true, isSystemWebhook: false, nowSec: systemClock.nowSec(),
      });

    test('a receiver failing 3 times gets the same delivery id 4 times; the history shows 4 attempts', async () => {
      const db = scratch.handle.db;
      const hookId = await addHook(`${receiver.url}/flaky`);
      const payload = JSON.stringify({ ref: 'refs/heads/main' }, null, 2);
      const taskId = await insertHookTask(db, { hookId, uuid: '11111111-2222-4333-8444-555555555555', eventType: 'push', payload, nowMs: Date.now() });
      receiver.respond = (d) => (receiver.received.filter((r) => r.path === d.path).length <= 3 ? 500 : 204);
      const worker = new WebhookDeliveryWorker(db, systemClock, secrets, { allowedHosts: 'loopback', pollIntervalMs: 20, retry: { baseDelayMs: 30, factor: 1, jitter: 0 } });
      worker.start();
      try {
        await receiver.waitFor((r) => r.filter((d) => d.path === '/flaky').length >= 4);
        await new Promise((resolve) => setTimeout(resolve, 200));
      } finally {
        await worker.stop();
      }
      const got = receiver.received.filter((d) => d.path === '/flaky');
      assert.equal(got.length, 4);
      assert.deepEqual(new Set(got.map((d) => d.headers['x-gitea-delivery'])), new Set(['11111111-2222-4333-8444-555555555555']));
      assert.deepEqual(got.map((d) => d.headers['x-gantry-delivery-attempt']), ['1', '2', '3', '4']);
      for (const d of got) assert.ok(verifySignature(SECRET, d.rawBody, d.headers['x-gitea-signature'] as string));
      const detail = await new HookDeliveryService(db, systemClock, 'http://x/').get({ ownerId: 7, repoId: 0 }, hookId, taskId);
      assert.equal(detail.state, 'delivered');
      assert.equal(detail.attempts, 4);
      assert.deepEqual(detail.attempt_history.map((a) => a.response.status_code), [500, 500, 500, 204]);
      assert.deepEqual(detail.attempt_history.map((a) => a.attempt), [1, 2, 3, 4]);
    });

    test('under the default `external` list a hook to 127.0.0.1 is refused and recorded as a failed attempt', async () => {
      const db = scratch.handle.db;
      const hookId = await addHook(`${receiver.url}/refused`);
      const taskId = await insertHookTask(db, { hookId, uuid: '99999999-2222-4333-8444-555555555555', eventType: 'push', payload: '{}', nowMs: Date.now() });
      const worker = new WebhookDeliveryWorker(db, systemClock, secrets, { pollIntervalMs: 20, retry: { maxAttempts: 1 } });
      worker.start();
      const service = new HookDeliveryService(db, systemClock, 'http://x/');
      try {
        const deadline = Date.now() + 10_000;
        while ((await service.get({ ownerId: 7, repoId: 0 }, hookId, taskId)).state !== 'failed') {
          assert.ok(Date.now() < deadline, 'the refused delivery was not settled');
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
      } finally {
        await worker.stop();
      }
      assert.equal(receiver.received.filter((d) => d.path === '/refused').length, 0);
      const detail = await service.get({ ownerId: 7, repoId: 0 }, hookId, taskId);
      assert.equal(detail.attempt_history.length, 1);
      assert.equal(detail.attempt_history[0]?.response.status_code, 0);
      assert.match(detail.attempt_history[0]?.error ?? '', /can only call allowed HTTP servers.*GANTRY_WEBHOOK_ALLOWED_HOSTS.*deny '127\.0\.0\.1/);
      assert.match(detail.status, /allowed HTTP servers/);
    });

    test('two workers on one database deliver 1,000 queued rows between them, each exactly once', { timeout: 120_000 }, async () => {
      const db = scratch.handle.db;
      // PostgreSQL: a second pool, so the claims really race (SKIP LOCKED); SQLite: one
      // connection per process, so both workers share it and their claims interleave.
      const second = scratch.url ? openDatabase({ databaseUrl: scratch.url, dataDir: '' }) : null;
      const hookId = await addHook(`${receiver.url}/pair`);
      receiver.respond = () => 200;
      const uuids = Array.from({ length: 1000 }, () => randomUUID());
      await db.transaction().execute((tx) => insertHookTasks(tx, uuids.map((uuid) => ({ hookId, uuid, eventType: 'push', payload: JSON.stringify({ uuid }), nowMs: Date.now() }))));
      const agents = [new CountingAgent(), new CountingAgent()] as const;
      const workers = [
        new WebhookDeliveryWorker(db, systemClock, secrets, { pollIntervalMs: 20, dispatcher: agents[0] }),
        new WebhookDeliveryWorker(second?.db ?? db, systemClock, secrets, { pollIntervalMs: 20, dispatcher: agents[1] }),
      ];
      for (const worker of workers) worker.start();
      try {
        await receiver.waitFor((r) => r.filter((d) => d.path === '/pair').length >= uuids.length, 90_000);
        const settledBy = Date.now() + 30_000;
        const delivered = async () =>
          Number((await db.selectFrom('hook_task').select((eb) => eb.fn.countAll().as('n')).where('hook_id', '=', hookId).where('status', '=', HookTaskStatus.delivered).executeTakeFirst())?.n);
        while ((await delivered()) < uuids.length) {
          assert.ok(Date.now() < settledBy, 'not every delivery was recorded');
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
      } finally {
        for (const worker of workers) await worker.stop();
        for (const agent of agents) await agent.close();
        await second?.destroy();
      }
      const seen = new Map<string, number>();
      for (const d of receiver.received.filter((r) => r.path === '/pair')) {
        const id = d.headers['x-gitea-delivery'] as string;
        assert.equal((d.json as { uuid: string }).uuid, id, 'each body arrives with its own delivery id');
        seen.set(id, (seen.get(id) ?? 0) + 1);
      }
      assert.equal(seen.size, uuids.length);
      assert.deepEqual([...seen.values()].filter((n) => n !== 1), [], 'no delivery was sent twice');
      assert.ok(agents[0].requests > 0 && agents[1].requests > 0, `both workers delivered (${agents[0].requests} + ${agents[1].requests})`);
      assert.equal(agents[0].requests + agents[1].requests, uuids.length);
      const rows = await db.selectFrom('hook_task').select(['attempts', 'lease_owner']).where('hook_id', '=', hookId).execute();
      assert.ok(rows.every((r) => Number(r.attempts) === 1 && r.lease_owner === ''));
      const attempts = await db
        .selectFrom('hook_task_attempt')
        .innerJoin('hook_task', 'hook_task.id', 'hook_task_attempt.task_id')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('hook_task.hook_id', '=', hookId)
        .where('hook_task_attempt.attempt', '=', 1)
        .where('hook_task_attempt.response_status', '=', 200)
        .executeTakeFirst();
      assert.equal(Number(attempts?.n), uuids.length, 'one recorded attempt per delivery');
    });

    test('an attempt that finished after its lease was taken over is kept in the history; the row stays with the new holder', async () => {
      const db = scratch.handle.db;
      const hookId = await addHook(`${receiver.url}/taken-over`);
      const taskId = await insertHookTask(db, { hookId, uuid: randomUUID(), eventType: 'push', payload: '{}', nowMs: Date.now() });
      const t0 = Date.now();
      const attempt = (status: number): AttemptRecord => ({
        started: t0, durationMs: 3, requestUrl: `${receiver.url}/taken-over`, requestHeaders: {}, requestBody: '{}', responseStatus: status, responseHeaders: {}, responseBody: '', error: status === 200 ? '' : `the receiver answered ${status}`,
      });
      const [late] = (await claimDueHookTasks(db, 'slow-worker', t0, 1000, 100)).filter((t) => t.id === taskId);
      assert.ok(late, 'the first worker claimed the row');
      // Its lease runs out mid-attempt: another worker takes the row over.
      const [holder] = (await claimExpiredHookTasks(db, 'other-worker', t0 + 2000, 60_000, 100)).filter((t) => t.id === taskId);
      assert.ok(holder, 'the second worker took the row over');
      await recordHookTaskAttempts(db, 'slow-worker', [{ task: late, attempt: attempt(500), outcome: { kind: 'retry', nextAttemptAt: t0 + 60_000 }, nowMs: t0 + 2500 }]);
      const service = new HookDeliveryService(db, systemClock, 'http://x/');
      const during = await service.get({ ownerId: 7, repoId: 0 }, hookId, taskId);
      assert.equal(during.attempt_history.length, 1, 'the late attempt is in the history');
      assert.equal(during.attempt_history[0]?.response.status_code, 500);
      const row = await db.selectFrom('hook_task').select(['status', 'lease_owner', 'attempts']).where('id', '=', taskId).executeTakeFirstOrThrow();
      assert.deepEqual({ status: Number(row.status), owner: row.lease_owner, attempts: Number(row.attempts) }, { status: HookTaskStatus.delivering, owner: 'other-worker', attempts: 0 });
      await recordHookTaskAttempts(db, 'other-worker', [{ task: holder, attempt: attempt(200), outcome: { kind: 'delivered' }, nowMs: t0 + 3000 }]);
      const after = await service.get({ ownerId: 7, repoId: 0 }, hookId, taskId);
      assert.equal(after.state, 'delivered');
      assert.deepEqual(after.attempt_history.map((a) => a.response.status_code).sort(), [200, 500]);
    });

    test('a stopping worker finishes what it sent and gives back the rows it had claimed but not started', async () => {
      const db = scratch.handle.db;
      const hookId = await addHook(`${receiver.url}/release`);
      receiver.respond = () => new Promise((resolve) => setTimeout(() => resolve(200), 200));
      await insertHookTasks(db, Array.from({ length: 20 }, () => ({ hookId, uuid: randomUUID(), eventType: 'push', payload: '{}', nowMs: Date.now() })));
      const worker = new WebhookDeliveryWorker(db, systemClock, secrets, { allowedHosts: 'loopback', pollIntervalMs: 20, concurrency: 2, batchSize: 10 });
      worker.start();
      try {
        await receiver.waitFor((r) => r.some((d) => d.path === '/release'));
      } finally {
        await worker.stop();
      }
      const sent = receiver.received.filter((d) => d.path === '/release').length;
      const rows = await db.selectFrom('hook_task').select(['status', 'lease_owner', 'attempts']).where('hook_id', '=', hookId).execute();
      const byStatus = (status: number) => rows.filter((r) => Number(r.status) === status);
      assert.equal(byStatus(HookTaskStatus.delivering).length, 0, 'no row is left leased');
      assert.equal(byStatus(HookTaskStatus.delivered).length, sent, 'what was sent is recorded as delivered');
      assert.equal(byStatus(HookTaskStatus.pending).length, 20 - sent);
      assert.ok(sent <= 4, `${sent} sent with 2 slots`);
      assert.ok(byStatus(HookTaskStatus.pending).every((r) => r.lease_owner === '' && Number(r.attempts) === 0));
    });
  });
}

for (const dialect of testDialects()) {
  describe(`webhook outbox survives kill -9 [${dialect}]`, () => {
    test('1,000 queued deliveries: the server is killed mid-delivery, restarted, and every one arrives at least once, with one id each', { timeout: 180_000 }, async () => {
      const scratch = await openScratchDatabase(dialect);
      const receiver = await startWebhookReceiver();
      // Slow enough that deliveries are in flight (leased) when the kill lands.
      receiver.respond = () => new Promise((resolve) => setTimeout(() => resolve(200), 15));
      const children: ChildProcess[] = [];
      let logs = '';
      try {
        const db = scratch.handle.db;
        const hookId = await insertWebhook(db, {
          ownerId: 1, repoId: 0, type: 'forgejo', url: `${receiver.url}/crash`, contentType: 'json', events: ['push'], branchFilter: '', meta: null, isActive: true, isSystemWebhook: false, nowSec: systemClock.nowSec(),
        });
        const uuids = Array.from({ length: 1000 }, () => randomUUID());
        await db.transaction().execute(async (tx) => {
          for (const uuid of uuids) await insertHookTask(tx, { hookId, uuid, eventType: 'push', payload: JSON.stringify({ uuid }), nowMs: Date.now() });
        });
        const dataDir = scratch.dataDir ?? (await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-crash-')));
        const port = await freePort();
        const url = `http://127.0.0.1:${port}`;
        const env: NodeJS.ProcessEnv = { ...process.env, GANTRY_DATA_DIR: dataDir, GANTRY_HTTP_ADDR: '127.0.0.1', GANTRY_HTTP_PORT: String(port), GANTRY_LOG_LEVEL: 'warn', GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback' };
        delete env.GANTRY_DATABASE_URL;
        if (scratch.url) env.GANTRY_DATABASE_URL = scratch.url;
        const startGantry = async (): Promise<ChildProcess> => {
          const child = spawn(process.execPath, [GANTRY, 'web'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
          child.stdout?.on('data', (chunk: Buffer) => (logs += chunk.toString()));
          child.stderr?.on('data', (chunk: Buffer) => (logs += chunk.toString()));
          children.push(child);
          await waitForHealthy(url, child, () => logs);
          return child;
        };

        const first = await startGantry();
        await receiver.waitFor((r) => r.length >= 200, 60_000);
        const exited = new Promise((resolve) => first.once('exit', resolve));
        first.kill('SIGKILL');
        await exited;
        const atKill = receiver.received.length;
        const leased = await db.selectFrom('hook_task').select((eb) => eb.fn.countAll().as('n')).where('status', '=', 1).executeTakeFirst();
        assert.ok(atKill < 1000, `the kill came too late (${atKill} delivered)`);

        await startGantry();
        // Rows leased by the dead process come back when their lease (60 s by default) expires.
        const want = new Set<string>(uuids);
        await receiver.waitFor((r) => new Set(r.map((d) => d.headers['x-forgejo-delivery'] as string)).size >= want.size, 150_000);
        // …and every row is settled (those received just before the kill were never recorded: they go again).
        const settledBy = Date.now() + 150_000;
        const countDelivered = async () => Number((await db.selectFrom('hook_task').select((eb) => eb.fn.countAll().as('n')).where('status', '=', 2).executeTakeFirst())?.n);
        while ((await countDelivered()) < 1000) {
          assert.ok(Date.now() < settledBy, 'not every delivery was settled after the restart');
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
        const seen = new Map<string, number>();
        for (const d of receiver.received) {
          const id = d.headers['x-forgejo-delivery'] as string;
          assert.ok(want.has(id), `unknown delivery id ${id}`);
          assert.equal((d.json as { uuid: string }).uuid, id, 'each body arrives with its own delivery id');
          seen.set(id, (seen.get(id) ?? 0) + 1);
        }
        assert.equal(seen.size, 1000);
        const duplicates = [...seen.values()].filter((n) => n > 1).length;
        assert.ok(duplicates <= Number(leased?.n), 'only deliveries in flight at the kill may arrive twice');
        console.log(`[crash ${dialect}] killed after ${atKill} received, ${Number(leased?.n)} rows leased at the kill, ${duplicates} delivered twice`);
      } finally {
        for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        await receiver.close();
        await scratch.drop();
      }
    });
  });
}
