// The claim behind FetchTask on each dialect, through what a caller of this
// model sees (the exported functions, driven as runner-protocol.ts's
// claimBatch and claimOne drive them: claimNextJob in the runner's
// transaction, anyClaimable when nothing was free), not the SQL text: two
// runners racing for the same waiting jobs get disjoint jobs covering them
// all, each the job findFirstClaimable offers; a claimed job is neither
// offered nor claimable again, not even by its handle, and leaves one task; a runner gets only the jobs in its scope whose
// runs-on labels it has, and a handle narrows the claim to one job; a job held
// by another claim reads as busy, not as gone; tasks claimed under a request
// key are found by their runner until the key expires, and a released claim
// waits again as the job's next attempt.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { openScratchDatabase } from '../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../test/support/scratch-database.ts';
import { waitingPushRun } from '../../test/support/seeded-runs.ts';
import { testDialects } from '../../test/support/server.ts';
import { ActionStatus } from '../modules/actions-status.ts';
import { insertRunWithJobs } from './action-runs.ts';
import type { ActionRunJob } from './action-runs.ts';
import { openDatabase } from './database.ts';
import type { Queryable } from './database.ts';
import { insertRunner } from './runners.ts';
import { insertWebhook } from './webhooks.ts';
import type { Runner } from './runners.ts';
import type { ScopeColumns } from '../modules/scope.ts';
import {
  anyClaimable,
  claimNextJob,
  findFirstClaimable,
  findJobById,
  findTasksByRequestKey,
  lockRunnerForClaim,
  releaseClaim,
} from './task-claims.ts';
import type { ClaimedJob } from './task-claims.ts';

const NOW = 1_800_000_000;
const REQUEST_KEY_TTL = 60;
const OWNER = 11;
const OTHER_OWNER = 12;

function scopeOf(runner: Runner): ScopeColumns {
  return { ownerId: runner.ownerId, repoId: runner.repoId };
}

const newToken = () => ({ hash: randomUUID(), lastEight: 'abcdefgh' });

interface BatchOptions {
  capacity?: number;
  handle?: string;
  key?: string;
  now?: number;
}

type BatchResult = ClaimedJob[] | 'claimed under the key' | 'busy';

/**
 * One FetchTask's claims in one transaction, as runner-protocol.ts's
 * claimBatch and claimOne make them: lock the runner; answer 'claimed under
 * the key' when tasks claimed under the request key are there already; then
 * up to `capacity` times claim the oldest claimable job (the one
 * findFirstClaimable offers) with claimNextJob; with nothing free, 'busy' when anyClaimable still
 * sees a job (rows another claim holds). The pick is locked (PostgreSQL) or
 * under the write lock (SQLite), so its claim must not lose.
 */
async function claimBatch(db: Queryable, runner: Runner, options: BatchOptions = {}): Promise<BatchResult> {
  const { capacity = 1, handle, key, now = NOW } = options;
  return db.transaction().execute(async (tx) => {
    assert.ok(await lockRunnerForClaim(tx, runner.id), 'the runner exists');
    if (key !== undefined && (await findTasksByRequestKey(tx, runner.id, key, now)).length > 0)
      return 'claimed under the key' as const;
    const requestKey = key === undefined ? null : { key, expires: now + REQUEST_KEY_TTL };
    const labels = runner.labels ?? [];
    const claims: ClaimedJob[] = [];
    while (claims.length < capacity) {
      const picked = await findFirstClaimable(tx, scopeOf(runner), labels, handle);
      const claimed = await claimNextJob(tx, scopeOf(runner), labels, handle, runner.id, newToken(), now, requestKey);
      assert.equal(claimed?.job.id, picked?.id, 'the claim takes the job findFirstClaimable offers');
      if (claimed === null) break;
      claims.push(claimed);
    }
    if (claims.length === 0 && (await anyClaimable(tx, scopeOf(runner), labels, handle))) return 'busy' as const;
    return claims;
  });
}

