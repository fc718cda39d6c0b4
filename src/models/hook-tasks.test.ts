// The outbox's claim SQL on each dialect: two claimers racing for due rows get
// disjoint sets (SKIP LOCKED on PostgreSQL, a re-checking UPDATE on SQLite); an
// expired lease is taken over, and an attempt that finished after the takeover
// is still recorded without taking the row back.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { openScratchDatabase } from '../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../test/support/scratch-database.ts';
import { testDialects } from '../../test/support/server.ts';
import { systemClock } from '../modules/clock.ts';
import { openDatabase } from './database.ts';
import {
  claimDueHookTasks,
  claimExpiredHookTasks,
  HookTaskStatus,
  insertHookTask,
  insertHookTasks,
  listHookTaskAttempts,
  recordHookTaskAttempts,
} from './hook-tasks.ts';
import type { AttemptRecord } from './hook-tasks.ts';
import { insertWebhook } from './webhooks.ts';

for (const dialect of testDialects()) {
  describe(`hook task claims [${dialect}]`, () => {
    let scratch: ScratchDatabase;
    const receiver = { url: 'http://receiver.invalid' };

    before(async () => {
      scratch = await openScratchDatabase(dialect);
    });
    after(async () => {
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

    test('two claimers racing for 200 due rows get disjoint leases that cover them all', async () => {
      const db = scratch.handle.db;
      // PostgreSQL: a second pool, so the claims really run at once.
      const second = scratch.url ? openDatabase({ databaseUrl: scratch.url, dataDir: '' }) : null;
      try {
        const hookId = await addHook(`${receiver.url}/race`);
        const now = Date.now();
        await insertHookTasks(
          db,
          Array.from({ length: 200 }, () => ({
            hookId,
            uuid: randomUUID(),
            eventType: 'push',
            payload: '{}',
            nowMs: now,
          })),
        );
        const claimed: Record<string, number[]> = { a: [], b: [] };
        const claimer = async (name: 'a' | 'b', conn: typeof db) => {
          for (;;) {
            const batch = (await claimDueHookTasks(conn, name, now + 1, 60_000, 7)).filter((t) => t.hook_id === hookId);
            if (batch.length === 0) return;
            claimed[name]?.push(...batch.map((t) => t.id));
          }
        };
        await Promise.all([claimer('a', db), claimer('b', second?.db ?? db)]);
        const all = [...(claimed.a ?? []), ...(claimed.b ?? [])];
        assert.equal(new Set(all).size, all.length, 'no row was leased twice');
        assert.equal(all.length, 200, 'every due row was leased');
        const rows = await db
          .selectFrom('hook_task')
          .select(['id', 'lease_owner', 'status'])
          .where('hook_id', '=', hookId)
          .execute();
        for (const row of rows) {
          assert.equal(Number(row.status), HookTaskStatus.delivering);
          assert.equal(
            row.lease_owner,
            claimed.a?.includes(row.id) ? 'a' : 'b',
            `row ${row.id} is held by the claimer that got it`,
          );
        }
      } finally {
        await second?.destroy();
      }
    });

    test('an attempt that finished after its lease was taken over is kept in the history; the row stays with the new holder', async () => {
      const db = scratch.handle.db;
      const hookId = await addHook(`${receiver.url}/taken-over`);
      const taskId = await insertHookTask(db, {
        hookId,
        uuid: randomUUID(),
        eventType: 'push',
        payload: '{}',
        nowMs: Date.now(),
      });
      const t0 = Date.now();
      const attempt = (status: number): AttemptRecord => ({
        started: t0,
        durationMs: 3,
        requestUrl: `${receiver.url}/taken-over`,
        requestHeaders: {},
        requestBody: '{}',
        responseStatus: status,
        responseHeaders: {},
        responseBody: '',
        error: status === 200 ? '' : `the receiver answered ${status}`,
      });
      const [late] = (await claimDueHookTasks(db, 'slow-worker', t0, 1000, 100)).filter((t) => t.id === taskId);
      assert.ok(late, 'the first worker claimed the row');
      // Its lease runs out mid-attempt: another worker takes the row over.
      const [holder] = (await claimExpiredHookTasks(db, 'other-worker', t0 + 2000, 60_000, 100)).filter(
        (t) => t.id === taskId,
      );
      assert.ok(holder, 'the second worker took the row over');
      await recordHookTaskAttempts(db, 'slow-worker', [
        { task: late, attempt: attempt(500), outcome: { kind: 'retry', nextAttemptAt: t0 + 60_000 }, nowMs: t0 + 2500 },
      ]);
      const during = await listHookTaskAttempts(db, taskId);
      assert.deepEqual(
        during.map((a) => Number(a.response_status)),
        [500],
        'the late attempt is in the history',
      );
      const row = await db
        .selectFrom('hook_task')
        .select(['status', 'lease_owner', 'attempts'])
        .where('id', '=', taskId)
        .executeTakeFirstOrThrow();
      assert.deepEqual(
        { status: Number(row.status), owner: row.lease_owner, attempts: Number(row.attempts) },
        { status: HookTaskStatus.delivering, owner: 'other-worker', attempts: 0 },
      );
      await recordHookTaskAttempts(db, 'other-worker', [
        { task: holder, attempt: attempt(200), outcome: { kind: 'delivered' }, nowMs: t0 + 3000 },
      ]);
      const settled = await db
        .selectFrom('hook_task')
        .select('status')
        .where('id', '=', taskId)
        .executeTakeFirstOrThrow();
      assert.equal(Number(settled.status), HookTaskStatus.delivered);
      assert.deepEqual(
        (await listHookTaskAttempts(db, taskId)).map((a) => Number(a.response_status)).sort(),
        [200, 500],
      );
    });
  });
}
