// Bearer secrets (access tokens, runner tokens): random, shown once, stored as a
// SHA-256 digest. A fast digest is right here: the input has 160 random bits, so
// there is nothing to brute-force, and lookups stay O(1) through a unique index.
import * as crypto from 'node:crypto';
import { createHash, randomFillSync, timingSafeEqual } from 'node:crypto';

const TOKEN_BYTES = 20;
/**
 * Random bytes drawn from the CSPRNG 256 tokens at a time (as Node pools
 * randomUUID's): a task's token is drawn for every claim, and a call to
 * randomBytes per token, with a buffer of its own, cost several times the
 * slice. Each token's bytes are used once; the pool is refilled when spent.
 */
const pool = Buffer.allocUnsafeSlow(TOKEN_BYTES * 256);
let poolAt = pool.length;

/** 40 lowercase hex characters, the format Forgejo/Gitea clients expect. */
export function generateTokenString(): string {
  if (poolAt + TOKEN_BYTES > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const token = pool.toString('hex', poolAt, poolAt + TOKEN_BYTES);
  poolAt += TOKEN_BYTES;
  return token;
}

/** One-shot hashing (Node ≥ 20.12): a third of createHash's cost, and every authenticated request pays it. */
const oneShotHash = typeof crypto.hash === 'function' ? crypto.hash : null;

export function hashToken(token: string): string {
  return oneShotHash ? oneShotHash('sha256', token, 'hex') : createHash('sha256').update(token, 'utf8').digest('hex');
}

export function looksLikeAccessToken(value: string): boolean {
  return /^[0-9a-f]{40}$/.test(value);
}

/** Constant-time comparison of two hex digests of equal length. */
export function digestsEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}
