// The delivery worker against a real database of each dialect and a local
// receiver: retries keep one delivery id, a refused target fails at once, two
// workers on one database share a backlog with each row sent exactly once,
// and a stopping worker gives back what it had not started.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Agent } from 'undici';
import type { Dispatcher } from 'undici';
import { openDatabase } from '../../models/database.ts';
import { HookTaskStatus, insertHookTask, insertHookTasks } from '../../models/hook-tasks.ts';
import { insertWebhook } from '../../models/webhooks.ts';
import { systemClock } from '../../modules/clock.ts';
import { orgScope } from '../../modules/scope.ts';
import { openScratchDatabase } from '../../../test/support/scratch-database.ts';
import { testDialects } from '../../../test/support/server.ts';
import { startWebhookReceiver, verifySignature } from '../../../test/support/webhook-receiver.ts';
import type { WebhookReceiver } from '../../../test/support/webhook-receiver.ts';
import { HookDeliveryService } from './deliveries.ts';
import { WebhookDeliveryWorker } from './delivery-worker.ts';

const SECRET = 'hook-secret-0123456789';

/** An undici agent that counts the requests it sends (which worker delivered what). */
class CountingAgent extends Agent {
  requests = 0;
  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    this.requests += 1;
    return super.dispatch(options, handler);
  }
}

