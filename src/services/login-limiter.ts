// Failed password sign-ins per account (GitHub-style; Forgejo has no such
// limit). Every password check goes through AuthenticationService, so this
// covers basic auth on every route: the API, git over HTTP, and whatever
// else authenticates there.
//
// Guarantees:
// - `maxFailures` failed password checks of one user name within WINDOW_MS
//   lock that name's password sign-in for LOCKOUT_MS; while locked, a sign-in
//   is refused (429 with Retry-After) before the password is even checked, so
//   a right password does not get through either and a locked account costs
//   no hashing. Tokens are not affected: they are not passwords.
// - A successful sign-in clears the name's failures.
// - Unknown user names are counted like real ones, so a lock does not reveal
//   whether an account exists.
// - In-process: each Gantry process counts on its own, so N processes behind a
//   round-robin proxy allow up to N × maxFailures tries per window, and a
//   restart forgets the counts. Memory is bounded (MAX_TRACKED names).
import type { Clock } from '../modules/clock.ts';

export const LOGIN_FAILURE_WINDOW_MS = 5 * 60_000;
export const LOGIN_LOCKOUT_MS = 15 * 60_000;
const MAX_TRACKED = 100_000;

interface Failures {
  /** When the first failure of the current window happened. */
  windowStartMs: number;
  count: number;
  /** Set once `count` reached the limit; sign-in is refused until then. */
  lockedUntilMs: number;
}

export class LoginLimiter {
  private readonly failures = new Map<string, Failures>();

  /** `maxFailures` 0 disables the limiter. */
  constructor(
    private readonly clock: Clock,
    readonly maxFailures: number,
  ) {}

  /** Seconds until `name` may try a password again; 0 when it may now. */
  retryAfterSec(name: string): number {
    if (this.maxFailures === 0) return 0;
    const entry = this.failures.get(key(name));
    if (!entry) return 0;
    const remaining = entry.lockedUntilMs - this.clock.nowMs();
    return remaining > 0 ? Math.ceil(remaining / 1000) : 0;
  }

  recordFailure(name: string): void {
    if (this.maxFailures === 0) return;
    const now = this.clock.nowMs();
    const k = key(name);
    let entry = this.failures.get(k);
    if (!entry || now - entry.windowStartMs > LOGIN_FAILURE_WINDOW_MS) {
      entry = { windowStartMs: now, count: 0, lockedUntilMs: 0 };
    }
    entry.count += 1;
    if (entry.count >= this.maxFailures) {
      entry.lockedUntilMs = now + LOGIN_LOCKOUT_MS;
      // The next window starts when the lock ends: a locked name gets a full
      // allowance afterwards, not a leftover count.
      entry.windowStartMs = entry.lockedUntilMs;
      entry.count = 0;
    }
    // Re-inserting keeps the Map in order of last failure: eviction drops the stalest.
    this.failures.delete(k);
    if (this.failures.size >= MAX_TRACKED) this.evict(now);
    this.failures.set(k, entry);
  }

  recordSuccess(name: string): void {
    this.failures.delete(key(name));
  }

  private evict(now: number): void {
    for (const [k, entry] of this.failures) {
      if (entry.lockedUntilMs <= now && now - entry.windowStartMs > LOGIN_FAILURE_WINDOW_MS) this.failures.delete(k);
    }
    // Still full of live entries: drop the one with the oldest failure.
    if (this.failures.size >= MAX_TRACKED) this.failures.delete(this.failures.keys().next().value as string);
  }
}

/** User names are case-insensitive (Forgejo's lower_name). */
function key(name: string): string {
  return name.toLowerCase();
}
