import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LOGIN_FAILURE_WINDOW_MS, LOGIN_LOCKOUT_MS, LoginLimiter } from './login-limiter.ts';

function manualClock(start = 1_700_000_000_000): { nowMs(): number; nowSec(): number; advance(ms: number): void } {
  let now = start;
  return { nowMs: () => now, nowSec: () => Math.floor(now / 1000), advance: (ms) => (now += ms) };
}

test('10 failures within 5 minutes lock the name for 15 minutes, whatever its case; then a full allowance', () => {
  const clock = manualClock();
  const limiter = new LoginLimiter(clock, 10);
  for (let i = 0; i < 9; i += 1) limiter.recordFailure('Bob');
  assert.equal(limiter.retryAfterSec('bob'), 0, 'nine failures: not yet');
  limiter.recordFailure('BOB');
  assert.equal(limiter.retryAfterSec('bob'), LOGIN_LOCKOUT_MS / 1000);
  assert.equal(limiter.retryAfterSec('alice'), 0, 'other names are not affected');
  clock.advance(LOGIN_LOCKOUT_MS - 1500);
  assert.equal(limiter.retryAfterSec('bob'), 2, 'Retry-After rounds up');
  clock.advance(1500);
  assert.equal(limiter.retryAfterSec('bob'), 0, 'the lock ends');
  for (let i = 0; i < 9; i += 1) limiter.recordFailure('bob');
  assert.equal(limiter.retryAfterSec('bob'), 0, 'a fresh count after the lock');
  limiter.recordFailure('bob');
  assert.ok(limiter.retryAfterSec('bob') > 0);
});

test('failures older than the window do not count; a success clears the count', () => {
  const clock = manualClock();
  const limiter = new LoginLimiter(clock, 10);
  for (let i = 0; i < 9; i += 1) limiter.recordFailure('bob');
  clock.advance(LOGIN_FAILURE_WINDOW_MS + 1);
  limiter.recordFailure('bob');
  assert.equal(limiter.retryAfterSec('bob'), 0, 'the window started again');
  for (let i = 0; i < 8; i += 1) limiter.recordFailure('bob');
  limiter.recordSuccess('bob');
  for (let i = 0; i < 9; i += 1) limiter.recordFailure('bob');
  assert.equal(limiter.retryAfterSec('bob'), 0, 'the success cleared the eight before');
});

test('0 disables the limiter', () => {
  const limiter = new LoginLimiter(manualClock(), 0);
  for (let i = 0; i < 100; i += 1) limiter.recordFailure('bob');
  assert.equal(limiter.retryAfterSec('bob'), 0);
});
