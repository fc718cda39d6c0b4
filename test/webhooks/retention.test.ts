// Retention of the webhook delivery history (GANTRY_WEBHOOK_RETENTION_DAYS):
// finished deliveries older than the retention disappear from the deliveries
// API with their attempts; pending ones and recent ones stay. Both databases.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { HookTaskStatus, insertHookTask } from '../../src/models/hook-tasks.ts';
import { systemClock } from '../../src/modules/clock.ts';
import { WebhookRetention } from '../../src/services/webhooks/retention.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { recordOldDelivery } from '../support/white-box.ts';

const DAY_MS = 86_400_000;

for (const dialect of testDialects()) {
  describe(`webhook delivery retention [${dialect}]`, () => {
    let s: TestServer;
    let owner: TestUser;
    let hookId = 0;
    const db = () => s.server.deps.database.db;

    /** A delivery created `ageDays` ago in `status`, with one recorded attempt. */
    const delivery = async (ageDays: number, status: number): Promise<string> => {
      const uuid = randomUUID();
      const nowMs = Date.now() - ageDays * DAY_MS;
      // Due in a year: the server's own worker must not pick these rows up.
      const id = await insertHookTask(db(), { hookId, uuid, eventType: 'push', payload: '{}', nowMs });
      await recordOldDelivery(db(), id, status, nowMs, Date.now() + 365 * DAY_MS);
      return uuid;
    };

    const listed = async (): Promise<string[]> => {
      const res = await s.api('GET', `/orgs/acme/hooks/${hookId}/deliveries?limit=50`, { token: owner.token });
      assert.equal(res.status, 200, res.text);
      return (res.json as Array<{ guid: string }>).map((d) => d.guid);
    };

    before(async () => {
      s = await startTestServer(dialect);
      owner = await s.createUser('owner');
      assert.equal((await s.api('POST', '/orgs', { token: owner.token, body: { username: 'acme' } })).status, 201);
      // Inactive: nothing is sent, the rows are only history.
      const hook = await s.api('POST', '/orgs/acme/hooks', {
        token: owner.token,
        body: { type: 'forgejo', config: { url: 'http://example.invalid/hook', content_type: 'json' }, active: false },
      });
      assert.equal(hook.status, 201, hook.text);
      hookId = (hook.json as { id: number }).id;
    });

    after(async () => {
      await s?.stop();
    });

    test('finished deliveries past the retention are deleted with their attempts; pending and recent ones stay', async () => {
      const oldDelivered = await delivery(10, HookTaskStatus.delivered);
      const oldFailed = await delivery(8, HookTaskStatus.failed);
      const oldPending = await delivery(30, HookTaskStatus.pending);
      const recent = await delivery(6, HookTaskStatus.delivered);
      assert.equal((await listed()).length, 4);

      const pruned: number[] = [];
      const retention = new WebhookRetention(db(), systemClock, { retentionDays: 7, onPruned: (n) => pruned.push(n) });
      assert.equal(await retention.pruneOnce(), 2);
      assert.deepEqual(pruned, [2]);
      const left = await listed();
      assert.deepEqual(new Set(left), new Set([oldPending, recent]));
      assert.ok(!left.includes(oldDelivered) && !left.includes(oldFailed));
      const attempts = await db().selectFrom('hook_task_attempt').select('task_id').execute();
      assert.equal(attempts.length, 2, 'the attempts of pruned deliveries are gone too');

      // 0 keeps everything; a second pass finds nothing more.
      assert.equal(await new WebhookRetention(db(), systemClock, { retentionDays: 0 }).pruneOnce(), 0);
      assert.equal(await retention.pruneOnce(), 0);
      assert.equal((await listed()).length, 2);
    });
  });
}
