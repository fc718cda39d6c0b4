import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { clientAddressKey, RateLimiter } from './rate-limiter.ts';

const MINUTE = 60_000;

function manualClock(start = 1_700_000_000_000): { nowMs(): number; nowSec(): number; advance(ms: number): void } {
  let now = start;
  return {
    nowMs: () => now,
    nowSec: () => Math.floor(now / 1000),
    advance: (ms) => {
      now += ms;
    },
  };
}

test('a key gets `limit` requests, then a refusal saying when to retry', () => {
  const clock = manualClock();
  const limiter = new RateLimiter({ limit: 3, windowMs: MINUTE, clock });
  assert.deepEqual(
    [1, 2, 3].map(() => limiter.take('a')).map((d) => [d.allowed, d.remaining]),
    [
      [true, 2],
      [true, 1],
      [true, 0],
    ],
  );
  const refused = limiter.take('a');
  assert.equal(refused.allowed, false);
  assert.equal(refused.remaining, 0);
  assert.equal(refused.retryAfterMs, 20_000, 'one request refills every 60 s / 3');
  assert.equal(refused.resetAtMs, clock.nowMs() + MINUTE, 'full again a whole window after the burst');
  assert.equal(limiter.take('b').allowed, true, 'other keys have their own bucket');
});

test('refilling: one request per window/limit, the whole burst after a window', () => {
  const clock = manualClock();
  const limiter = new RateLimiter({ limit: 3, windowMs: MINUTE, clock });
  for (let i = 0; i < 3; i += 1) limiter.take('a');
  clock.advance(19_999);
  assert.equal(limiter.take('a').allowed, false);
  clock.advance(1);
  assert.equal(limiter.take('a').allowed, true);
  assert.equal(limiter.take('a').allowed, false, 'refused requests do not count, the refill did not come yet');
  clock.advance(MINUTE);
  assert.deepEqual(
    [1, 2, 3, 4].map(() => limiter.take('a').allowed),
    [true, true, true, false],
  );
});

test('limits that do not divide the window still allow exactly `limit` in a burst', () => {
  for (const limit of [7, 11, 13, 997, 1_000_003]) {
    const limiter = new RateLimiter({ limit, windowMs: MINUTE, clock: manualClock() });
    let allowed = 0;
    while (limiter.take('k').allowed) allowed += 1;
    assert.equal(allowed, limit, `limit ${limit}`);
  }
});

test('idle keys are forgotten: a full bucket is the same as no entry', () => {
  const clock = manualClock();
  const limiter = new RateLimiter({ limit: 2, windowMs: MINUTE, clock });
  for (let i = 0; i < 50; i += 1) limiter.take(`ip-${i}`);
  assert.equal(limiter.size, 50);
  clock.advance(MINUTE);
  for (let i = 0; i < 20; i += 1) limiter.take('busy');
  assert.equal(limiter.size, 1, 'each call sweeps a few expired keys');
});

test('the number of keys never exceeds maxKeys; the least recently used goes first', () => {
  const clock = manualClock();
  const limiter = new RateLimiter({ limit: 1, windowMs: MINUTE, clock, maxKeys: 100 });
  limiter.take('regular');
  for (let i = 0; i < 10_000; i += 1) {
    limiter.take(`spoofed-${i}`);
    if (i % 50 === 0) limiter.take('regular');
    assert.ok(limiter.size <= 100);
  }
  assert.equal(limiter.take('regular').allowed, false, 'a key in use keeps its state through a flood');
  assert.equal(limiter.take('spoofed-0').allowed, true, 'an evicted key starts over with a full bucket');
});

test('property: over any span of t ms a key gets at most limit + t / (window / limit) requests', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 20 }),
      fc.integer({ min: 1_000, max: 120_000 }),
      fc.array(fc.integer({ min: 0, max: 5_000 }), { minLength: 1, maxLength: 200 }),
      (limit, windowMs, gaps) => {
        const clock = manualClock();
        const limiter = new RateLimiter({ limit, windowMs, clock });
        const allowedAt: number[] = [];
        for (const gap of gaps) {
          clock.advance(gap);
          const decision = limiter.take('k');
          if (decision.allowed) {
            allowedAt.push(clock.nowMs());
            assert.ok(decision.remaining >= 0 && decision.remaining < limit);
          } else {
            assert.ok(decision.retryAfterMs > 0 && decision.retryAfterMs <= windowMs / limit + 1e-6);
          }
        }
        const interval = windowMs / limit;
        for (let i = 0; i < allowedAt.length; i += 1) {
          for (let j = i; j < allowedAt.length; j += 1) {
            const span = (allowedAt[j] as number) - (allowedAt[i] as number);
            assert.ok(j - i + 1 <= limit + span / interval + 1e-9, `${j - i + 1} requests in ${span} ms`);
          }
        }
      },
    ),
  );
});

test('property: a client that waits for retryAfterMs is then allowed', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 50 }), fc.integer({ min: 1, max: 200 }), (limit, burst) => {
      const clock = manualClock();
      const limiter = new RateLimiter({ limit, windowMs: MINUTE, clock });
      let last = limiter.take('k');
      for (let i = 1; i < burst && last.allowed; i += 1) last = limiter.take('k');
      if (last.allowed) return;
      clock.advance(Math.ceil(last.retryAfterMs));
      assert.equal(limiter.take('k').allowed, true);
    }),
  );
});

test('bad options are refused', () => {
  const clock = manualClock();
  assert.throws(() => new RateLimiter({ limit: 0, windowMs: MINUTE, clock }), RangeError);
  assert.throws(() => new RateLimiter({ limit: 1.5, windowMs: MINUTE, clock }), RangeError);
  assert.throws(() => new RateLimiter({ limit: 1, windowMs: 0, clock }), RangeError);
  assert.throws(() => new RateLimiter({ limit: 1, windowMs: MINUTE, clock, maxKeys: 0 }), RangeError);
});

test('client addresses: IPv4 as is, IPv4-mapped as IPv4, IPv6 by its /64', () => {
  assert.equal(clientAddressKey('203.0.113.9'), '203.0.113.9');
  assert.equal(clientAddressKey('::ffff:203.0.113.9'), '203.0.113.9');
  assert.equal(clientAddressKey('::FFFF:cb00:7109'), '203.0.113.9');
  assert.equal(clientAddressKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64');
  assert.equal(clientAddressKey('2001:0db8:0001:0002:ffff:ffff:ffff:ffff'), '2001:db8:1:2::/64');
  assert.equal(clientAddressKey('2001:db8::1'), '2001:db8:0:0::/64');
  assert.equal(clientAddressKey('::1'), '0:0:0:0::/64');
  assert.equal(clientAddressKey('fe80::1%eth0'), 'fe80:0:0:0::/64');
  assert.equal(clientAddressKey('64:ff9b::198.51.100.1'), '64:ff9b:0:0::/64');
});
