// When a claim group's transaction starts (PostgreSQL claims in groups,
// claim-groups.ts). One group of a claim key claims at a time: a second one
// in flight picks among the jobs the first has just claimed, keeps locks on
// those it found changed, and the first's final reports, holding their run,
// wait for it while it waits for that run (a cycle its lock bound breaks
// after 100 ms, a retry later). A group that fills up (MAX_GROUP runners)
// while one of its key is claiming waits its turn too. The transactions here
// are stand-ins that only count how many run at once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Db } from '../../models/database.ts';
import type { GroupedWrites } from '../../models/grouped-writes.ts';
import type { Runner } from '../../models/runners.ts';
import { ClaimGroups, MAX_GROUP } from './claim-groups.ts';
import type { GroupOutcome } from './claim-groups.ts';
import type { RunProgress } from './run-progress.ts';

/** Group transactions that finish when told to, counting how many were in flight at once. */
function heldWrites() {
  const held: (() => void)[] = [];
  const state = { inFlight: 0, most: 0, started: 0 };
  const writes = {
    run: async () => {
      state.started += 1;
      state.inFlight += 1;
      state.most = Math.max(state.most, state.inFlight);
      await new Promise<void>((resolve) => held.push(resolve));
      state.inFlight -= 1;
      // Nothing claimable: every runner of the group is answered 'none'.
      return Array.from({ length: MAX_GROUP }, (): GroupOutcome => 'none');
    },
  };
  return { writes: writes as unknown as GroupedWrites, state, releaseNext: () => held.shift()?.() };
}

const runner = (id: number) => ({ id, ownerId: 1, repoId: 0, labels: ['x'] }) as unknown as Runner;
const turn = () => new Promise((resolve) => setImmediate(resolve));

test('a group that fills up while another of its key claims waits for it, then claims', async () => {
  const { writes, state, releaseNext } = heldWrites();
  const groups = new ClaimGroups(
    {} as Db,
    writes,
    {} as RunProgress,
    () => 0,
    () => [],
    60,
  );
  const claim = (id: number) => groups.claim(runner(id), 'key', null, () => false) as Promise<GroupOutcome>;
  const first = claim(1);
  await turn();
  assert.equal(state.started, 1, 'the first runner claims at once');
  const full = Array.from({ length: MAX_GROUP }, (_, i) => claim(100 + i));
  await turn();
  assert.equal(state.started, 1, 'the full group waits while the first group claims');
  releaseNext();
  assert.equal(await first, 'none');
  await turn();
  assert.equal(state.started, 2, 'then it claims');
  releaseNext();
  assert.deepEqual(new Set(await Promise.all(full)), new Set(['none']), 'and every runner of it is answered');
  assert.equal(state.most, 1, 'one group of the key was in flight at a time');
});
