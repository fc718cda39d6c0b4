// A short-lived cache of verified access tokens: the token lookup was the
// largest cost of an authenticated request. Only successful lookups are kept,
// for at most TTL_MS; deleting a token forgets it here at once, and other
// Gantry processes see a deletion or a changed account within TTL_MS.
import type { Clock } from '../modules/clock.ts';
import type { AccessToken } from '../models/access-tokens.ts';
import type { User } from '../models/users.ts';

export const CREDENTIAL_CACHE_TTL_MS = 1000;
const MAX_ENTRIES = 10_000;

interface Entry {
  token: AccessToken;
  owner: User;
  expiresAtMs: number;
}

export class CredentialCache {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly clock: Clock) {}

  get(tokenHash: string): { token: AccessToken; owner: User } | null {
    const entry = this.entries.get(tokenHash);
    if (!entry) return null;
    if (entry.expiresAtMs <= this.clock.nowMs()) {
      this.entries.delete(tokenHash);
      return null;
    }
    return entry;
  }

  set(tokenHash: string, token: AccessToken, owner: User): void {
    if (this.entries.size >= MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(tokenHash, { token, owner, expiresAtMs: this.clock.nowMs() + CREDENTIAL_CACHE_TTL_MS });
  }

  forgetToken(tokenId: number): void {
    for (const [hash, entry] of this.entries) if (entry.token.id === tokenId) this.entries.delete(hash);
  }
}
