import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ActionStatus } from './actions-status.ts';
import { rerunStatuses } from './rerun-selection.ts';
import type { RerunJobState } from './rerun-selection.ts';

const { success, failure, cancelled, skipped, waiting, blocked } = ActionStatus;

// build (two matrix legs) → test → deploy; lint alone; docs needs lint.
const JOBS: RerunJobState[] = [
  { id: 1, jobId: 'build', needs: [], status: success },
  { id: 2, jobId: 'build', needs: [], status: failure },
  { id: 3, jobId: 'test', needs: ['build'], status: skipped },
  { id: 4, jobId: 'deploy', needs: ['test'], status: skipped },
  { id: 5, jobId: 'lint', needs: [], status: cancelled },
  { id: 6, jobId: 'docs', needs: ['lint'], status: skipped },
  { id: 7, jobId: 'notes', needs: [], status: success },
];

const asObject = (map: Map<number, number>) => Object.fromEntries(map);

test('rerun of all jobs: those without needs wait, the others are blocked', () => {
  assert.deepEqual(asObject(rerunStatuses(JOBS, { kind: 'all' })), {
    1: waiting,
    2: waiting,
    3: blocked,
    4: blocked,
    5: waiting,
    6: blocked,
    7: waiting,
  });
});

test('failed jobs: failure and cancelled jobs and their transitive dependants; a successful matrix leg stays', () => {
  assert.deepEqual(asObject(rerunStatuses(JOBS, { kind: 'failed' })), {
    2: waiting,
    3: blocked,
    4: blocked,
    5: waiting,
    6: blocked,
  });
});

test('one job: itself (waiting even with needs) and what needs it, transitively', () => {
  assert.deepEqual(asObject(rerunStatuses(JOBS, { kind: 'job', id: 3 })), { 3: waiting, 4: blocked });
  assert.deepEqual(asObject(rerunStatuses(JOBS, { kind: 'job', id: 7 })), { 7: waiting });
});

test('nothing to select: no failed job, or an unknown job', () => {
  const green = JOBS.map((job) => ({ ...job, status: success }));
  assert.equal(rerunStatuses(green, { kind: 'failed' }).size, 0);
  assert.equal(rerunStatuses(JOBS, { kind: 'job', id: 99 }).size, 0);
});