/** The ids of the jobs one claim got; fails on 'busy' or 'claimed under the key'. */
function jobIds(result: BatchResult): number[] {
  assert.ok(Array.isArray(result), `a list of claims, not ${String(result)}`);
  return result.map((claim) => claim.job.id);
}

/** Claims one job at a time until nothing is left for the runner; the job ids, in claim order. */
async function drain(db: Queryable, runner: Runner, handle?: string): Promise<number[]> {
  const ids: number[] = [];
  for (;;) {
    const claimed = jobIds(await claimBatch(db, runner, { handle }));
    if (claimed.length === 0) return ids;
    ids.push(...claimed);
  }
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

    /** A waiting run in a repository of its own (or `repoId`), one waiting job per runs-on list. */
    const addRun = async (
      runsOn: readonly (readonly string[])[],
      ownerId = OWNER,
      repoId = nextRepoId++,
    ): Promise<ActionRunJob[]> => {
      const created = await scratch.handle.db.transaction().execute((tx) =>
        insertRunWithJobs(
          tx,
          waitingPushRun({ repoId, ownerId, title: 'claims' }),
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

    /** A label no other test's jobs carry, so instance runners see only this test's jobs. */
    const uniqueLabel = (name: string) => `${name}-${randomUUID().slice(0, 8)}`;

    test("a claim says whether the run's repository or its owner has an active webhook", async () => {
      const db = scratch.handle.db;
      const hook = (ownerId: number, repoId: number, isActive: boolean) =>
        insertWebhook(db, {
          ownerId,
          repoId,
          type: 'forgejo',
          url: 'http://127.0.0.1:1/hook',
          contentType: 'json',
          events: ['workflow_job'],
          branchFilter: '',
          meta: {},
          isActive,
          isSystemWebhook: false,
          nowSec: NOW,
        });
      const cases: Array<{
        name: string;
        hooks: (ownerId: number, repoId: number) => Promise<unknown>;
        want: boolean;
      }> = [
        { name: 'no hook', hooks: async () => {}, want: false },
        { name: "the repository's hook", hooks: (_owner, repo) => hook(0, repo, true), want: true },
        { name: "the repository's inactive hook", hooks: (_owner, repo) => hook(0, repo, false), want: false },
        { name: "another repository's hook", hooks: (_owner, repo) => hook(0, repo + 1000, true), want: false },
        { name: "the owner's hook", hooks: (owner) => hook(owner, 0, true), want: true },
        { name: "another owner's hook", hooks: (owner) => hook(owner + 1000, 0, true), want: false },
      ];
      let ownerId = 700;
      for (const { name, hooks, want } of cases) {
        ownerId += 1;
        const label = uniqueLabel('hooks');
        const [job] = await addRun([[label]], ownerId);
        assert.ok(job);
        await hooks(ownerId, job.repoId);
        const runner = await addRunner({ ownerId: 0, repoId: 0 }, [label]);
        // The runner's lock taken by the claim itself (lockRunner), as a FetchTask without a request key does.
        const claimed = await db
          .transaction()
          .execute((tx) =>
            claimNextJob(tx, scopeOf(runner), [label], undefined, runner.id, newToken(), NOW, null, true),
          );
        assert.equal(claimed?.job.id, job.id, name);
        assert.equal(claimed?.anyActiveHook, want, name);
      }
    });

    test('two runners racing for 40 waiting jobs get disjoint jobs that cover them all, each claimed once', async () => {
      const db = scratch.handle.db;
      // PostgreSQL: a second pool, so the claims really run at once.
      const second = scratch.url ? openDatabase({ databaseUrl: scratch.url, dataDir: '' }) : null;
      try {
        const race = uniqueLabel('race');
        const jobs = await addRun(Array.from({ length: 40 }, () => [race]));
        const mine = new Set(jobs.map((job) => job.id));
        const repoId = jobs[0]?.repoId ?? 0;
        const a = await addRunner({ ownerId: 0, repoId }, [race]);
        const b = await addRunner({ ownerId: 0, repoId }, [race]);
        const claimed: Record<'a' | 'b', ClaimedJob[]> = { a: [], b: [] };
        // One runner takes one job per FetchTask, the other up to three.
        const claimer = async (name: 'a' | 'b', runner: Runner, conn: Queryable, capacity: number) => {
          for (;;) {
            const result = await claimBatch(conn, runner, { capacity });
            if (result === 'busy') {
              // The other runner holds what is left: ask again, as the long poll would.
              await new Promise<void>((resolve) => setImmediate(resolve));
              continue;
            }
            assert.ok(Array.isArray(result));
            if (result.length === 0) return;
            claimed[name].push(...result);
          }
        };
        await Promise.all([claimer('a', a, db, 1), claimer('b', b, second?.db ?? db, 3)]);
        const all = [...claimed.a, ...claimed.b];
        const ids = all.map((claim) => claim.job.id);
        assert.equal(new Set(ids).size, ids.length, 'no job was claimed twice');
        assert.deepEqual(new Set(ids), mine, 'every waiting job was claimed');
        if (second !== null) assert.ok(claimed.a.length > 0 && claimed.b.length > 0, 'both runners got jobs');
        for (const claim of all) {
          assert.deepEqual(
            [claim.job.status, claim.job.taskId, claim.job.attempt],
            [ActionStatus.running, claim.taskId, 1],
            'the claimed job runs the new task as its first attempt',
          );
        }
        const tasks = await db
          .selectFrom('action_task')
          .select(['id', 'job_id', 'runner_id'])
          .where('job_id', 'in', [...mine])
          .execute();
        assert.equal(tasks.length, 40, 'one task per job, none left behind');
        const runnerOf = new Map(tasks.map((task) => [task.id, task.runner_id]));
        for (const claim of claimed.a) assert.equal(runnerOf.get(claim.taskId), a.id);
        for (const claim of claimed.b) assert.equal(runnerOf.get(claim.taskId), b.id);
      } finally {
        await second?.destroy();
      }
    });

    test('a claimed job is neither offered nor claimable again, not by its handle either, and has one task', async () => {
      const db = scratch.handle.db;
      const once = uniqueLabel('once');
      const [job] = await addRun([[once]]);
      assert.ok(job);
      const runner = await addRunner({ ownerId: 0, repoId: job.repoId }, [once]);
      const scope = scopeOf(runner);
      assert.equal((await findFirstClaimable(db, scope, [once]))?.id, job.id, 'offered while waiting');
      const first = await claimBatch(db, runner);
      assert.deepEqual(jobIds(first), [job.id]);
      assert.deepEqual(await claimBatch(db, runner), [], 'nothing left to claim, and not busy');
      assert.equal(await findFirstClaimable(db, scope, [once]), null, 'not offered again');
      assert.equal(await anyClaimable(db, scope, [once]), false, 'not claimable again');
      assert.equal(await findFirstClaimable(db, scope, [once], job.handle), null, 'not even by its handle');
      // A claim by the job's handle (Forgejo's FetchSingleTask) finds it taken.
      const again = await db
        .transaction()
        .execute((tx) => claimNextJob(tx, scope, [once], job.handle, runner.id, newToken(), NOW));
      assert.equal(again, null, 'a claim by its handle gets nothing');
      const tasks = await db.selectFrom('action_task').select('id').where('job_id', '=', job.id).execute();
      assert.deepEqual(
        tasks.map((task) => task.id),
        [Array.isArray(first) ? first[0]?.taskId : undefined],
        "only the winner's task: the losing claim's is gone",
      );
      const kept = await findJobById(db, job.id);
      assert.equal(kept?.taskId, Array.isArray(first) ? first[0]?.taskId : undefined, 'the job keeps the winner');
    });

    test('a runner gets only the jobs whose runs-on labels it has, all of them', async () => {
      const db = scratch.handle.db;
      const [linux, gpu, windows] = [uniqueLabel('linux'), uniqueLabel('gpu'), uniqueLabel('windows')];
      const jobs = await addRun([[linux], [linux, gpu], [windows], []]);
      const [plain, both, win, anything] = jobs;
      assert.ok(plain && both && win && anything);
      const repo = { ownerId: 0, repoId: plain.repoId };

      const gpuOnly = await addRunner(repo, [gpu]);
      assert.deepEqual(
        await drain(db, gpuOnly),
        [anything.id],
        'a gpu runner lacks linux: only the job that asks for nothing',
      );
      const linuxOnly = await addRunner(repo, [linux]);
      assert.deepEqual(await drain(db, linuxOnly), [plain.id], 'a linux runner lacks gpu: not the linux+gpu job');
      assert.equal(await anyClaimable(db, repo, [linux]), false, 'nothing left a linux runner could claim');
      assert.equal(await anyClaimable(db, repo, [linux, gpu]), true, 'the linux+gpu job waits for a runner with both');
      const full = await addRunner(repo, [gpu, 'extra', linux]);
      assert.deepEqual(await drain(db, full), [both.id], 'a runner with both labels (and more) gets it');
      const none = await addRunner(repo, []);
      assert.deepEqual(await drain(db, none), [], 'a runner without labels gets no labelled job');
      const winRunner = await addRunner(repo, [windows]);
      assert.deepEqual(await drain(db, winRunner), [win.id]);
    });

    test("a runner sees its scope's jobs only (repository, owner, instance); a handle narrows the claim to one job", async () => {
      const db = scratch.handle.db;
      const label = uniqueLabel('scoped');
      const [inA] = await addRun([[label]], OWNER);
      const [inB] = await addRun([[label]], OWNER);
      const [inC] = await addRun([[label]], OTHER_OWNER);
      assert.ok(inA && inB && inC);
      const repoRunner = await addRunner({ ownerId: 0, repoId: inA.repoId }, [label]);
      const ownerRunner = await addRunner({ ownerId: OWNER, repoId: 0 }, [label]);
      const instanceRunner = await addRunner({ ownerId: 0, repoId: 0 }, [label]);

      // Which job each runner could claim, asked job by job through its handle.
      const visible = async (runner: Runner) => {
        const seen: number[] = [];
        for (const job of [inA, inB, inC]) {
          const picked = await findFirstClaimable(db, scopeOf(runner), [label], job.handle);
          assert.equal(await anyClaimable(db, scopeOf(runner), [label], job.handle), picked !== null);
          if (picked !== null) seen.push(picked.id);
        }
        return seen;
      };
      assert.deepEqual(await visible(repoRunner), [inA.id], 'a repository runner: its repository');
      assert.deepEqual(await visible(ownerRunner), [inA.id, inB.id], "an owner runner: its owner's repositories");
      assert.deepEqual(await visible(instanceRunner), [inA.id, inB.id, inC.id], 'an instance runner: everything');

      // A handle narrows the claim: the instance runner takes inC though inA and inB are older.
      assert.deepEqual(jobIds(await claimBatch(db, instanceRunner, { capacity: 3, handle: inC.handle })), [inC.id]);
      assert.deepEqual(
        await claimBatch(db, repoRunner, { handle: inB.handle }),
        [],
        "another repository's handle gives a repository runner nothing",
      );
      assert.deepEqual(await drain(db, repoRunner), [inA.id], 'the repository runner drains its repository only');
      assert.deepEqual(await drain(db, ownerRunner), [inB.id], 'the owner runner gets what is left of its owner');
      assert.deepEqual(await drain(db, instanceRunner), [], 'nothing is left');
    });

    test(
      'a job another claim holds reads as busy, not gone, and is claimable once that claim rolls back',
      {
        skip: dialect === 'sqlite' ? 'SQLite claims hold the write lock: no claim sees another in flight' : false,
      },
      async () => {
        const db = scratch.handle.db;
        assert.ok(scratch.url);
        const second = openDatabase({ databaseUrl: scratch.url, dataDir: '' });
        const label = uniqueLabel('held');
        const [job] = await addRun([[label]]);
        assert.ok(job);
        const repo = { ownerId: 0, repoId: job.repoId };
        const contender = await addRunner(repo, [label]);
        let letGo = () => {};
        const released = new Promise<void>((resolve) => (letGo = resolve));
        let picked: (job: ActionRunJob | null) => void = () => {};
        const pick = new Promise<ActionRunJob | null>((resolve) => (picked = resolve));
        class RollBack extends Error {}
        // Another claim in flight: it has picked the job (and locked its row) but not yet committed.
        const holder = db
          .transaction()
          .execute(async (tx) => {
            picked(await findFirstClaimable(tx, repo, [label]));
            await released;
            throw new RollBack();
          })
          .catch((error: unknown) => {
            picked(null);
            if (!(error instanceof RollBack)) throw error;
          });
        try {
          assert.equal((await pick)?.id, job.id, 'the other claim holds the job');
          assert.equal(await claimBatch(second.db, contender), 'busy', 'skipped while held, but still there');
          letGo();
          await holder;
          assert.deepEqual(jobIds(await claimBatch(second.db, contender)), [job.id], 'claimable once it rolled back');
        } finally {
          letGo();
          await holder;
          await second.destroy();
        }
      },
    );

    test('tasks claimed under a request key are found by that runner until the key expires; a released claim waits again as the next attempt', async () => {
      const db = scratch.handle.db;
      const keyed = uniqueLabel('keyed');
      const jobs = await addRun([[keyed], [keyed]]);
      const repoId = jobs[0]?.repoId ?? 0;
      const runner = await addRunner({ ownerId: 0, repoId }, [keyed]);
      const other = await addRunner({ ownerId: 0, repoId }, [keyed]);
      const key = randomUUID();
      const batch = await claimBatch(db, runner, { capacity: 2, key });
      assert.ok(Array.isArray(batch));
      const [first, second] = batch;
      assert.ok(first && second);
      assert.deepEqual(
        await findTasksByRequestKey(db, runner.id, key, NOW),
        [
          { id: first.taskId, jobId: first.job.id },
          { id: second.taskId, jobId: second.job.id },
        ],
        'both tasks, oldest first',
      );
      assert.equal(await claimBatch(db, runner, { key }), 'claimed under the key', 'a retry finds them');
      assert.deepEqual(await findTasksByRequestKey(db, other.id, key, NOW), [], 'the key alone gives nothing');
      assert.deepEqual(await claimBatch(db, other, { key }), [], "another runner's retry under the key claims anew");
      assert.deepEqual(
        await findTasksByRequestKey(db, runner.id, key, NOW + REQUEST_KEY_TTL),
        [],
        'not once it expired',
      );

      assert.equal(await db.transaction().execute((tx) => releaseClaim(tx, first.taskId, first.job.id, NOW + 1)), true);
      const released = await findJobById(db, first.job.id);
      assert.deepEqual(
        [released?.status, released?.taskId, released?.attempt],
        [ActionStatus.waiting, 0, 2],
        'waiting again, as its next attempt',
      );
      assert.deepEqual(
        await findTasksByRequestKey(db, runner.id, key, NOW),
        [{ id: second.taskId, jobId: second.job.id }],
        'the released task is gone',
      );
      assert.equal(
        await db.transaction().execute((tx) => releaseClaim(tx, first.taskId, first.job.id, NOW + 2)),
        false,
        'a second release changes nothing',
      );
      const again = await claimBatch(db, other);
      assert.ok(Array.isArray(again));
      assert.deepEqual(
        again.map((claim) => [claim.job.id, claim.job.attempt]),
        [[first.job.id, 2]],
        'the next runner claims attempt 2',
      );
      const task = await db
        .selectFrom('action_task')
        .select(['attempt', 'runner_id'])
        .where('id', '=', again[0]?.taskId ?? 0)
        .executeTakeFirst();
      assert.deepEqual([task?.attempt, task?.runner_id], [2, other.id], "the new task carries the job's attempt");
    });
  });
}
