// Migration 0012: a database that ran 0011 with deliveries in it keeps their
// times once hook_task holds milliseconds everywhere. Rows written by the
// old code (created/updated in seconds) come out in milliseconds, the other
// columns untouched, and retention still prunes by the real age of a row.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Migrator } from 'kysely';
import { sql } from 'kysely';
import { MIGRATIONS } from '../../src/migrations/index.ts';
import { migrateToLatest, openDatabase } from '../../src/models/database.ts';
import type { DatabaseHandle } from '../../src/models/database.ts';
import { WebhookRetention } from '../../src/services/webhooks/retention.ts';
import { createScratchPgDatabase } from '../support/pg-database.ts';
import { testDialects } from '../support/server.ts';

const DAY_SEC = 86_400;

for (const dialect of testDialects()) {
  describe(`hook_task times across migration 0012 [${dialect}]`, () => {
    let handle: DatabaseHandle;
    let drop: () => Promise<void>;
    const nowSec = Math.floor(Date.now() / 1000);
    // As the 0011 code wrote them: created/updated in seconds, the rest in ms.
    const old = { created: nowSec - 40 * DAY_SEC, updated: nowSec - 40 * DAY_SEC + 5 };
    const recent = { created: nowSec - DAY_SEC, updated: nowSec - DAY_SEC + 5 };
    const ids = { old: 0, recent: 0 };

    before(async () => {
      if (dialect === 'postgres') {
        const scratch = await createScratchPgDatabase(process.env.GANTRY_TEST_PG_URL ?? '');
        handle = openDatabase({ databaseUrl: scratch.url, dataDir: '' });
        drop = scratch.drop;
      } else {
        const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-0012-'));
        handle = openDatabase({ databaseUrl: null, dataDir });
        drop = () => fs.rm(dataDir, { recursive: true, force: true });
      }
      const migrator = new Migrator({ db: handle.db, provider: { getMigrations: async () => ({ ...MIGRATIONS }) } });
      const to0011 = await migrator.migrateTo('0011-commit-statuses');
      assert.equal(to0011.error, undefined);

      const db = handle.db;
      const hook = await db
        .insertInto('webhook')
        .values({
          owner_id: 1,
          repo_id: 0,
          type: 'gitea',
          url: 'http://127.0.0.1:9/',
          content_type: 'json',
          events: '[]',
          is_active: 1,
          created: nowSec,
          updated: nowSec,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      const row = (uuid: string, times: { created: number; updated: number }) => ({
        hook_id: hook.id,
        uuid,
        event_type: 'push',
        payload_content: '{}',
        status: 2,
        attempts: 1,
        next_attempt_at: times.created * 1000,
        delivered: times.updated * 1000,
        created: times.created,
        updated: times.updated,
      });
      ids.old = (await db.insertInto('hook_task').values(row('old', old)).returning('id').executeTakeFirstOrThrow()).id;
      ids.recent = (
        await db.insertInto('hook_task').values(row('recent', recent)).returning('id').executeTakeFirstOrThrow()
      ).id;
      assert.equal((await migrateToLatest(db)).applied[0], '0012-hook-task-time-unit', 'the conversion runs first');
    });

    after(async () => {
      await handle?.destroy();
      await drop?.();
    });

    test('every time of a delivery written before 0012 reads in milliseconds, the same instant', async () => {
      const rows = await handle.db
        .selectFrom('hook_task')
        .select(['id', 'created', 'updated', 'next_attempt_at', 'delivered'])
        .orderBy('id')
        .execute();
      const plain = rows.map((r) => ({
        id: Number(r.id),
        created: Number(r.created),
        updated: Number(r.updated),
        next_attempt_at: Number(r.next_attempt_at),
        delivered: Number(r.delivered),
      }));
      assert.deepEqual(plain, [
        {
          id: ids.old,
          created: old.created * 1000,
          updated: old.updated * 1000,
          next_attempt_at: old.created * 1000,
          delivered: old.updated * 1000,
        },
        {
          id: ids.recent,
          created: recent.created * 1000,
          updated: recent.updated * 1000,
          next_attempt_at: recent.created * 1000,
          delivered: recent.updated * 1000,
        },
      ]);
    });

    test('30-day retention prunes the 40-day-old delivery and keeps yesterday’s', async () => {
      const retention = new WebhookRetention(
        handle.db,
        { nowMs: () => Date.now(), nowSec: () => Math.floor(Date.now() / 1000) },
        { retentionDays: 30 },
      );
      assert.equal(await retention.pruneOnce(), 1);
      const left = await sql<{ uuid: string }>`select uuid from hook_task order by id`.execute(handle.db);
      assert.deepEqual(
        left.rows.map((r) => r.uuid),
        ['recent'],
      );
    });
  });
}
