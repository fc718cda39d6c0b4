// The idle runners' liveness write (touchRunnersOnline) against a claim group
// on PostgreSQL: the group locks its runners' rows in id order
// (group-claims.ts); the write, locking them in whatever order its plan
// reads them, could hold a later runner's row while waiting for an earlier
// one the group holds, and the group wait for it: a deadlock PostgreSQL ends
// after deadlock_timeout by failing one side. Locked in id order too, the
// write waits behind the group and both go through.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { openScratchDatabase } from '../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../test/support/scratch-database.ts';
import { testDialects } from '../../test/support/server.ts';
import { insertRunner, touchRunnersOnline } from './runners.ts';
import type { Db } from './database.ts';

const NOW = 1_800_000_000;

const newRunner = (db: Db) =>
  insertRunner(
    db,
    {
      uuid: randomUUID(),
      name: 'r',
      scope: { ownerId: 0, repoId: 0 },
      tokenHash: randomUUID(),
      tokenLastEight: '12345678',
      labels: ['ubuntu-latest'],
      ephemeral: false,
    },
    NOW,
  );

if (testDialects().includes('postgres')) {
  describe('the idle runners liveness write [postgres]', () => {
    let scratch: ScratchDatabase;

    before(async () => {
      scratch = await openScratchDatabase('postgres');
    });
    after(async () => {
      await scratch?.drop();
    });

    test('waits behind a claim group holding its runners in id order, no deadlock', async () => {
      const db = scratch.handle.db;
      const first = await newRunner(db);
      const second = await newRunner(db);
      // The first runner's row written again: its new version now lies after the second's in the table.
      await sql`update action_runner set last_online = ${NOW} where id = ${first.id}`.execute(db);
      let written: Promise<void> | undefined;
      await db.transaction().execute(async (tx) => {
        // A claim group: the first runner's row, then (the write meanwhile under way) the second's.
        await sql`select id from action_runner where id = ${first.id} for update`.execute(tx);
        written = touchRunnersOnline(db, [first.id, second.id], NOW + 5);
        written.catch(() => {});
        await new Promise((resolve) => setTimeout(resolve, 300));
        await sql`select id from action_runner where id = ${second.id} for update`.execute(tx);
      });
      await written;
      const rows = await db
        .selectFrom('action_runner')
        .select(['id', 'last_online'])
        .where('id', 'in', [first.id, second.id])
        .execute();
      assert.deepEqual(
        rows.map((row) => Number(row.last_online)),
        [NOW + 5, NOW + 5],
      );
    });
  });
}
