// Request rate limits per key (a client IP, a credential digest), in memory.
//
// Algorithm: GCRA, the "generic cell rate algorithm" — a token bucket kept as
// one small record per key. A bucket holds `limit` requests and refills at `limit`
// per window (one every window/limit ms), so a client may burst `limit`
// requests and then keeps the steady rate; over any span of t ms it gets at
// most limit + t/(window/limit) requests. Chosen over a sliding-window log
// (one timestamp per request: memory grows with the limit) and over fixed
// windows (twice the limit across a window edge, and a thundering herd at
// each reset). The record says when the bucket will be full again (its
// "theoretical arrival time", TAT). A key whose TAT has passed is a
// full bucket, exactly like a key never seen, so idle keys can be dropped at
// any time without changing any answer.
//
// Memory is bounded: keys sit in a Map in least-recently-used order (a touch
// moves a key to the end); each call drops a few expired keys from the front,
// and at `maxKeys` the least recently used key is evicted even if not yet
// full. A flood of made-up keys (random tokens) therefore costs a fixed
// amount of memory; its only effect is that evicted keys start over with a
// full bucket — failing open for them, never refusing a well-behaved client.
import { isIPv6 } from 'node:net';
import type { Clock } from './clock.ts';

export interface RateLimiterOptions {
  /** Requests per window (at least 1). */
  limit: number;
  windowMs: number;
  clock: Clock;
  /** Most keys tracked at once. */
  maxKeys?: number;
}

export interface RateLimitDecision {
  allowed: boolean;
  limit: number;
  /** Requests still allowed right now, after this one. */
  remaining: number;
  /** Epoch milliseconds at which the bucket is full again. */
  resetAtMs: number;
  /** When refused: milliseconds until one request is allowed again (0 when allowed). */
  retryAfterMs: number;
}

export const DEFAULT_MAX_KEYS = 100_000;
/** Expired keys dropped per call, so the sweep costs O(1) per request. */
const SWEEP_PER_CALL = 4;

/**
 * A bucket as of `atMs`: its TAT is atMs + debt / limit. Kept in whole
 * units of 1/limit ms so that counting is exact (window/limit is rarely a
 * whole number of ms, and float sums drift at high limits): a request
 * costs `windowMs` units, a full bucket's debt is 0, an empty one's
 * windowMs × limit.
 */
interface Bucket {
  atMs: number;
  debt: number;
}

export class RateLimiter {
  readonly limit: number;
  readonly windowMs: number;
  private readonly capacity: number;
  private readonly maxKeys: number;
  private readonly clock: Clock;
  /** Least recently used first. */
  private readonly buckets = new Map<string, Bucket>();

  constructor(options: RateLimiterOptions) {
    const { limit, windowMs } = options;
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`limit must be a whole number ≥ 1, got ${limit}`);
    if (!Number.isInteger(windowMs) || windowMs < 1)
      throw new RangeError(`windowMs must be a whole number ≥ 1, got ${windowMs}`);
    if (limit * windowMs > Number.MAX_SAFE_INTEGER / 1024)
      throw new RangeError('limit × windowMs is too large to count exactly');
    const maxKeys = options.maxKeys ?? DEFAULT_MAX_KEYS;
    if (!Number.isInteger(maxKeys) || maxKeys < 1)
      throw new RangeError(`maxKeys must be a whole number ≥ 1, got ${maxKeys}`);
    this.limit = limit;
    this.windowMs = windowMs;
    this.capacity = limit * windowMs;
    this.maxKeys = maxKeys;
    this.clock = options.clock;
  }

  /** Keys currently tracked. */
  get size(): number {
    return this.buckets.size;
  }

  /** Counts one request of `key`, unless it is over the limit (a refused request costs nothing). */
  take(key: string): RateLimitDecision {
    const now = Math.floor(this.clock.nowMs());
    this.sweep(now);
    const debt = this.debtAt(this.buckets.get(key), now);
    const next = debt + this.windowMs;
    if (next > this.capacity) {
      this.touch(key, { atMs: now, debt });
      return {
        allowed: false,
        limit: this.limit,
        remaining: 0,
        resetAtMs: now + debt / this.limit,
        retryAfterMs: (next - this.capacity) / this.limit,
      };
    }
    this.touch(key, { atMs: now, debt: next });
    return {
      allowed: true,
      limit: this.limit,
      remaining: Math.floor((this.capacity - next) / this.windowMs),
      resetAtMs: now + next / this.limit,
      retryAfterMs: 0,
    };
  }

  private debtAt(bucket: Bucket | undefined, now: number): number {
    if (bucket === undefined) return 0;
    const elapsed = now - bucket.atMs;
    // Compared in ms first: elapsed × limit may be past exact integers, and any such bucket is full anyway.
    if (elapsed * this.limit >= bucket.debt) return 0;
    return bucket.debt - Math.max(0, elapsed) * this.limit;
  }

  private touch(key: string, bucket: Bucket): void {
    if (this.buckets.has(key)) {
      this.buckets.delete(key);
    } else if (this.buckets.size >= this.maxKeys) {
      const oldest = this.buckets.keys().next();
      if (!oldest.done) this.buckets.delete(oldest.value);
    }
    this.buckets.set(key, bucket);
  }

  /** Drops full buckets from the least recently used end; stops at the first one still refilling. */
  private sweep(now: number): void {
    for (let i = 0; i < SWEEP_PER_CALL; i += 1) {
      const first = this.buckets.entries().next();
      if (first.done || this.debtAt(first.value[1], now) > 0) return;
      this.buckets.delete(first.value[0]);
    }
  }
}

function ipv6Hextets(address: string): number[] {
  const parse = (part: string): number[] => {
    if (part === '') return [];
    const groups = part.split(':');
    const last = groups[groups.length - 1] as string;
    const out = groups.slice(0, last.includes('.') ? -1 : undefined).map((g) => parseInt(g, 16));
    if (last.includes('.')) {
      const [a = 0, b = 0, c = 0, d = 0] = last.split('.').map(Number);
      out.push(a * 256 + b, c * 256 + d);
    }
    return out;
  };
  const gap = address.indexOf('::');
  if (gap < 0) return parse(address);
  const head = parse(address.slice(0, gap));
  const tail = parse(address.slice(gap + 2));
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

/**
 * The rate-limit key of a client address: an IPv4 address as is (also when
 * it arrives IPv4-mapped, `::ffff:a.b.c.d`, on a dual-stack socket), an IPv6
 * address by its /64, the smallest block a subscriber gets — otherwise one
 * host could take a fresh key per request from its 2^64 addresses.
 */
export function clientAddressKey(address: string): string {
  const bare = address.split('%')[0] ?? address;
  if (!isIPv6(bare)) return bare;
  const hextets = ipv6Hextets(bare);
  if (hextets.slice(0, 5).every((h) => h === 0) && hextets[5] === 0xffff) {
    const [hi = 0, lo = 0] = hextets.slice(6);
    return [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
  }
  return `${hextets
    .slice(0, 4)
    .map((h) => h.toString(16))
    .join(':')}::/64`;
}
