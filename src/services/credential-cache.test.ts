import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Clock } from '../modules/clock.ts';
import type { AccessToken } from '../models/access-tokens.ts';
import type { User } from '../models/users.ts';
import { parseScopes } from '../modules/scopes.ts';
import { CREDENTIAL_CACHE_TTL_MS, CredentialCache } from './credential-cache.ts';

function fakeClock(): Clock & { advance(ms: number): void } {
  let now = 1_000_000;
  return { nowMs: () => now, nowSec: () => Math.floor(now / 1000), advance: (ms) => (now += ms) };
}

const token = { id: 7, uid: 3 } as AccessToken;
const owner = { id: 3, name: 'alice' } as User;
const verified = { token, owner, scope: parseScopes(['all']) };

test('entries expire after the TTL', () => {
  const clock = fakeClock();
  const cache = new CredentialCache(clock);
  cache.set('h', verified);
  assert.equal(cache.get('h')?.owner.name, 'alice');
  clock.advance(CREDENTIAL_CACHE_TTL_MS);
  assert.equal(cache.get('h'), null);
});

test('forgetting a token drops it at once', () => {
  const cache = new CredentialCache(fakeClock());
  cache.set('h1', verified);
  cache.forgetToken(7);
  assert.equal(cache.get('h1'), null);
});
