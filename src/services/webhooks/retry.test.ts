// The webhook retry policy: Forgejo-like exponential backoff over about a day,
// with jitter that only shortens a wait.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_RETRY_POLICY, retryDelayMs } from './retry.ts';

test('8 attempts over about a day by default, then none', () => {
  const waits = [1, 2, 3, 4, 5, 6, 7].map((n) => retryDelayMs(DEFAULT_RETRY_POLICY, n, null, () => 0) ?? -1);
  assert.ok(
    waits.every((w, i) => w > 0 && (i === 0 || w > (waits[i - 1] ?? 0))),
    String(waits),
  );
  const total = waits.reduce((a, b) => a + b, 0);
  assert.ok(total > 12 * 3600_000 && total < 30 * 3600_000, `total ${total}`);
  assert.equal(retryDelayMs(DEFAULT_RETRY_POLICY, 8), null);
  // Jitter only shortens, by at most 20 %.
  const jittered = retryDelayMs(DEFAULT_RETRY_POLICY, 1, null, () => 1) ?? 0;
  assert.ok(jittered >= 12_000 && jittered <= 15_000);
});
