// When a failed delivery is tried again: exponential back-off with jitter
// (Standard Webhooks practice; Forgejo itself never retries, see deliver.go).
// The defaults give 8 attempts over about a day: the waits after attempts
// 1…7 are ~15 s, 1 min, 4 min, 16 min, 1 h, 4.3 h and 12 h (capped), each
// shortened by up to `jitter` at random so that failures of one receiver do
// not come back in lockstep.

export interface RetryPolicy {
  /** Attempts in all, the first included (1 = never retry). */
  maxAttempts: number;
  /** Wait after the first failed attempt. */
  baseDelayMs: number;
  /** Each further wait is this many times longer. */
  factor: number;
  maxDelayMs: number;
  /** 0…1: the share of each wait that is random. */
  jitter: number;
}

export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = {
  maxAttempts: 8,
  baseDelayMs: 15_000,
  factor: 4,
  maxDelayMs: 12 * 3600_000,
  jitter: 0.2,
};

/**
 * Milliseconds to wait after `attemptsDone` failed attempts, or null when the
 * delivery has used all its attempts. A `Retry-After` the receiver sent
 * (429/503) lengthens the wait, never beyond the cap.
 */
export function retryDelayMs(
  policy: RetryPolicy,
  attemptsDone: number,
  retryAfterMs: number | null = null,
  random: () => number = Math.random,
): number | null {
  if (attemptsDone >= policy.maxAttempts) return null;
  const exponential = Math.min(policy.maxDelayMs, policy.baseDelayMs * policy.factor ** Math.max(0, attemptsDone - 1));
  const jittered = exponential * (1 - policy.jitter * random());
  const wait = retryAfterMs !== null ? Math.max(jittered, Math.min(retryAfterMs, policy.maxDelayMs)) : jittered;
  return Math.max(0, Math.round(wait));
}

/** `Retry-After` as seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | null {
  if (!value) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}
