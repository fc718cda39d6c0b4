import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_PASSWORD_HASH_COST, PasswordHasher } from './password.ts';

test('passwords: salted scrypt at the configured cost, verified, wrong ones refused', async () => {
  const hasher = new PasswordHasher(14);
  const stored = await hasher.hash('p4ss-w0rd');
  assert.match(stored, /^scrypt\$16384\$8\$1\$/);
  assert.notEqual(stored, await hasher.hash('p4ss-w0rd'), 'a fresh salt each time');
  assert.deepEqual(await hasher.verify('p4ss-w0rd', stored), { ok: true, needsRehash: false });
  assert.deepEqual(await hasher.verify('p4ss-w0rD', stored), { ok: false, needsRehash: false });
  assert.deepEqual(await hasher.verify('x', 'garbage'), { ok: false, needsRehash: false });
  assert.deepEqual(
    await hasher.verify('x', 'scrypt$1000$8$1$AAAA$AAAA'),
    { ok: false, needsRehash: false },
    'N not a power of two',
  );
  assert.equal(await hasher.verifyUnknown('p4ss-w0rd'), false);
});

test("passwords: OWASP's minimum by default (N=2^17, r=8, p=1) fits scrypt's memory limit", async () => {
  assert.equal(DEFAULT_PASSWORD_HASH_COST, 17);
  const hasher = new PasswordHasher();
  const stored = await hasher.hash('p4ss-w0rd');
  assert.match(stored, /^scrypt\$131072\$8\$1\$/);
  assert.equal((await hasher.verify('p4ss-w0rd', stored)).ok, true);
});

test('passwords: a hash below the current cost verifies and asks to be rehashed, only when right', async () => {
  const old = await new PasswordHasher(14).hash('p4ss-w0rd');
  const current = new PasswordHasher(15);
  assert.deepEqual(await current.verify('p4ss-w0rd', old), { ok: true, needsRehash: true });
  assert.deepEqual(await current.verify('wrong', old), { ok: false, needsRehash: false });
  const rehashed = await current.hash('p4ss-w0rd');
  assert.match(rehashed, /^scrypt\$32768\$8\$1\$/);
  assert.deepEqual(await current.verify('p4ss-w0rd', rehashed), { ok: true, needsRehash: false });
});

test('passwords: the cost is bounded', () => {
  assert.throws(() => new PasswordHasher(13), /from 14 to 20/);
  assert.throws(() => new PasswordHasher(21), /from 14 to 20/);
});
