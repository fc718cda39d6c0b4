// The claim queries behind FetchTask on each dialect, through what a caller
// of this model sees (the exported functions, driven as runner-protocol.ts
// drives them), not the SQL text: two claimers racing for the same waiting
// jobs get disjoint jobs; a claimed job is neither offered nor claimed again;
// each page carries every job's runs-on for the caller's label match, within
// the runner's scope; tasks claimed under a request key are found again by
// that runner until the key expires, and a released claim waits again as the
// job's next attempt.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { openScratchDatabase } from '../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../test/support/scratch-database.ts';
import { testDialects } from '../../test/support/server.ts';
import { ActionStatus } from '../modules/actions-status.ts';
import { insertRunWithJobs } from './action-runs.ts';
import type { ActionRunJob } from './action-runs.ts';
import { openDatabase } from './database.ts';
import type { Queryable } from './database.ts';
import { insertRunner } from './runners.ts';
import type { Runner } from './runners.ts';
import type { ScopeColumns } from '../modules/scope.ts';
import {
  claimJob,
  findJobById,
  findTasksByRequestKey,
  lockFirstClaimable,
  lockRunnerForClaim,
  releaseClaim,
  waitingJobsPage,
} from './task-claims.ts';
import type { ClaimedJob, ClaimRequestKey } from './task-claims.ts';

const NOW = 1_800_000_000;
const OWNER = 11;
const OTHER_OWNER = 12;

/** runs-on ⊆ the runner's labels: the match runner-protocol.ts makes on each page. */
function canRun(runsOn: readonly string[], labels: readonly string[]): boolean {
  return runsOn.every((label) => labels.includes(label));
}

function scopeOf(runner: Runner): ScopeColumns {
  return { ownerId: runner.ownerId, repoId: runner.repoId };
}

/**
 * One claim in its own transaction, as runner-protocol.ts's claimOne makes
 * it: lock the runner, scan pages, keep the jobs the labels match, lock the
 * first still claimable, claim it. Null when nothing is left for this runner.
 */
async function claimNext(
  db: Queryable,
  runner: Runner,
  labels: readonly string[],
  requestKey: ClaimRequestKey | null = null,
  handle?: string,
): Promise<ClaimedJob | null> {
  return db.transaction().execute(async (tx) => {
    assert.ok(await lockRunnerForClaim(tx, runner.id), 'the runner exists');
    let afterId = 0;
    for (;;) {
      const page = await waitingJobsPage(tx, scopeOf(runner), afterId, 5, handle);
      const last = page[page.length - 1];
      if (last === undefined) return null;
      afterId = last.id;
      let ids = page.filter((candidate) => canRun(candidate.runsOn, labels)).map((candidate) => candidate.id);
      while (ids.length > 0) {
        const job = await lockFirstClaimable(tx, ids);
        if (job === null) break;
        ids = ids.filter((id) => id > job.id);
        const claimed = await claimJob(
          tx,
          job,
          runner.id,
          { hash: randomUUID(), lastEight: 'abcdefgh' },
          NOW,
          requestKey,
        );
        if (claimed !== null) return claimed;
      }
    }
  });
}

