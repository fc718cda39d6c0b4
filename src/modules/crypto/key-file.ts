// The keys that encrypt secrets at rest, when they are not configured: files in
// the data folder, owner-only. Layout:
//   <data>/secret.key             the first key, generated on first start
//   <data>/secret-keys/<id>.key   keys added by `gantry admin rotate-secret-key`
//   <data>/secret-keys/current    the id of the key new values are encrypted with
//                                 (absent: secret.key is the current key)
// Every file is written to a temporary name and renamed into place, so a reader
// (a running server) sees either the old or the new file, never half of one.
// A key file is never rewritten; old keys stay until `--prune` removes the ones
// no stored value uses, so an interrupted rotation loses nothing.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../private-files.ts';
import { SecretCipher } from './secret-cipher.ts';

export const KEY_FILE_NAME = 'secret.key';
export const KEY_DIR_NAME = 'secret-keys';
export const CURRENT_FILE_NAME = 'current';
/** Keys given as configuration or found in files must be at least this long. */
export const MIN_KEY_LENGTH = 32;

export interface StoredKey {
  id: string;
  material: string;
  path: string;
}

function generateMaterial(): string {
  return randomBytes(32).toString('base64');
}

/** Writes a whole file under a temporary name, flushes it and renames it into place. */
function writeFileAtomic(file: string, content: string): void {
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  const fd = fs.openSync(tmp, 'wx', PRIVATE_FILE_MODE);
  try {
    fs.writeSync(fd, content);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    fs.renameSync(tmp, file);
  } catch (error) {
    fs.rmSync(tmp, { force: true });
    throw error;
  }
  syncDir(path.dirname(file));
}

function syncDir(dir: string): void {
  try {
    const fd = fs.openSync(dir, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // Not every platform can fsync a directory; the rename is still atomic.
  }
}

export class FileKeyStore {
  readonly legacyPath: string;
  readonly dirPath: string;
  readonly currentPath: string;

  constructor(readonly dataDir: string) {
    this.legacyPath = path.join(dataDir, KEY_FILE_NAME);
    this.dirPath = path.join(dataDir, KEY_DIR_NAME);
    this.currentPath = path.join(this.dirPath, CURRENT_FILE_NAME);
  }

  /** Generates the first key into <data>/secret.key when the folder holds no key at all. */
  ensureKey(): void {
    if (fs.existsSync(this.legacyPath) || this.keyFileNames().length > 0) return;
    fs.mkdirSync(this.dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
    try {
      // `wx` fails if another process (a second server, the CLI) created it first: then theirs is used.
      fs.writeFileSync(this.legacyPath, `${generateMaterial()}\n`, { mode: PRIVATE_FILE_MODE, flag: 'wx' });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }

  /** Every key on disk. A file that holds no usable key is an error naming the file (restore it from a backup). */
  readKeys(options: { skipUnusable?: boolean } = {}): StoredKey[] {
    const files = [
      ...(fs.existsSync(this.legacyPath) ? [this.legacyPath] : []),
      ...this.keyFileNames().map((n) => path.join(this.dirPath, n)),
    ];
    const keys: StoredKey[] = [];
    for (const file of files) {
      let material: string;
      try {
        material = fs.readFileSync(file, 'utf8').trim();
      } catch (error) {
        // Removed by a concurrent prune between listing and reading.
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw error;
      }
      if (material.length < MIN_KEY_LENGTH) {
        if (options.skipUnusable) continue;
        throw new Error(
          `${file} holds no usable key (expected ${MIN_KEY_LENGTH}+ characters); restore it from a backup`,
        );
      }
      keys.push({ id: new SecretCipher(material).keyId, material, path: file });
    }
    return keys;
  }

  /** The id named by the `current` pointer, or null when there is none (secret.key is then current). */
  readCurrentId(): string | null {
    try {
      const id = fs.readFileSync(this.currentPath, 'utf8').trim();
      return id === '' ? null : id;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  /** Cheap fingerprint of the pointer: replacing it by rename always changes the inode. */
  version(): string {
    const stat = fs.statSync(this.currentPath, { throwIfNoEntry: false });
    return stat ? `${stat.ino}:${stat.mtimeMs}:${stat.size}` : 'none';
  }

  /** Generates a new key file (not yet current). */
  addKey(): StoredKey {
    fs.mkdirSync(this.dirPath, { recursive: true, mode: PRIVATE_DIR_MODE });
    const existing = new Set(this.readKeys({ skipUnusable: true }).map((k) => k.id));
    for (;;) {
      const material = generateMaterial();
      const id = new SecretCipher(material).keyId;
      // A 32-bit id collision is astronomically unlikely; it would make ids ambiguous, so draw again.
      if (existing.has(id)) continue;
      const file = path.join(this.dirPath, `${id}.key`);
      writeFileAtomic(file, `${material}\n`);
      return { id, material, path: file };
    }
  }

  /** Makes `id` the key new values are encrypted with (atomically, for running servers). */
  setCurrent(id: string): void {
    if (!this.readKeys().some((k) => k.id === id)) throw new Error(`no key file holds key ${id}`);
    fs.mkdirSync(this.dirPath, { recursive: true, mode: PRIVATE_DIR_MODE });
    writeFileAtomic(this.currentPath, `${id}\n`);
  }

  /**
   * Deletes the file of key `id`; returns the removed path, or null. The caller
   * makes sure no stored value needs it and that it is not the current key.
   */
  removeKey(id: string): string | null {
    if (this.readCurrentId() === id) throw new Error(`key ${id} is the current key and cannot be removed`);
    const key = this.readKeys({ skipUnusable: true }).find((k) => k.id === id);
    if (!key) return null;
    fs.rmSync(key.path, { force: true });
    syncDir(path.dirname(key.path));
    return key.path;
  }

  private keyFileNames(): string[] {
    try {
      return fs
        .readdirSync(this.dirPath)
        .filter((name) => name.endsWith('.key'))
        .sort();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
  }
}
