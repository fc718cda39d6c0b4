import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ActionStatus } from '../../modules/actions-status.ts';
import type { ActionRunJob } from '../../models/action-runs.ts';
import { commitStatusDescription, commitStatusState, goDuration } from './commit-status-writer.ts';

test('durations print as Go prints a time.Duration of whole seconds', () => {
  assert.equal(goDuration(0), '0s');
  assert.equal(goDuration(42), '42s');
  assert.equal(goDuration(62), '1m2s');
  assert.equal(goDuration(3600), '1h0m0s');
  assert.equal(goDuration(3725), '1h2m5s');
  assert.equal(goDuration(-3), '0s');
});

test("job statuses map to Forgejo 16's commit states", () => {
  assert.equal(commitStatusState(ActionStatus.success), 'success');
  assert.equal(commitStatusState(ActionStatus.failure), 'failure');
  assert.equal(commitStatusState(ActionStatus.cancelled), 'failure');
  assert.equal(commitStatusState(ActionStatus.skipped), 'skipped');
  for (const status of [ActionStatus.waiting, ActionStatus.blocked, ActionStatus.running])
    assert.equal(commitStatusState(status), 'pending');
  assert.equal(commitStatusState(ActionStatus.unknown), 'error');
});

test('descriptions: durations from start to stop once done, to now while running', () => {
  const job = (status: number, started: number, stopped: number) => ({ status, started, stopped }) as ActionRunJob;
  assert.equal(commitStatusDescription(job(ActionStatus.success, 100, 162), 1000), 'Successful in 1m2s');
  assert.equal(commitStatusDescription(job(ActionStatus.failure, 100, 105), 1000), 'Failing after 5s');
  assert.equal(commitStatusDescription(job(ActionStatus.failure, 0, 0), 1000), 'Failing after 0s');
  assert.equal(commitStatusDescription(job(ActionStatus.cancelled, 100, 105), 1000), 'Has been cancelled');
  assert.equal(commitStatusDescription(job(ActionStatus.skipped, 0, 0), 1000), 'Has been skipped');
  assert.equal(commitStatusDescription(job(ActionStatus.running, 100, 0), 1000), 'Has started running');
  assert.equal(commitStatusDescription(job(ActionStatus.waiting, 0, 0), 1000), 'Waiting to run');
  assert.equal(commitStatusDescription(job(ActionStatus.blocked, 0, 0), 1000), 'Blocked by required conditions');
});