for (const dialect of testDialects()) {
  describe(`task claims [${dialect}]`, () => {
    let scratch: ScratchDatabase;
    let nextRepoId = 100;

    before(async () => {
      scratch = await openScratchDatabase(dialect);
    });
    after(async () => {
      await scratch?.drop();
    });

    /** A waiting run in a repository of its own, one waiting job per runs-on list. */
    const addRun = async (runsOn: readonly (readonly string[])[], ownerId = OWNER): Promise<ActionRunJob[]> => {
      const repoId = nextRepoId++;
      const created = await scratch.handle.db.transaction().execute((tx) =>
        insertRunWithJobs(
          tx,
          {
            repoId,
            ownerId,
            title: 'claims',
            workflowId: 'ci.yml',
            workflowDirectory: '.forgejo/workflows',
            triggerUserId: ownerId,
            ref: 'refs/heads/main',
            commitSha: 'c'.repeat(40),
            event: 'push',
            eventPayload: '{}',
            triggerEvent: 'push',
            status: ActionStatus.waiting,
          },
          runsOn.map((labels, index) => ({
            name: `job-${index}`,
            jobId: `job-${index}`,
            handle: randomUUID(),
            needs: [],
            runsOn: [...labels],
            hasIf: false,
            workflowPayload: `jobs: {job-${index}: {}}`,
            status: ActionStatus.waiting,
          })),
          NOW,
        ),
      );
      return created.jobs;
    };

    const addRunner = (scope: ScopeColumns, labels: readonly string[]) =>
      insertRunner(
        scratch.handle.db,
        {
          uuid: randomUUID(),
          name: `runner-${randomUUID().slice(0, 8)}`,
          scope,
          labels,
          ephemeral: false,
          tokenHash: randomUUID(),
          tokenLastEight: 'abcdefgh',
        },
        NOW,
      );

    test('two runners racing for 40 waiting jobs get disjoint jobs that cover them all, each claimed once', async () => {
      const db = scratch.handle.db;
      // PostgreSQL: a second pool, so the claims really run at once.
      const second = scratch.url ? openDatabase({ databaseUrl: scratch.url, dataDir: '' }) : null;
      try {
        const jobs = await addRun(Array.from({ length: 40 }, () => ['race']));
        const mine = new Set(jobs.map((job) => job.id));
        const a = await addRunner({ ownerId: 0, repoId: jobs[0]?.repoId ?? 0 }, ['race']);
        const b = await addRunner({ ownerId: 0, repoId: jobs[0]?.repoId ?? 0 }, ['race']);
        const claimed: Record<'a' | 'b', ClaimedJob[]> = { a: [], b: [] };
        const claimer = async (name: 'a' | 'b', runner: Runner, conn: Queryable) => {
          for (;;) {
            const claim = await claimNext(conn, runner, ['race']);
            if (claim === null) return;
            claimed[name].push(claim);
          }
        };
        await Promise.all([claimer('a', a, db), claimer('b', b, second?.db ?? db)]);
        const ids = [...claimed.a, ...claimed.b].map((claim) => claim.job.id);
        assert.equal(new Set(ids).size, ids.length, 'no job was claimed twice');
        assert.deepEqual(new Set(ids), mine, 'every waiting job was claimed');
        for (const claim of [...claimed.a, ...claimed.b]) {
          assert.deepEqual(
            [claim.job.status, claim.job.taskId, claim.job.attempt],
            [ActionStatus.running, claim.taskId, 1],
            'the claimed job runs the new task as its first attempt',
          );
        }
        const tasks = await db
          .selectFrom('action_task')
          .select(['job_id', 'runner_id'])
          .where('job_id', 'in', [...mine])
          .execute();
        assert.equal(tasks.length, 40, 'one task per job: a lost race leaves no task behind');
      } finally {
        await second?.destroy();
      }
    });

    test('a claimed job is neither offered nor claimed again, even from a stale read', async () => {
      const db = scratch.handle.db;
      const [job] = await addRun([['once']]);
      assert.ok(job);
      const runner = await addRunner({ ownerId: 0, repoId: job.repoId }, ['once']);
      const first = await claimNext(db, runner, ['once']);
      assert.equal(first?.job.id, job.id);
      assert.equal(await claimNext(db, runner, ['once']), null, 'nothing left to claim');
      assert.deepEqual(await waitingJobsPage(db, scopeOf(runner), 0, 10), [], 'not offered again');
      assert.equal(await lockFirstClaimable(db, [job.id]), null, 'not claimable again');
      // A caller holding the job as it was before the claim (read before another process won).
      const stale = await db
        .transaction()
        .execute((tx) => claimJob(tx, job, runner.id, { hash: randomUUID(), lastEight: 'abcdefgh' }, NOW));
      assert.equal(stale, null, 'the stale claim loses');
      const tasks = await db.selectFrom('action_task').select('id').where('job_id', '=', job.id).execute();
      assert.deepEqual(
        tasks.map((task) => task.id),
        [first?.taskId],
        "the losing claim's task is gone",
      );
    });

    test("each page carries the jobs' runs-on for the label match, within the runner's scope; a handle narrows it to one job", async () => {
      const db = scratch.handle.db;
      const jobs = await addRun([['linux'], ['linux', 'gpu'], ['windows'], []]);
      const [elsewhere] = await addRun([['linux']], OTHER_OWNER);
      assert.ok(elsewhere);
      const repoId = jobs[0]?.repoId ?? 0;
      const page = await waitingJobsPage(db, { ownerId: 0, repoId }, 0, 10);
      assert.deepEqual(
        page.map((candidate) => [candidate.id, candidate.runsOn]),
        jobs.map((job) => [job.id, job.runsOn]),
        "the repository's waiting jobs, oldest first, with their runs-on as stored",
      );
      const ownerPage = await waitingJobsPage(db, { ownerId: OWNER, repoId: 0 }, 0, 1000);
      assert.ok(!ownerPage.some((candidate) => candidate.id === elsewhere.id), "an owner runner sees only its owner's");
      const globalPage = await waitingJobsPage(db, { ownerId: 0, repoId: 0 }, 0, 1000);
      assert.ok(
        globalPage.some((candidate) => candidate.id === elsewhere.id),
        'a global runner sees everything',
      );
      assert.deepEqual(
        (await waitingJobsPage(db, { ownerId: 0, repoId }, 0, 10, jobs[2]?.handle)).map((candidate) => candidate.id),
        [jobs[2]?.id],
        'a handle narrows the scan to its job',
      );

      // A linux runner takes the jobs whose runs-on its labels cover, and no other.
      const linux = await addRunner({ ownerId: 0, repoId }, ['linux']);
      const taken: number[] = [];
      for (let claim = await claimNext(db, linux, ['linux']); claim; claim = await claimNext(db, linux, ['linux']))
        taken.push(claim.job.id);
      assert.deepEqual(taken, [jobs[0]?.id, jobs[3]?.id], 'linux, and the job that asks for nothing');
      assert.deepEqual(
        (await waitingJobsPage(db, { ownerId: 0, repoId }, 0, 10)).map((candidate) => candidate.id),
        [jobs[1]?.id, jobs[2]?.id],
        'the gpu and windows jobs still wait',
      );
    });

    test('tasks claimed under a request key are found by that runner until the key expires; a released claim waits again as the next attempt', async () => {
      const db = scratch.handle.db;
      const jobs = await addRun([['keyed'], ['keyed']]);
      const repoId = jobs[0]?.repoId ?? 0;
      const runner = await addRunner({ ownerId: 0, repoId }, ['keyed']);
      const other = await addRunner({ ownerId: 0, repoId }, ['keyed']);
      const key = { key: randomUUID(), expires: NOW + 60 };
      const first = await claimNext(db, runner, ['keyed'], key);
      const second = await claimNext(db, runner, ['keyed'], key);
      assert.ok(first && second);
      assert.deepEqual(
        await findTasksByRequestKey(db, runner.id, key.key, NOW),
        [
          { id: first.taskId, jobId: first.job.id },
          { id: second.taskId, jobId: second.job.id },
        ],
        'both tasks, oldest first',
      );
      assert.deepEqual(await findTasksByRequestKey(db, other.id, key.key, NOW), [], 'the key alone gives nothing');
      assert.deepEqual(await findTasksByRequestKey(db, runner.id, key.key, NOW + 60), [], 'not once it expired');

      assert.equal(await db.transaction().execute((tx) => releaseClaim(tx, first.taskId, first.job.id, NOW + 1)), true);
      const released = await findJobById(db, first.job.id);
      assert.deepEqual(
        [released?.status, released?.taskId, released?.attempt],
        [ActionStatus.waiting, 0, 2],
        'waiting again, as its next attempt',
      );
      assert.deepEqual(
        await findTasksByRequestKey(db, runner.id, key.key, NOW),
        [{ id: second.taskId, jobId: second.job.id }],
        'the released task is gone',
      );
      assert.equal(
        await db.transaction().execute((tx) => releaseClaim(tx, first.taskId, first.job.id, NOW + 2)),
        false,
        'a second release changes nothing',
      );
      const again = await claimNext(db, other, ['keyed']);
      assert.deepEqual([again?.job.id, again?.job.attempt], [first.job.id, 2], 'the next runner claims attempt 2');
    });
  });
}
