// Webhook delivery end to end: a git push to an organization repository
// reaches a local receiver signed (HMAC-SHA256 of the JSON payload), with the
// Forgejo/Gitea/GitHub headers and one delivery id; redelivery and pings; and
// the outbox surviving kill -9 of the server. Every test runs on every
// database. The worker, retry, allow-list and claim tests sit beside their
// files (src/services/webhooks/*.test.ts, src/models/hook-tasks.test.ts).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { insertHookTask } from '../../src/models/hook-tasks.ts';
import { insertWebhook } from '../../src/models/webhooks.ts';
import { systemClock } from '../../src/modules/clock.ts';
import { freePort } from '../support/free-port.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { startWebhookReceiver, verifySignature } from '../support/webhook-receiver.ts';
import type { WebhookReceiver } from '../support/webhook-receiver.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import { GANTRY, waitForHealthy } from '../support/gantry-process.ts';
import { openScratchDatabase } from '../support/scratch-database.ts';

const SECRET = 'hook-secret-0123456789';

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
      assert.equal(
        (await s.api('POST', '/orgs/acme/repos', { token: owner.token, body: { name: 'app' } })).status,
        201,
      );
      const hook = await s.api('POST', '/orgs/acme/hooks', {
        token: owner.token,
        body: {
          type: 'forgejo',
          config: { url: `${receiver.url}/hook`, content_type: 'json', secret: SECRET },
          events: ['push', 'create'],
          authorization_header: 'Bearer xyz',
          active: true,
        },
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
      assert.ok(
        verifySignature(SECRET, push.rawBody, h['x-forgejo-signature'] as string),
        'X-Forgejo-Signature is the HMAC-SHA256 of the raw body',
      );
      assert.equal(h['x-gitea-signature'], h['x-forgejo-signature']);
      assert.equal(h['x-hub-signature-256'], `sha256=${h['x-forgejo-signature'] as string}`);
      assert.equal(h['x-hub-signature'], `sha1=${createHmac('sha1', SECRET).update(push.rawBody).digest('hex')}`);
      assert.match(h['x-forgejo-delivery'] as string, /^[0-9a-f-]{36}$/);
      for (const name of ['x-gitea-delivery', 'x-gogs-delivery', 'x-github-delivery'])
        assert.equal(h[name], h['x-forgejo-delivery']);
      for (const name of ['x-gitea-event', 'x-gogs-event', 'x-github-event', 'x-gitea-event-type'])
        assert.equal(h[name], 'push');
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
      const deliveries = list.json as Array<{
        id: number;
        guid: string;
        event: string;
        state: string;
        status_code: number;
        attempts: number;
      }>;
      assert.equal(deliveries.length, 2);
      assert.ok((deliveries[0]?.id ?? 0) > (deliveries[1]?.id ?? 0));
      const listed = deliveries.find((d) => d.guid === h['x-forgejo-delivery']);
      assert.equal(listed?.state, 'delivered');
      assert.equal(listed?.status_code, 200);
      assert.equal(listed?.attempts, 1);
      const one = await s.api('GET', `/orgs/acme/hooks/${hookId}/deliveries/${listed?.id ?? 0}`, {
        token: owner.token,
      });
      assert.equal(one.status, 200, one.text);
      const detail = one.json as {
        request: { headers: Record<string, string> };
        response: { payload: string };
        attempt_history: unknown[];
      };
      assert.equal(detail.request.headers.authorization, '******');
      assert.equal(detail.response.payload, 'status 200');
      assert.equal(detail.attempt_history.length, 1);
      await work.remove();
    });

    test('a form hook gets payload=<url-encoded JSON>, signed over the JSON (as Forgejo signs it), so a receiver written for Forgejo verifies it', async () => {
      const created = await s.api('POST', '/orgs/acme/hooks', {
        token: owner.token,
        body: {
          type: 'gitea',
          config: { url: `${receiver.url}/form`, content_type: 'form', secret: SECRET },
          events: ['push'],
          active: true,
        },
      });
      assert.equal(created.status, 201, created.text);
      const formHookId = (created.json as { id: number }).id;
      assert.equal((await s.api('POST', `/orgs/acme/hooks/${formHookId}/pings`, { token: owner.token })).status, 202);
      await receiver.waitFor((r) => r.some((d) => d.path === '/form'));
      const got = receiver.received.find((d) => d.path === '/form');
      assert.ok(got);
      assert.equal(got.headers['content-type'], 'application/x-www-form-urlencoded');
      const json = new URLSearchParams(got.rawBody.toString('utf8')).get('payload') ?? '';
      assert.equal((JSON.parse(json) as { hook_id: number }).hook_id, formHookId);
      // Forgejo (services/webhook/shared/payloader.go AddDefaultHeaders) signs the JSON, not the form body.
      assert.ok(
        verifySignature(SECRET, Buffer.from(json, 'utf8'), got.headers['x-gitea-signature'] as string),
        'X-Gitea-Signature is the HMAC-SHA256 of the JSON payload',
      );
      assert.equal(got.headers['x-forgejo-signature'], got.headers['x-gitea-signature']);
      assert.equal(got.headers['x-hub-signature-256'], `sha256=${got.headers['x-gitea-signature'] as string}`);
      assert.equal(got.headers['x-hub-signature'], `sha1=${createHmac('sha1', SECRET).update(json).digest('hex')}`);
      assert.ok(
        !verifySignature(SECRET, got.rawBody, got.headers['x-gitea-signature'] as string),
        'not over the form body',
      );
      assert.equal((await s.api('DELETE', `/orgs/acme/hooks/${formHookId}`, { token: owner.token })).status, 204);
    });

    test('redeliver queues a new delivery of the same payload; ping queues a ping; others get 404', async () => {
      const list = (await s.api('GET', `/orgs/acme/hooks/${hookId}/deliveries`, { token: owner.token })).json as Array<{
        id: number;
        guid: string;
      }>;
      const first = list[0];
      assert.ok(first);
      const before = receiver.received.length;
      const again = await s.api('POST', `/orgs/acme/hooks/${hookId}/deliveries/${first.id}/attempts`, {
        token: owner.token,
      });
      assert.equal(again.status, 202, again.text);
      const redelivery = again.json as { guid: string; redelivery: boolean };
      assert.equal(redelivery.redelivery, true);
      assert.notEqual(redelivery.guid, first.guid);
      const ping = await s.api('POST', `/orgs/acme/hooks/${hookId}/pings`, { token: owner.token });
      assert.equal(ping.status, 202, ping.text);
      await receiver.waitFor((r) => r.length >= before + 2);
      assert.ok(receiver.received.some((d) => d.headers['x-forgejo-delivery'] === redelivery.guid));
      assert.ok(
        receiver.received.some(
          (d) => d.headers['x-github-event'] === 'ping' && (d.json as { hook_id: number }).hook_id === hookId,
        ),
      );
      const stranger = await s.createUser('stranger');
      assert.equal(
        (await s.api('GET', `/orgs/acme/hooks/${hookId}/deliveries`, { token: stranger.token })).status,
        403,
      );
      assert.equal(
        (await s.api('GET', `/orgs/acme/hooks/${hookId}/deliveries/999999`, { token: owner.token })).status,
        404,
      );
      assert.equal((await s.api('GET', `/orgs/acme/hooks/999999/deliveries`, { token: owner.token })).status, 404);
    });
  });
}

