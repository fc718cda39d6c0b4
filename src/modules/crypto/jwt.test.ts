import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { signJwt, verifyJwt } from './jwt.ts';

const key = randomBytes(32);
const claims = { sub: '7', nbf: 1000, exp: 2000, scp: 'Actions.Results:1:2', TaskID: 7 };

test('a token verifies with its key inside nbf..exp, and with any of several keys (rotation)', () => {
  const token = signJwt(claims, key);
  assert.deepEqual(verifyJwt(token, [key], 1500), claims);
  assert.deepEqual(verifyJwt(token, [randomBytes(32), key], 1500), claims);
  assert.equal(verifyJwt(token, [randomBytes(32)], 1500), null, 'another key');
  assert.equal(verifyJwt(token, [key], 999), null, 'before nbf');
  assert.equal(verifyJwt(token, [key], 2000), null, 'at exp');
});

test('a changed payload, a changed signature or another algorithm is refused', () => {
  const [header, payload, sig] = signJwt(claims, key).split('.') as [string, string, string];
  const forged = Buffer.from(JSON.stringify({ ...claims, TaskID: 8 })).toString('base64url');
  assert.equal(verifyJwt(`${header}.${forged}.${sig}`, [key], 1500), null);
  assert.equal(verifyJwt(`${header}.${payload}.${sig.slice(0, -2)}AA`, [key], 1500), null);
  const none = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
  assert.equal(verifyJwt(`${none}.${payload}.${sig}`, [key], 1500), null);
  const hs512 = Buffer.from(JSON.stringify({ alg: 'HS512', typ: 'JWT' })).toString('base64url');
  const sig512 = createHmac('sha512', key).update(`${hs512}.${payload}`).digest('base64url');
  assert.equal(verifyJwt(`${hs512}.${payload}.${sig512}`, [key], 1500), null);
  assert.equal(verifyJwt('not.a.jwt!', [key], 1500), null);
  assert.equal(verifyJwt(`${header}.bm90IGpzb24.${sig}`, [key], 1500), null, 'payload not JSON');
});
