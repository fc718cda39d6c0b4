// Compact HS256 JSON Web Tokens (RFC 7519), the format of the Actions runtime
// token (Forgejo: services/actions/auth.go). Only HS256 is accepted: a token
// naming another algorithm (`none` included) is refused, whatever it claims.
// Verification tries each given key, so tokens signed before a key rotation
// stay valid until they expire.
import { createHmac, timingSafeEqual } from 'node:crypto';

const HEADER = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT' })).toString('base64url');

function signature(signingInput: string, key: Buffer): Buffer {
  return createHmac('sha256', key).update(signingInput, 'utf8').digest();
}

export function signJwt(claims: Record<string, unknown>, key: Buffer): string {
  const input = `${HEADER}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  return `${input}.${signature(input, key).toString('base64url')}`;
}

/** True when `value` has the shape of a JWT (three base64url parts), before any check. */
export function looksLikeJwt(value: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(value);
}

/**
 * The claims of `token` when one of `keys` signed it with HS256 and it is
 * within its `nbf`..`exp` window at `nowSec`; otherwise null.
 */
export function verifyJwt(token: string, keys: readonly Buffer[], nowSec: number): Record<string, unknown> | null {
  if (!looksLikeJwt(token)) return null;
  const [header, payload, sig] = token.split('.') as [string, string, string];
  let parsedHeader: unknown;
  let claims: unknown;
  try {
    parsedHeader = JSON.parse(Buffer.from(header, 'base64url').toString('utf8'));
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    return null;
  }
  if (typeof parsedHeader !== 'object' || parsedHeader === null || (parsedHeader as { alg?: unknown }).alg !== 'HS256')
    return null;
  if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) return null;
  const given = Buffer.from(sig, 'base64url');
  const input = `${header}.${payload}`;
  const signed = keys.some((key) => {
    const expected = signature(input, key);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!signed) return null;
  const { exp, nbf } = claims as { exp?: unknown; nbf?: unknown };
  if (typeof exp !== 'number' || nowSec >= exp) return null;
  if (typeof nbf === 'number' && nowSec < nbf) return null;
  return claims as Record<string, unknown>;
}
