// A short-lived cache of verified access tokens: the token lookup was the
// largest cost of an authenticated request. Only successful lookups are kept,
// for at most TTL_MS; deleting a token forgets it here at once, and other
// Gantry processes see a deletion or a changed account within TTL_MS.
// Passwords are never cached (AuthenticationService verifies each one against
// the stored hash), so a changed password or a sign-in lock (LoginLimiter)
// applies to the very next request.
import type { Clock } from '../modules/clock.ts';
import type { AccessTokenScope } from '../modules/scopes.ts';
import type { AccessToken } from '../models/access-tokens.ts';
import type { User } from '../models/users.ts';

/** A token that verified, with its owner and its parsed scope. */
export interface VerifiedToken {
  token: AccessToken;
  owner: User;
  scope: AccessTokenScope;
}

export const CREDENTIAL_CACHE_TTL_MS = 1000;
const MAX_ENTRIES = 10_000;

interface Entry {
  verified: VerifiedToken;
  expiresAtMs: number;
}

export class CredentialCache {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly clock: Clock) {}

  get(tokenHash: string): VerifiedToken | null {
    const entry = this.entries.get(tokenHash);
    if (!entry) return null;
    if (entry.expiresAtMs <= this.clock.nowMs()) {
      this.entries.delete(tokenHash);
      return null;
    }
    return entry.verified;
  }

  set(tokenHash: string, verified: VerifiedToken): void {
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(tokenHash, { verified, expiresAtMs: this.clock.nowMs() + CREDENTIAL_CACHE_TTL_MS });
  }

  forgetToken(tokenId: number): void {
    for (const [hash, entry] of this.entries) if (entry.verified.token.id === tokenId) this.entries.delete(hash);
  }
}
