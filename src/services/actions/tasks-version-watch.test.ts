// TasksVersionWatch against a real database: a waiter is woken by the tick
// after its scope's version moves, and only then; one that arrives having
// seen an older version is woken on the next tick even when the version has
// not moved since the last tick (the case the per-scope bookkeeping must not
// skip); other scopes' waiters sleep on; the bound, the abort signal and
// interruptAll each end a wait with null; waits with different bounds,
// sharing one timer, each end at their own.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { openScratchDatabase } from '../../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../../test/support/scratch-database.ts';
import { testDialects } from '../../../test/support/server.ts';
import { bumpTasksVersion, tasksVersion } from '../../models/runners.ts';
import { TasksVersionWatch } from './tasks-version-watch.ts';

const NOW = 1_800_000_000;
const TICK_MS = 20;
const LONG_MS = 5_000;
const REPO = { ownerId: 1, repoId: 10 };
const OTHER = { ownerId: 1, repoId: 11 };

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Whether `promise` has settled after `ms`, and with what. */
async function within<T>(promise: Promise<T>, ms: number): Promise<{ settled: boolean; value?: T }> {
  let outcome: { settled: boolean; value?: T } = { settled: false };
  void promise.then((value) => (outcome = { settled: true, value }));
  await sleep(ms);
  return outcome;
}

for (const dialect of testDialects()) {
  describe(`tasks version watch [${dialect}]`, () => {
    let scratch: ScratchDatabase;
    let watch: TasksVersionWatch;

    before(async () => {
      scratch = await openScratchDatabase(dialect);
      watch = new TasksVersionWatch(scratch.handle.db, TICK_MS);
    });
    after(async () => {
      watch.interruptAll();
      await scratch.drop();
    });

    test('a waiter sleeps while its version stands and wakes with the new one when it moves', async () => {
      const seen = await tasksVersion(scratch.handle.db, REPO, NOW);
      const waiting = watch.waitForChange(REPO, seen, LONG_MS);
      const other = watch.waitForChange(OTHER, await tasksVersion(scratch.handle.db, OTHER, NOW), LONG_MS);
      assert.equal((await within(waiting, TICK_MS * 5)).settled, false, 'no wake-up while nothing moved');
      const bumped = await bumpTasksVersion(scratch.handle.db, REPO, NOW);
      assert.deepEqual(await within(waiting, TICK_MS * 10), { settled: true, value: bumped });
      assert.equal((await within(other, TICK_MS * 3)).settled, false, "another scope's waiter sleeps on");
      watch.interruptAll();
      assert.equal(await other, null);
    });

    test('a waiter that saw an older version is woken on the next tick, though the version did not move since the last one', async () => {
      const current = await tasksVersion(scratch.handle.db, REPO, NOW);
      // A waiter keeps the ticks going with the current version checked…
      const steady = watch.waitForChange(REPO, current, LONG_MS);
      await sleep(TICK_MS * 4);
      // …then one arrives that read the version before its last move.
      const late = watch.waitForChange(REPO, current - 1, LONG_MS);
      assert.deepEqual(await within(late, TICK_MS * 10), { settled: true, value: current });
      assert.equal((await within(steady, TICK_MS * 3)).settled, false, 'the up-to-date waiter is not woken');
      watch.interruptAll();
      assert.equal(await steady, null);
    });

    test('the bound and the abort signal end a wait with null', async () => {
      const seen = await tasksVersion(scratch.handle.db, REPO, NOW);
      assert.equal(await watch.waitForChange(REPO, seen, TICK_MS * 3), null);
      const controller = new AbortController();
      const aborted = watch.waitForChange(REPO, seen, LONG_MS, controller.signal);
      controller.abort();
      assert.equal(await aborted, null);
    });

    test('waits share one deadline timer yet each ends at its own bound, a shorter one that came later first', async () => {
      const seen = await tasksVersion(scratch.handle.db, REPO, NOW);
      const started = performance.now();
      const ended: Array<[string, number]> = [];
      const wait = (name: string, ms: number) =>
        watch.waitForChange(REPO, seen, ms).then((value) => {
          assert.equal(value, null);
          ended.push([name, performance.now() - started]);
        });
      await Promise.all([wait('long', 600), wait('short', 150), wait('middle', 350)]);
      assert.deepEqual(
        ended.map(([name]) => name),
        ['short', 'middle', 'long'],
      );
      for (const [name, at] of ended) {
        const bound = { short: 150, middle: 350, long: 600 }[name] ?? 0;
        // At most 10 ms early (waits due together end together); late only by the machine's own delay.
        assert.ok(at >= bound - 11 && at < bound + 250, `${name} ended after ${at.toFixed(0)} ms`);
      }
    });

    test('a signal that is not an AbortSignal (a listener object, one at a time) ends a wait, and a wait it no longer holds does not hear it', async () => {
      const seen = await tasksVersion(scratch.handle.db, REPO, NOW);
      let listener: { handleEvent(): void } | null = null;
      const signal = {
        aborted: false,
        addEventListener: (_type: 'abort', l: { handleEvent(): void }) => void (listener = l),
        removeEventListener: (_type: 'abort', l: { handleEvent(): void }) => {
          if (listener === l) listener = null;
        },
      };
      assert.equal(await watch.waitForChange(REPO, seen, TICK_MS * 2, signal), null);
      assert.equal(listener, null, 'a wait that ended at its bound stops listening');
      const held = watch.waitForChange(REPO, seen, LONG_MS, signal);
      assert.notEqual(listener, null);
      signal.aborted = true;
      (listener as unknown as { handleEvent(): void }).handleEvent();
      assert.equal(await held, null);
      assert.equal(listener, null);
    });

    test('a held call (hold) hears its end once through its callback: the new version, or null at once when its caller hung up', async () => {
      const seen = await tasksVersion(scratch.handle.db, REPO, NOW);
      const ends: (number | null)[] = [];
      watch.hold(REPO, seen, LONG_MS, undefined, (version) => ends.push(version));
      await sleep(TICK_MS * 3);
      assert.equal(ends.length, 0, 'held while the version stands');
      const bumped = await bumpTasksVersion(scratch.handle.db, REPO, NOW);
      await sleep(TICK_MS * 10);
      assert.deepEqual([...ends], [bumped]);
      const gone = new AbortController();
      gone.abort();
      watch.hold(REPO, bumped, LONG_MS, gone.signal, (version) => ends.push(version));
      assert.deepEqual(ends, [bumped, null], 'ended before hold returned');
    });
  });
}
