import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileKeyStore } from './key-file.ts';
import { KeyRing, UnknownKeyError, configuredKeySource, fileKeySource, openKeyRing } from './key-ring.ts';
import { SecretCipher } from './secret-cipher.ts';

const dirs: string[] = [];
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gantry-keys-'));
  dirs.push(dir);
  return dir;
}
after(() => {
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

/** A clock the test moves by hand. */
function manualClock(): { now: () => number; advance(ms: number): void } {
  let t = 1_000_000;
  return { now: () => t, advance: (ms) => (t += ms) };
}

test('first start generates <data>/secret.key (0600) once; it is the current key', () => {
  const dataDir = tempDir();
  const { ring, store, configured } = openKeyRing({ dataDir, configuredKey: null, previousKeys: [] });
  assert.equal(configured, false);
  const stat = fs.statSync(store.legacyPath);
  assert.equal(stat.mode & 0o777, 0o600);
  const material = fs.readFileSync(store.legacyPath, 'utf8');
  assert.equal(ring.currentKeyId(), new SecretCipher(material.trim()).keyId);
  openKeyRing({ dataDir, configuredKey: null, previousKeys: [] });
  assert.equal(fs.readFileSync(store.legacyPath, 'utf8'), material, 'an existing key is never replaced');
  assert.equal(fs.existsSync(store.dirPath), false, 'no key folder until the first rotation');
});

test('a rotation in another process: the ring follows the pointer after its check interval, and old values still decrypt', () => {
  const dataDir = tempDir();
  const clock = manualClock();
  const { ring } = openKeyRing(
    { dataDir, configuredKey: null, previousKeys: [] },
    { now: clock.now, checkIntervalMs: 1000 },
  );
  const oldId = ring.currentKeyId();
  const old = ring.encrypt('dàtä', 'secret:1:0:A');

  const cli = new FileKeyStore(dataDir);
  const added = cli.addKey();
  assert.equal(fs.statSync(added.path).mode & 0o777, 0o600);
  assert.equal(path.basename(added.path), `${added.id}.key`);
  cli.setCurrent(added.id);
  assert.equal(fs.readFileSync(cli.currentPath, 'utf8').trim(), added.id);

  clock.advance(500);
  assert.equal(ring.currentKeyId(), oldId, 'no disk check within the interval');
  clock.advance(600);
  assert.equal(ring.currentKeyId(), added.id, 'the pointer change is seen after the interval');
  const fresh = ring.encrypt('new', 'secret:1:0:B');
  assert.equal(KeyRing.keyIdOf(fresh), added.id);
  assert.equal(ring.decrypt(old, 'secret:1:0:A'), 'dàtä', 'the old key stays in the ring');
  assert.equal(ring.decrypt(fresh, 'secret:1:0:B'), 'new');
});

test('a value under a key the ring has not loaded yet makes it re-read the keys', () => {
  const dataDir = tempDir();
  const clock = manualClock();
  const { ring } = openKeyRing({ dataDir, configuredKey: null, previousKeys: [] }, { now: clock.now });
  const other = new FileKeyStore(dataDir);
  const added = other.addKey();
  other.setCurrent(added.id);
  const sealed = new SecretCipher(added.material).encrypt('v', 'aad');
  assert.equal(ring.decrypt(sealed, 'aad'), 'v');
  const stranger = new SecretCipher('s'.repeat(40)).encrypt('v', 'aad');
  assert.throws(() => ring.decrypt(stranger, 'aad'), UnknownKeyError);
  assert.throws(() => ring.decrypt('garbage', 'aad'), /unknown secret format/);
});

test('a broken pointer is an error at start, but a running ring keeps its keys and reports it', () => {
  const dataDir = tempDir();
  const clock = manualClock();
  const errors: unknown[] = [];
  const { ring, store } = openKeyRing(
    { dataDir, configuredKey: null, previousKeys: [] },
    { now: clock.now, onRefreshError: (e) => errors.push(e) },
  );
  const id = ring.currentKeyId();
  fs.mkdirSync(store.dirPath, { recursive: true });
  fs.writeFileSync(store.currentPath, 'deadbeef\n');
  clock.advance(2000);
  assert.equal(ring.currentKeyId(), id);
  assert.equal(errors.length, 1);
  assert.match(String(errors[0]), /names key deadbeef/);
  assert.throws(() => new KeyRing(fileKeySource(store, [])), /names key deadbeef/);
  fs.writeFileSync(store.legacyPath, 'short\n');
  assert.throws(() => store.readKeys(), /holds no usable key/);
});

test('configured key: current, no file created; files and GANTRY_SECRET_KEY_PREVIOUS still decrypt', () => {
  const dataDir = tempDir();
  const generated = openKeyRing({ dataDir, configuredKey: null, previousKeys: [] }).ring;
  const fromFile = generated.encrypt('from-file', 'aad');
  const previous = 'p'.repeat(40);
  const fromPrevious = new SecretCipher(previous).encrypt('from-previous', 'aad');
  const configured = 'c'.repeat(40);
  const { ring, configured: isConfigured } = openKeyRing({
    dataDir,
    configuredKey: configured,
    previousKeys: [previous],
  });
  assert.equal(isConfigured, true);
  assert.equal(ring.currentKeyId(), new SecretCipher(configured).keyId);
  assert.equal(ring.decrypt(fromFile, 'aad'), 'from-file');
  assert.equal(ring.decrypt(fromPrevious, 'aad'), 'from-previous');
  assert.equal(KeyRing.keyIdOf(ring.encrypt('x', 'aad')), new SecretCipher(configured).keyId);

  const empty = tempDir();
  openKeyRing({ dataDir: empty, configuredKey: configured, previousKeys: [] });
  assert.deepEqual(fs.readdirSync(empty), [], 'a configured key writes nothing to the data folder');
  assert.equal(new KeyRing(configuredKeySource(new FileKeyStore(empty), configured, [])).keyIds().length, 1);
});

test('removeKey deletes a key file but never the current one', () => {
  const dataDir = tempDir();
  const { ring, store } = openKeyRing({ dataDir, configuredKey: null, previousKeys: [] });
  const legacyId = ring.currentKeyId();
  const added = store.addKey();
  store.setCurrent(added.id);
  assert.throws(() => store.removeKey(added.id), /current key/);
  assert.equal(store.removeKey(legacyId), store.legacyPath);
  assert.equal(fs.existsSync(store.legacyPath), false);
  assert.deepEqual(
    store.readKeys().map((k) => k.id),
    [added.id],
  );
  assert.throws(() => store.setCurrent('00000000'), /no key file holds/);
  // Restarting finds the ring from the folder alone, and does not generate a new secret.key.
  const reopened = openKeyRing({ dataDir, configuredKey: null, previousKeys: [] });
  assert.equal(reopened.ring.currentKeyId(), added.id);
  assert.equal(fs.existsSync(store.legacyPath), false);
});