for (const dialect of testDialects()) {
  describe(`webhook outbox survives kill -9 [${dialect}]`, () => {
    test(
      '1,000 queued deliveries: the server is killed mid-delivery, restarted, and every one arrives at least once, with one id each',
      { timeout: 180_000 },
      async () => {
        const scratch = await openScratchDatabase(dialect);
        const receiver = await startWebhookReceiver();
        // Slow enough that deliveries are in flight (leased) when the kill lands.
        receiver.respond = () => new Promise((resolve) => setTimeout(() => resolve(200), 15));
        const children: ChildProcess[] = [];
        let logs = '';
        try {
          const db = scratch.handle.db;
          const hookId = await insertWebhook(db, {
            ownerId: 1,
            repoId: 0,
            type: 'forgejo',
            url: `${receiver.url}/crash`,
            contentType: 'json',
            events: ['push'],
            branchFilter: '',
            meta: null,
            isActive: true,
            isSystemWebhook: false,
            nowSec: systemClock.nowSec(),
          });
          const uuids = Array.from({ length: 1000 }, () => randomUUID());
          await db.transaction().execute(async (tx) => {
            for (const uuid of uuids)
              await insertHookTask(tx, {
                hookId,
                uuid,
                eventType: 'push',
                payload: JSON.stringify({ uuid }),
                nowMs: Date.now(),
              });
          });
          const dataDir = scratch.dataDir ?? (await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-crash-')));
          const port = await freePort();
          const url = `http://127.0.0.1:${port}`;
          const env: NodeJS.ProcessEnv = {
            ...process.env,
            GANTRY_DATA_DIR: dataDir,
            GANTRY_HTTP_ADDR: '127.0.0.1',
            GANTRY_HTTP_PORT: String(port),
            GANTRY_LOG_LEVEL: 'warn',
            GANTRY_WEBHOOK_ALLOWED_HOSTS: 'loopback',
          };
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
          const leased = await db
            .selectFrom('hook_task')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('status', '=', 1)
            .executeTakeFirst();
          assert.ok(atKill < 1000, `the kill came too late (${atKill} delivered)`);

          await startGantry();
          // Rows leased by the dead process come back when their lease (60 s by default) expires.
          const want = new Set<string>(uuids);
          await receiver.waitFor(
            (r) => new Set(r.map((d) => d.headers['x-forgejo-delivery'] as string)).size >= want.size,
            150_000,
          );
          // …and every row is settled (those received just before the kill were never recorded: they go again).
          const settledBy = Date.now() + 150_000;
          const countDelivered = async () =>
            Number(
              (
                await db
                  .selectFrom('hook_task')
                  .select((eb) => eb.fn.countAll().as('n'))
                  .where('status', '=', 2)
                  .executeTakeFirst()
              )?.n,
            );
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
          console.log(
            `[crash ${dialect}] killed after ${atKill} received, ${Number(leased?.n)} rows leased at the kill, ${duplicates} delivered twice`,
          );
        } finally {
          for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
          await receiver.close();
          await scratch.drop();
        }
      },
    );
  });
}
