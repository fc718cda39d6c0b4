// Where large blobs live (Actions artifacts): one small interface, so an
// object store can back it later, and a local-folder implementation under the
// data folder. Contracts every implementation keeps:
//
// - Names are relative, `/`-separated, and never leave the storage root
//   (`..`, absolute names and NUL are refused with an Error, a programming
//   mistake, never user input: callers build names from ids).
// - `put` is atomic: readers see the old object or the whole new one, never a
//   part. A failed or aborted `put` leaves the old object (or nothing).
// - Bytes stream through: nothing holds a whole object in memory.
// - `remove` and `removePrefix` succeed when there is nothing to remove.
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import type { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../private-files.ts';

export interface ByteRange {
  /** First byte, inclusive. */
  start: number;
  /** Last byte, inclusive. */
  end: number;
}

export interface ObjectStorage {
  /**
   * Stores `source` as `name` (replacing it atomically), passing the bytes
   * through `transforms` first (a hash, a size limit); the bytes written.
   */
  put(name: string, source: Readable | readonly Readable[], transforms?: readonly Transform[]): Promise<number>;
  /** The object's bytes (or a range of them); fails with code ENOENT when it does not exist. */
  read(name: string, range?: ByteRange): Promise<Readable>;
  /** The object's size, or null when it does not exist. */
  size(name: string): Promise<number | null>;
  remove(name: string): Promise<void>;
  /** Removes every object whose name starts with `prefix/`. */
  removePrefix(prefix: string): Promise<void>;
}

/** Objects as files under `root` (created on first write, private to the server's user). */
export class LocalObjectStorage implements ObjectStorage {
  constructor(readonly root: string) {}

  /** The absolute path of `name`; refuses names that would leave the root. */
  resolve(name: string): string {
    const normalized = path.posix.normalize(name);
    if (
      name === '' ||
      name.includes('\0') ||
      path.posix.isAbsolute(normalized) ||
      normalized === '..' ||
      normalized.startsWith('../') ||
      normalized === '.'
    ) {
      throw new Error(`unsafe storage name ${JSON.stringify(name)}`);
    }
    return path.join(this.root, ...normalized.split('/'));
  }

  async put(
    name: string,
    source: Readable | readonly Readable[],
    transforms: readonly Transform[] = [],
  ): Promise<number> {
    const target = this.resolve(name);
    await fs.mkdir(path.dirname(target), { recursive: true, mode: PRIVATE_DIR_MODE });
    // Written beside the target and renamed over it: rename is atomic within a folder.
    const temp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
    let written = 0;
    const sources = Array.isArray(source) ? source : [source as Readable];
    // Each source in turn, as one stream (a block list is several files read one after another).
    async function* concatenated(): AsyncGenerator<Buffer> {
      // Not destroyed on a failure: a request body stays readable, so the caller can drain it and still answer.
      for (const part of sources)
        for await (const chunk of part.iterator({ destroyOnReturn: false })) yield chunk as Buffer;
    }
    const counter = new PassThrough();
    counter.on('data', (chunk: Buffer) => {
      written += chunk.length;
    });
    try {
      await pipeline([
        Readable.from(concatenated()),
        ...transforms,
        counter,
        createWriteStream(temp, { mode: PRIVATE_FILE_MODE }),
      ]);
      await fs.rename(temp, target);
      return written;
    } catch (error) {
      await fs.rm(temp, { force: true });
      throw error;
    }
  }

  async read(name: string, range?: ByteRange): Promise<Readable> {
    const file = this.resolve(name);
    // Opened before returning, so a missing object fails here (ENOENT), not mid-response.
    const handle = await fs.open(file, 'r');
    return handle.createReadStream({ start: range?.start, end: range?.end });
  }

  async size(name: string): Promise<number | null> {
    try {
      return (await fs.stat(this.resolve(name))).size;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  async remove(name: string): Promise<void> {
    await fs.rm(this.resolve(name), { force: true });
  }

  async removePrefix(prefix: string): Promise<void> {
    await fs.rm(this.resolve(prefix), { recursive: true, force: true });
  }
}
