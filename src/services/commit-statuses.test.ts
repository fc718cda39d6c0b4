import { test } from 'node:test';
import assert from 'node:assert/strict';
import { combinedState } from './commit-statuses.ts';

test('the combined state is the worst latest state; error and unknown states read as failure; none is empty', () => {
  assert.equal(combinedState([]), '');
  assert.equal(combinedState(['success', 'success']), 'success');
  assert.equal(combinedState(['success', 'pending']), 'pending');
  assert.equal(combinedState(['pending', 'warning', 'success']), 'warning');
  assert.equal(combinedState(['warning', 'failure']), 'failure');
  assert.equal(combinedState(['failure', 'error']), 'failure');
  assert.equal(combinedState(['success', 'made-up']), 'failure');
  // Actions' skipped jobs never make the commit look worse.
  assert.equal(combinedState(['skipped', 'success']), 'success');
  assert.equal(combinedState(['skipped', 'pending']), 'pending');
  assert.equal(combinedState(['skipped', 'skipped']), 'skipped');
});
