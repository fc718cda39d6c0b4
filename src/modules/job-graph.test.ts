import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ActionStatus } from './actions-status.ts';
import type { ActionStatusValue } from './actions-status.ts';
import { unblockedJobs } from './job-graph.ts';
import type { JobState } from './job-graph.ts';

const { success, failure, skipped, waiting, running, blocked, cancelled } = ActionStatus;

function job(id: number, jobId: string, status: ActionStatusValue, needs: string[] = [], hasIf = false): JobState {
  return { id, jobId, needs, hasIf, status };
}

test('a job waits until every leg of every job it needs is done', () => {
  const jobs = [job(1, 'build', success), job(2, 'build', running), job(3, 'test', blocked, ['build'])];
  assert.deepEqual([...unblockedJobs(jobs)], []);
  jobs[1] = job(2, 'build', success);
  assert.deepEqual([...unblockedJobs(jobs)], [[3, waiting]]);
});

test('a failed, skipped or cancelled need skips the dependant, and the skip cascades', () => {
  for (const bad of [failure, skipped, cancelled]) {
    const jobs = [
      job(1, 'a', bad),
      job(2, 'b', blocked, ['a']),
      job(3, 'c', blocked, ['b']),
      job(4, 'd', blocked, ['c']),
    ];
    assert.deepEqual(
      [...unblockedJobs(jobs)],
      [
        [2, skipped],
        [3, skipped],
        [4, skipped],
      ],
    );
  }
});

test('a dependant with an if: is handed to a runner even after a failure (the runner evaluates it)', () => {
  const jobs = [job(1, 'a', failure), job(2, 'cleanup', blocked, ['a'], true), job(3, 'after', blocked, ['cleanup'])];
  assert.deepEqual([...unblockedJobs(jobs)], [[2, waiting]]);
});

test('a job needing several jobs goes only when all are done', () => {
  const jobs = [job(1, 'a', success), job(2, 'b', waiting), job(3, 'c', blocked, ['a', 'b'])];
  assert.deepEqual([...unblockedJobs(jobs)], []);
  jobs[1] = job(2, 'b', success);
  assert.deepEqual([...unblockedJobs(jobs)], [[3, waiting]]);
});

test('jobs that are not blocked are never changed', () => {
  const jobs = [job(1, 'a', failure), job(2, 'b', waiting, ['a']), job(3, 'c', success, ['a'])];
  assert.equal(unblockedJobs(jobs).size, 0);
});
