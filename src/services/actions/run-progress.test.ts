// A claim whose run moved between the claim statement's look and the lock
// claims share (its last running job ended, so it shows waiting): on
// PostgreSQL the claim is run again (RunAgainError, which the claim's retry
// loop takes as it takes a deadlock) instead of upgrading its shared lock,
// which every other claim in flight in the run held too: each upgrade waited
// for the others, a deadlock PostgreSQL broke after a second, one claim at a
// time (a 100-runner swarm stalled for 8 s). On SQLite the run cannot move
// under a claim; settle runs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { openScratchDatabase } from '../../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../../test/support/scratch-database.ts';
import { waitingPushRun } from '../../../test/support/seeded-runs.ts';
import { testDialects } from '../../../test/support/server.ts';
import { ActionStatus } from '../../modules/actions-status.ts';
import { systemClock } from '../../modules/clock.ts';
import { findRunById, insertRunWithJobs } from '../../models/action-runs.ts';
import { isRetryableError, RunAgainError } from '../../models/database.ts';
import { DomainEvents } from '../events.ts';
import { RunProgress } from './run-progress.ts';

const NOW = 1_800_000_000;

for (const dialect of testDialects()) {
  describe(`a claim settling a run that moved under it [${dialect}]`, () => {
    let scratch: ScratchDatabase;

    before(async () => {
      scratch = await openScratchDatabase(dialect);
    });
    after(async () => {
      await scratch?.drop();
    });

    test('the claim runs again on PostgreSQL; SQLite settles the run', async () => {
      const db = scratch.handle.db;
      // Shows waiting: its last running job ended after the claim statement looked.
      const { run, jobs } = await db.transaction().execute((tx) =>
        insertRunWithJobs(
          tx,
          waitingPushRun({ repoId: 700, ownerId: 7, title: 'moved' }),
          [0, 1].map((index) => ({
            name: `leg-${index}`,
            jobId: `leg-${index}`,
            handle: randomUUID(),
            needs: [],
            runsOn: ['x'],
            hasIf: false,
            workflowPayload: `jobs: {leg-${index}: {}}`,
            status: ActionStatus.waiting,
          })),
          NOW,
        ),
      );
      const claimed = { ...jobs[0]!, status: ActionStatus.running };
      await db
        .updateTable('action_run_job')
        .set({ status: ActionStatus.running })
        .where('id', '=', claimed.id)
        .execute();
      const progress = new RunProgress(systemClock, new DomainEvents());
      const settle = db
        .transaction()
        .execute((tx) =>
          progress.settleClaimed(tx, { status: ActionStatus.running, jobConcurrency: false }, run.id, [claimed], true),
        );
      if (dialect === 'postgres') {
        const error = await settle.then(
          () => null,
          (caught: unknown) => caught,
        );
        assert.ok(error instanceof RunAgainError, 'the claim is run again');
        assert.ok(isRetryableError(error), "the claim's retry loop takes it");
        assert.equal((await findRunById(db, run.id))?.status, ActionStatus.waiting, 'nothing was written');
      } else {
        assert.equal((await settle)?.status, ActionStatus.running);
      }
    });
  });
}
