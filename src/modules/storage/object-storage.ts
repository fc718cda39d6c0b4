// Where large blobs live (Actions artifacts): one small interface, so an
// object store can back it later, and a local-folder implementation under the
// data folder. Contracts every implementation keeps:
//
// - Names are relative, `/`-separated, and never leave the storage root
//   (`..`, absolute names and NUL are refused with an Error, a programming
//   mistake, never user input: callers build names from ids).
// - `put` is atomic: readers see the old object or the whole new one, never a
//   part. A failed or aborted `put` leaves the old object (or nothing).
// - Bytes stream through: nothing holds a whole object in memory, and the
//   reader and `put`'s loop let callers reuse one buffer (no garbage per chunk).
// - `remove` and `removePrefix` succeed when there is nothing to remove.
import { randomBytes } from 'node:crypto';
import type { Dirent } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../private-files.ts';

export interface ByteRange {
  /** First byte, inclusive. */
  start: number;
  /** Last byte, inclusive. */
  end: number;
}

/** Reads an object into buffers the caller owns (no allocation per chunk). */
export interface ObjectReader {
  readonly size: number;
  /** Fills `buffer` from byte `position` on; the bytes read (0 at the end). */
  read(buffer: Buffer, position: number): Promise<number>;
  close(): Promise<void>;
}

/** What `put` stores: a stream, or any async iterable of chunks. */
export type ObjectSource = Readable | AsyncIterable<Uint8Array>;

export interface ObjectStorage {
  /**
   * Stores `source` as `name` (replacing it atomically); the bytes written.
   * `inspect` sees every chunk before it is written and may throw to abort
   * (a size limit, a hash). Each chunk is fully written before the next is
   * pulled, so a source may reuse one buffer for all its chunks. A Readable
   * source is not destroyed on failure (a request body stays drainable).
   */
  put(name: string, source: ObjectSource, inspect?: (chunk: Buffer) => void): Promise<number>;
  /** The object's bytes (or a range of them); fails with code ENOENT when it does not exist. */
  read(name: string, range?: ByteRange): Promise<Readable>;
  /** A reader of the object; fails with code ENOENT when it does not exist. */
  open(name: string): Promise<ObjectReader>;
  /** The object's size, or null when it does not exist. */
  size(name: string): Promise<number | null>;
  remove(name: string): Promise<void>;
  /** Removes every object whose name starts with `prefix/`. */
  removePrefix(prefix: string): Promise<void>;
  /**
   * The objects directly inside `prefix/` (names relative to it) with their
   * sizes, in no particular order; [] when there are none. For small folders
   * (the chunks of one file), never a whole tree.
   */
  list(prefix: string): Promise<{ name: string; size: number }[]>;
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

  async put(name: string, source: ObjectSource, inspect?: (chunk: Buffer) => void): Promise<number> {
    const target = this.resolve(name);
    await fs.mkdir(path.dirname(target), { recursive: true, mode: PRIVATE_DIR_MODE });
    // Written beside the target and renamed over it: rename is atomic within a folder.
    const temp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
    const chunks = source instanceof Readable ? source.iterator({ destroyOnReturn: false }) : source;
    let written = 0;
    const file = await fs.open(temp, 'w', PRIVATE_FILE_MODE);
    try {
      try {
        for await (const piece of chunks) {
          const chunk = Buffer.isBuffer(piece) ? piece : Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength);
          inspect?.(chunk);
          // A plain loop, not a stream pipeline: nothing is allocated per chunk beyond the write itself.
          for (let at = 0; at < chunk.length;) at += (await file.write(chunk, at, chunk.length - at)).bytesWritten;
          written += chunk.length;
        }
      } finally {
        await file.close();
      }
      await fs.rename(temp, target);
      return written;
    } catch (error) {
      await fs.rm(temp, { force: true });
      throw error;
    }
  }

  async open(name: string): Promise<ObjectReader> {
    const handle = await fs.open(this.resolve(name), 'r');
    try {
      const { size } = await handle.stat();
      return {
        size,
        read: async (buffer, position) => (await handle.read(buffer, 0, buffer.length, position)).bytesRead,
        close: () => handle.close(),
      };
    } catch (error) {
      await handle.close();
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

  async list(prefix: string): Promise<{ name: string; size: number }[]> {
    const folder = this.resolve(prefix);
    let entries: Dirent[];
    try {
      entries = await fs.readdir(folder, { withFileTypes: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
    const objects: { name: string; size: number }[] = [];
    // Temporary files of a put in progress end in .tmp: not objects yet.
    for (const entry of entries)
      if (entry.isFile() && !entry.name.endsWith('.tmp'))
        objects.push({ name: entry.name, size: (await fs.stat(path.join(folder, entry.name))).size });
    return objects;
  }
}
