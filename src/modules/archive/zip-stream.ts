// A streaming zip writer: entries are written one after the other as their
// data arrives, so a zip of many large logs costs one chunk of memory at a
// time, never a whole entry (Forgejo's run-logs zip uses Go's archive/zip the
// same way: services/actions/job_logs.go WriteRunLogsZip).
//
// Format (APPNOTE 6.3.x): every entry is a local header with zero CRC and
// sizes and general-purpose bit 3 set, its deflated data, then a data
// descriptor with the real CRC-32 and sizes; the central directory and the
// end record follow the last entry. Names are UTF-8 (bit 11).
//
// Limits: no ZIP64. An entry's data and the whole archive must stay below
// 4 GiB and the archive below 65,535 entries; `fits` says beforehand whether
// an entry of a known size can still be added, so the caller can write a
// marker entry instead of producing a corrupt archive.
import { Readable, pipeline } from 'node:stream';
import { constants as zlibConstants, crc32, createDeflateRaw } from 'node:zlib';

const LOCAL_HEADER = 0x04034b50;
const DATA_DESCRIPTOR = 0x08074b50;
const CENTRAL_HEADER = 0x02014b50;
const END_OF_CENTRAL_DIRECTORY = 0x06054b50;
const FLAG_DATA_DESCRIPTOR = 0x0008;
const FLAG_UTF8 = 0x0800;
const METHOD_DEFLATE = 8;
const VERSION_NEEDED = 20;
const MAX_32 = 0xffffffff;
const MAX_ENTRIES = 0xffff;
/** Deflate's worst case adds 5 bytes per 16 KiB block: 1/1000 is ample, plus headers. */
const DEFLATE_SLACK = (size: number) => Math.ceil(size / 1000) + 1024;

interface CentralEntry {
  name: Buffer;
  crc: number;
  compressed: number;
  size: number;
  offset: number;
  dosTime: number;
  dosDate: number;
}

/** What reading an entry's source ended with: completely, or cut by a read error (the entry holds what came before). */
export interface EntryResult {
  error: Error | null;
}

function dosDateTime(date: Date): { dosTime: number; dosDate: number } {
  // DOS dates start in 1980; earlier clocks are clamped rather than wrapped.
  const year = Math.max(1980, date.getUTCFullYear());
  return {
    dosTime: (date.getUTCHours() << 11) | (date.getUTCMinutes() << 5) | Math.floor(date.getUTCSeconds() / 2),
    dosDate: ((year - 1980) << 9) | ((date.getUTCMonth() + 1) << 5) | date.getUTCDate(),
  };
}

export class ZipStream {
  private readonly central: CentralEntry[] = [];
  /** Bytes yielded so far: the offset of the next local header. */
  private offset = 0;
  private readonly stamp: { dosTime: number; dosDate: number };

  /** `modified` is the time every entry carries (one request, one instant). */
  constructor(modified: Date = new Date()) {
    this.stamp = dosDateTime(modified);
  }

  /** Whether an entry with a name of `nameBytes` and `size` bytes of data still fits without ZIP64. */
  fits(nameBytes: number, size: number): boolean {
    if (this.central.length + 1 >= MAX_ENTRIES || size >= MAX_32) return false;
    // The entry, then the central directory with this entry and the end record, all below 4 GiB.
    const centralSize = this.central.reduce((sum, entry) => sum + 46 + entry.name.length, 0) + 46 + nameBytes + 22;
    return this.offset + 30 + nameBytes + size + DEFLATE_SLACK(size) + 16 + centralSize < MAX_32;
  }

