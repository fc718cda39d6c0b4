import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SecretCipher } from './secret-cipher.ts';
import { digestsEqual, generateTokenString, hashToken, looksLikeAccessToken } from './tokens.ts';

test('tokens: 40 hex, hashed, compared', () => {
  const token = generateTokenString();
  assert.equal(looksLikeAccessToken(token), true);
  assert.notEqual(token, generateTokenString());
  assert.equal(hashToken(token).length, 64);
  assert.equal(digestsEqual(hashToken(token), hashToken(token)), true);
  assert.equal(digestsEqual(hashToken(token), hashToken(generateTokenString())), false);
});

test('tokens: every one fresh, across refills of the random pool', () => {
  const tokens = Array.from({ length: 1000 }, () => generateTokenString());
  assert.ok(tokens.every(looksLikeAccessToken));
  assert.equal(new Set(tokens).size, tokens.length);
});

test('secret cipher: AES-GCM round trip bound to its place and key', () => {
  const cipher = new SecretCipher('k'.repeat(32));
  const sealed = cipher.encrypt('dàtä\n', 'repo:1:TOKEN');
  assert.ok(!sealed.includes('dàtä'));
  assert.notEqual(sealed, cipher.encrypt('dàtä\n', 'repo:1:TOKEN'), 'fresh nonce per value');
  assert.equal(cipher.decrypt(sealed, 'repo:1:TOKEN'), 'dàtä\n');
  assert.throws(() => cipher.decrypt(sealed, 'repo:2:TOKEN'), 'copied to another row, it does not decrypt');
  assert.throws(() => new SecretCipher('z'.repeat(32)).decrypt(sealed, 'repo:1:TOKEN'), /another key/);
  assert.equal(SecretCipher.keyIdOf(sealed), cipher.keyId);
});
