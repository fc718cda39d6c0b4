// Password hashing with scrypt (memory-hard, in node:crypto). The stored form
// carries its parameters, `scrypt$N$r$p$salt$key`, so the cost can be raised
// without breaking sign-ins: a hash below the current cost still verifies, and
// `verify` says it needs rehashing (the caller stores a new hash on the next
// successful sign-in).
//
// Guarantees:
// - The default cost is OWASP's current minimum for scrypt: N=2^17, r=8, p=1
//   (Password Storage Cheat Sheet). One hash then holds 128 MiB for roughly
//   0.3–0.5 s of one libuv thread; at most UV_THREADPOOL_SIZE (4) run at once.
// - `verifyUnknown` spends the same work as a real verification, so a sign-in
//   with an unknown user name cannot be told apart by its timing.
// - Verification compares in constant time; a malformed stored hash never verifies.
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

/** log2 N of OWASP's minimum; the default of GANTRY_PASSWORD_HASH_COST. */
export const DEFAULT_PASSWORD_HASH_COST = 17;
/** The lowest cost the setting accepts (Gantry's former fixed cost, N=2^14): for tests only. */
export const MIN_PASSWORD_HASH_COST = 14;
/** The highest accepted: 2^20 × r=8 is 1 GiB per hash. */
export const MAX_PASSWORD_HASH_COST = 20;

const R = 8;
const P = 1;
const KEY_LENGTH = 32;
const SALT_LENGTH = 16;

function derive(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  // scrypt needs 128·N·r bytes (plus a little for p); maxmem must allow it or
  // Node refuses with "memory limit exceeded". Twice the need leaves headroom.
  const maxmem = 2 * 128 * n * r * Math.max(1, p);
  return new Promise((resolve, reject) => {
    scrypt(password, salt, KEY_LENGTH, { N: n, r, p, maxmem }, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

interface StoredHash {
  n: number;
  r: number;
  p: number;
  salt: Buffer;
  key: Buffer;
}

/** The parts of a stored hash, or null when it is not one this module wrote. */
function parseStored(stored: string): StoredHash | null {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return null;
  const [n, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  const salt = Buffer.from(parts[4] ?? '', 'base64');
  const key = Buffer.from(parts[5] ?? '', 'base64');
  // N must be a power of two above 1 (scrypt's rule); r and p small positive integers.
  const validN = Number.isInteger(n) && n > 1 && (n & (n - 1)) === 0 && n <= 2 ** MAX_PASSWORD_HASH_COST;
  if (
    !validN ||
    !Number.isInteger(r) ||
    r < 1 ||
    r > 64 ||
    !Number.isInteger(p) ||
    p < 1 ||
    p > 16 ||
    key.length !== KEY_LENGTH
  )
    return null;
  return { n, r, p, salt, key };
}

export interface PasswordCheck {
  ok: boolean;
  /** The password was right and the stored hash is below the current cost: store `hash(password)`. */
  needsRehash: boolean;
}

export class PasswordHasher {
  private readonly n: number;
  private dummy: Promise<string> | null = null;

  /** `cost` is log2 N (GANTRY_PASSWORD_HASH_COST). */
  constructor(readonly cost: number = DEFAULT_PASSWORD_HASH_COST) {
    if (!Number.isInteger(cost) || cost < MIN_PASSWORD_HASH_COST || cost > MAX_PASSWORD_HASH_COST) {
      throw new RangeError(
        `password hash cost must be an integer from ${MIN_PASSWORD_HASH_COST} to ${MAX_PASSWORD_HASH_COST}, got ${cost}`,
      );
    }
    this.n = 2 ** cost;
  }

  async hash(password: string): Promise<string> {
    const salt = randomBytes(SALT_LENGTH);
    const key = await derive(password, salt, this.n, R, P);
    return `scrypt$${this.n}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`;
  }

  async verify(password: string, stored: string): Promise<PasswordCheck> {
    const parsed = parseStored(stored);
    if (!parsed) {
      // No usable hash (an account without a password): spend the same time anyway.
      await this.verifyUnknown(password);
      return { ok: false, needsRehash: false };
    }
    const actual = await derive(password, parsed.salt, parsed.n, parsed.r, parsed.p);
    const ok = timingSafeEqual(actual, parsed.key);
    return { ok, needsRehash: ok && (parsed.n < this.n || parsed.r < R || parsed.p < P) };
  }

  /**
   * For a user name that does not exist: the work of one verification at the
   * current cost, against a hash of a random password made once per process
   * (the first call pays for making it too). Always false.
   */
  async verifyUnknown(password: string): Promise<false> {
    this.dummy ??= this.hash(randomBytes(18).toString('base64'));
    const parsed = parseStored(await this.dummy) as StoredHash;
    const actual = await derive(password, parsed.salt, parsed.n, parsed.r, parsed.p);
    timingSafeEqual(actual, parsed.key);
    return false;
  }
}