  /**
   * Yields one deflated entry. `source` is read once; a read error ends the
   * entry early (it stays a valid entry with the bytes read so far) and is
   * reported in `result.error` rather than thrown, so the caller can add a
   * marker and go on with the next entry.
   */
  async *entry(
    name: string,
    source: AsyncIterable<Buffer | string> | Iterable<Buffer | string>,
    result: EntryResult = { error: null },
  ): AsyncGenerator<Buffer> {
    const nameBytes = Buffer.from(name, 'utf8');
    const local = Buffer.alloc(30);
    local.writeUInt32LE(LOCAL_HEADER, 0);
    local.writeUInt16LE(VERSION_NEEDED, 4);
    local.writeUInt16LE(FLAG_DATA_DESCRIPTOR | FLAG_UTF8, 6);
    local.writeUInt16LE(METHOD_DEFLATE, 8);
    local.writeUInt16LE(this.stamp.dosTime, 10);
    local.writeUInt16LE(this.stamp.dosDate, 12);
    // CRC-32 and sizes (14..25) stay 0: the data descriptor carries them.
    local.writeUInt16LE(nameBytes.length, 26);
    const offset = this.offset;
    yield* this.emit(Buffer.concat([local, nameBytes]));

    const counted = { crc: 0, size: 0 };
    async function* count(): AsyncGenerator<Buffer> {
      try {
        for await (const chunk of source) {
          const data = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
          counted.crc = crc32(data, counted.crc);
          counted.size += data.length;
          yield data;
        }
      } catch (error) {
        // Ending the input normally keeps the deflate stream, and so the archive, well formed.
        result.error = error instanceof Error ? error : new Error(String(error));
      }
    }
    const deflater = pipeline(
      Readable.from(count()),
      createDeflateRaw({ level: zlibConstants.Z_DEFAULT_COMPRESSION }),
      () => {},
    );
    let compressed = 0;
    for await (const chunk of deflater as AsyncIterable<Buffer>) {
      compressed += chunk.length;
      yield* this.emit(chunk);
    }
    if (counted.size >= MAX_32 || compressed >= MAX_32)
      throw new Error(`zip entry ${JSON.stringify(name)} exceeds 4 GiB, which needs ZIP64`);

    const descriptor = Buffer.alloc(16);
    descriptor.writeUInt32LE(DATA_DESCRIPTOR, 0);
    descriptor.writeUInt32LE(counted.crc >>> 0, 4);
    descriptor.writeUInt32LE(compressed, 8);
    descriptor.writeUInt32LE(counted.size, 12);
    yield* this.emit(descriptor);
    this.central.push({
      name: nameBytes,
      crc: counted.crc >>> 0,
      compressed,
      size: counted.size,
      offset,
      ...this.stamp,
    });
  }

  /** The central directory and the end record; nothing may be added afterwards. */
  *finish(): Generator<Buffer> {
    const start = this.offset;
    for (const entry of this.central) {
      const header = Buffer.alloc(46);
      header.writeUInt32LE(CENTRAL_HEADER, 0);
      header.writeUInt16LE(VERSION_NEEDED, 4); // version made by: MS-DOS attributes, spec 2.0
      header.writeUInt16LE(VERSION_NEEDED, 6);
      header.writeUInt16LE(FLAG_DATA_DESCRIPTOR | FLAG_UTF8, 8);
      header.writeUInt16LE(METHOD_DEFLATE, 10);
      header.writeUInt16LE(entry.dosTime, 12);
      header.writeUInt16LE(entry.dosDate, 14);
      header.writeUInt32LE(entry.crc, 16);
      header.writeUInt32LE(entry.compressed, 20);
      header.writeUInt32LE(entry.size, 24);
      header.writeUInt16LE(entry.name.length, 28);
      // Extra, comment, disk number, attributes: all 0.
      header.writeUInt32LE(entry.offset, 42);
      yield* this.emit(Buffer.concat([header, entry.name]));
    }
    const end = Buffer.alloc(22);
    end.writeUInt32LE(END_OF_CENTRAL_DIRECTORY, 0);
    end.writeUInt16LE(this.central.length, 8);
    end.writeUInt16LE(this.central.length, 10);
    end.writeUInt32LE(this.offset - start, 12);
    end.writeUInt32LE(start, 16);
    yield* this.emit(end);
  }

  private *emit(chunk: Buffer): Generator<Buffer> {
    this.offset += chunk.length;
    if (this.offset >= MAX_32) throw new Error('zip archive exceeds 4 GiB, which needs ZIP64');
    yield chunk;
  }
}