for (const dialect of testDialects()) {
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
        ownerId: 7,
        repoId: 0,
        type: 'gitea',
        url,
        contentType: 'json',
        events: ['push'],
        branchFilter: '',
        meta: null,
        isActive: true,
        isSystemWebhook: false,
        nowSec: systemClock.nowSec(),
      });

    test('a receiver failing 3 times gets the same delivery id 4 times; the history shows 4 attempts', async () => {
      const db = scratch.handle.db;
      const hookId = await addHook(`${receiver.url}/flaky`);
      const payload = JSON.stringify({ ref: 'refs/heads/main' }, null, 2);
      const taskId = await insertHookTask(db, {
        hookId,
        uuid: '11111111-2222-4333-8444-555555555555',
        eventType: 'push',
        payload,
        nowMs: Date.now(),
      });
      receiver.respond = (d) => (receiver.received.filter((r) => r.path === d.path).length <= 3 ? 500 : 204);
      const worker = new WebhookDeliveryWorker(db, systemClock, secrets, {
        allowedHosts: 'loopback',
        pollIntervalMs: 20,
        retry: { baseDelayMs: 30, factor: 1, jitter: 0 },
      });
      worker.start();
      try {
        await receiver.waitFor((r) => r.filter((d) => d.path === '/flaky').length >= 4);
        await new Promise((resolve) => setTimeout(resolve, 200));
      } finally {
        await worker.stop();
      }
      const got = receiver.received.filter((d) => d.path === '/flaky');
      assert.equal(got.length, 4);
      assert.deepEqual(
        new Set(got.map((d) => d.headers['x-gitea-delivery'])),
        new Set(['11111111-2222-4333-8444-555555555555']),
      );
      assert.deepEqual(
        got.map((d) => d.headers['x-gantry-delivery-attempt']),
        ['1', '2', '3', '4'],
      );
      for (const d of got) assert.ok(verifySignature(SECRET, d.rawBody, d.headers['x-gitea-signature'] as string));
      const detail = await new HookDeliveryService(db, systemClock, 'http://x/').get(
        orgScope({ id: 7 }),
        hookId,
        taskId,
      );
      assert.equal(detail.state, 'delivered');
      assert.equal(detail.attempts, 4);
      assert.deepEqual(
        detail.attempt_history.map((a) => a.response.status_code),
        [500, 500, 500, 204],
      );
      assert.deepEqual(
        detail.attempt_history.map((a) => a.attempt),
        [1, 2, 3, 4],
      );
    });

    test('under the default `external` list a hook to 127.0.0.1 is refused, recorded as a permanent failure after one attempt (no retries), naming the host only', async () => {
      const db = scratch.handle.db;
      const hookId = await addHook(`${receiver.url}/refused`);
      const taskId = await insertHookTask(db, {
        hookId,
        uuid: '99999999-2222-4333-8444-555555555555',
        eventType: 'push',
        payload: '{}',
        nowMs: Date.now(),
      });
      // The default 8 attempts, with retries due at once: a refusal must still settle after the first.
      const worker = new WebhookDeliveryWorker(db, systemClock, secrets, {
        pollIntervalMs: 20,
        retry: { baseDelayMs: 0, factor: 1, jitter: 0 },
      });
      worker.start();
      const service = new HookDeliveryService(db, systemClock, 'http://x/');
      try {
        const deadline = Date.now() + 10_000;
        while ((await service.get(orgScope({ id: 7 }), hookId, taskId)).state !== 'failed') {
          assert.ok(Date.now() < deadline, 'the refused delivery was not settled');
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
      } finally {
        await worker.stop();
      }
      assert.equal(receiver.received.filter((d) => d.path === '/refused').length, 0);
      const detail = await service.get(orgScope({ id: 7 }), hookId, taskId);
      assert.equal(detail.attempts, 1);
      assert.equal(detail.attempt_history.length, 1);
      assert.equal(detail.attempt_history[0]?.response.status_code, 0);
      const port = new URL(receiver.url).port;
      assert.match(
        detail.attempt_history[0]?.error ?? '',
        /can only call allowed HTTP servers.*GANTRY_WEBHOOK_ALLOWED_HOSTS.*deny '127\.0\.0\.1'$/,
      );
      assert.ok(!(detail.attempt_history[0]?.error ?? '').includes(`:${port}`), 'no address:port');
      assert.match(detail.status, /allowed HTTP servers/);
    });

    test(
      'two workers on one database deliver 1,000 queued rows between them, each exactly once',
      { timeout: 120_000 },
      async () => {
        const db = scratch.handle.db;
        // PostgreSQL: a second pool, so the claims really race (SKIP LOCKED); SQLite: one
        // connection per process, so both workers share it and their claims interleave.
        const second = scratch.url ? openDatabase({ databaseUrl: scratch.url, dataDir: '' }) : null;
        const hookId = await addHook(`${receiver.url}/pair`);
        receiver.respond = () => 200;
        const uuids = Array.from({ length: 1000 }, () => randomUUID());
        await db.transaction().execute((tx) =>
          insertHookTasks(
            tx,
            uuids.map((uuid) => ({
              hookId,
              uuid,
              eventType: 'push',
              payload: JSON.stringify({ uuid }),
              nowMs: Date.now(),
            })),
          ),
        );
        const agents = [new CountingAgent(), new CountingAgent()] as const;
        const workers = [
          new WebhookDeliveryWorker(db, systemClock, secrets, { pollIntervalMs: 20, dispatcher: agents[0] }),
          new WebhookDeliveryWorker(second?.db ?? db, systemClock, secrets, {
            pollIntervalMs: 20,
            dispatcher: agents[1],
          }),
        ];
        for (const worker of workers) worker.start();
        try {
          await receiver.waitFor((r) => r.filter((d) => d.path === '/pair').length >= uuids.length, 90_000);
          const settledBy = Date.now() + 30_000;
          const delivered = async () =>
            Number(
              (
                await db
                  .selectFrom('hook_task')
                  .select((eb) => eb.fn.countAll().as('n'))
                  .where('hook_id', '=', hookId)
                  .where('status', '=', HookTaskStatus.delivered)
                  .executeTakeFirst()
              )?.n,
            );
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
        assert.deepEqual(
          [...seen.values()].filter((n) => n !== 1),
          [],
          'no delivery was sent twice',
        );
        assert.ok(
          agents[0].requests > 0 && agents[1].requests > 0,
          `both workers delivered (${agents[0].requests} + ${agents[1].requests})`,
        );
        assert.equal(agents[0].requests + agents[1].requests, uuids.length);
        const rows = await db
          .selectFrom('hook_task')
          .select(['attempts', 'lease_owner'])
          .where('hook_id', '=', hookId)
          .execute();
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
      },
    );

    test('a stopping worker finishes what it sent and gives back the rows it had claimed but not started', async () => {
      const db = scratch.handle.db;
      const hookId = await addHook(`${receiver.url}/release`);
      receiver.respond = () => new Promise((resolve) => setTimeout(() => resolve(200), 200));
      await insertHookTasks(
        db,
        Array.from({ length: 20 }, () => ({
          hookId,
          uuid: randomUUID(),
          eventType: 'push',
          payload: '{}',
          nowMs: Date.now(),
        })),
      );
      const worker = new WebhookDeliveryWorker(db, systemClock, secrets, {
        allowedHosts: 'loopback',
        pollIntervalMs: 20,
        concurrency: 2,
        batchSize: 10,
      });
      worker.start();
      try {
        await receiver.waitFor((r) => r.some((d) => d.path === '/release'));
      } finally {
        await worker.stop();
      }
      const sent = receiver.received.filter((d) => d.path === '/release').length;
      const rows = await db
        .selectFrom('hook_task')
        .select(['status', 'lease_owner', 'attempts'])
        .where('hook_id', '=', hookId)
        .execute();
      const byStatus = (status: number) => rows.filter((r) => Number(r.status) === status);
      assert.equal(byStatus(HookTaskStatus.delivering).length, 0, 'no row is left leased');
      assert.equal(byStatus(HookTaskStatus.delivered).length, sent, 'what was sent is recorded as delivered');
      assert.equal(byStatus(HookTaskStatus.pending).length, 20 - sent);
      assert.ok(sent <= 4, `${sent} sent with 2 slots`);
      assert.ok(byStatus(HookTaskStatus.pending).every((r) => r.lease_owner === '' && Number(r.attempts) === 0));
    });
  });
}
