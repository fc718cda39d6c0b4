import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { PeriodicPass } from './periodic-pass.ts';

test('passes run on the interval; a failing pass is reported and the next one still runs', async () => {
  let calls = 0;
  const errors: unknown[] = [];
  const periodic = new PeriodicPass(
    async () => {
      calls += 1;
      if (calls === 1) throw new Error('first pass fails');
    },
    (error) => errors.push(error),
  );
  periodic.start(20);
  await sleep(150);
  await periodic.stop();
  assert.ok(calls >= 3, `${calls} passes in 150 ms at a 20 ms interval`);
  assert.equal(errors.length, 1);
  assert.match(String(errors[0]), /first pass fails/);
  const after = calls;
  await sleep(60);
  assert.equal(calls, after, 'no pass after stop()');
});

test('a slow pass is never overlapped by the next tick, and stop() waits for it to finish', async () => {
  let inFlight = 0;
  let most = 0;
  let finished = 0;
  const periodic = new PeriodicPass(async () => {
    inFlight += 1;
    most = Math.max(most, inFlight);
    await sleep(80);
    inFlight -= 1;
    finished += 1;
  });
  periodic.start(10);
  await sleep(50);
  await periodic.stop();
  assert.equal(most, 1);
  assert.equal(inFlight, 0, 'stop() returned while a pass was still running');
  assert.equal(finished, 1);
});
