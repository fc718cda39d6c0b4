// A byte range of one stored task log, opened and ready to be served
// (task-logs.ts opens it; job-logs.ts serves it).
//
// Why not just a Readable: a 100 MB download through fs.createReadStream or
// zlib allocates a fresh buffer per chunk, and 100 MB of short-lived
// ArrayBuffers is released only when V8 gets round to collecting their
// wrappers: the server's RSS grew by 31–36 MB per download (issue 14's bench,
// target ≤ 32 MB). writeTo copies the range into the response through
// buffers allocated once per download instead:
//
// - plain log: two buffers, alternately filled by a file read and handed to
//   the sink. A buffer is refilled only after the sink's write callback:
//   until then the socket's write queue may still hold it (a write the
//   kernel did not take at once is sent later from the caller's buffer, not
//   from a copy). One read overlaps one write.
// - archived log: the compressed file is read into one reused buffer and
//   inflated (modules/archive/gunzip-into.ts) into two reused output buffers
//   in turn, handed to the sink as the plain log's are: one inflation
//   overlaps one write, and a buffer is inflated into again only after the
//   sink's write callback. Inflating is synchronous, one output buffer
//   (64 KiB) per turn, so the event loop is never held for long. Where this
//   Node cannot inflate into a buffer, the gunzip stream is used as before
//   (its chunks are zlib's fresh buffers, written as pipe() would).
//
// stream() is the plain Readable, for consumers that are not a socket (the
// run-logs zip). Use exactly one of writeTo and stream, once: either closes
// the file when it is done, or fails.
import type { FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';
import type { Writable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import type { Gunzip } from 'node:zlib';
import { GunzipInto } from '../../modules/archive/gunzip-into.ts';

/** One read of a plain log: large enough for few system calls, two per download. */
const PLAIN_CHUNK_BYTES = 64 * 1024;
/** One read of an archive: 16 KiB of gzip inflates to several times that before backpressure applies. */
const ARCHIVE_CHUNK_BYTES = 16 * 1024;
/** One inflated chunk of an archive, two per download. */
const INFLATED_CHUNK_BYTES = 64 * 1024;

export interface LogBody {
  /**
   * Writes the bytes into `sink` (without ending it) and closes the file.
   * Rejects when reading fails, when the file holds fewer bytes than
   * promised, or when `sink` fails or closes first.
   */
  writeTo(sink: Writable): Promise<void>;
  /** The bytes as a stream; the file closes when it ends or is destroyed. */
  stream(): Readable;
}

export const EMPTY_LOG_BODY: LogBody = {
  writeTo: async () => {},
  stream: () => Readable.from([]),
};

/** A short text held in memory (a job that never ran and says why: job-concurrency.ts). */
export function textLogBody(bytes: Buffer): LogBody {
  return {
    writeTo: (sink) => writeAndWait(sink, bytes),
    stream: () => Readable.from([bytes]),
  };
}

/**
 * Writes `chunk` and resolves once `sink` is done with it, so its buffer may
 * be refilled. A sink destroyed meanwhile (the client went away) may never
 * call back for a write it had accepted: its 'close' rejects instead.
 */
function writeAndWait(sink: Writable, chunk: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    const onClose = (): void => reject(new Error('the stream closed before the write completed'));
    sink.once('close', onClose);
    sink.write(chunk, (error) => {
      sink.off('close', onClose);
      if (error) reject(error);
      else resolve();
    });
  });
}

/**
 * Writes a chunk the sink may keep (nothing refills it) and waits only when
 * the sink asks for it ('drain'), as pipe() does; rejects if the sink closes
 * meanwhile.
 */
async function writeWithBackpressure(sink: Writable, chunk: Buffer): Promise<void> {
  if (sink.write(chunk)) return;
  // A destroyed sink refuses every write and will never drain.
  if (sink.destroyed) throw new Error('the stream closed before it drained');
  await new Promise<void>((resolve, reject) => {
    const onDrain = (): void => {
      sink.off('close', onClose);
      resolve();
    };
    const onClose = (): void => {
      sink.off('drain', onDrain);
      reject(new Error('the stream closed before it drained'));
    };
    sink.once('drain', onDrain);
    sink.once('close', onClose);
  });
}

/** Error for a file shorter than the committed size said (never expected: the database is the truth). */
function shortFile(): Error {
  return new Error('the log file ended before its committed size');
}

/** Skips `skip` bytes of a stream, then yields `length` bytes and stops reading (closing the source). */
async function* sliceBytes(source: Readable, skip: number, length: number): AsyncGenerator<Buffer> {
  let toSkip = skip;
  let left = length;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      let data = chunk;
      if (toSkip > 0) {
        if (data.length <= toSkip) {
          toSkip -= data.length;
          continue;
        }
        data = data.subarray(toSkip);
        toSkip = 0;
      }
      if (data.length >= left) {
        yield data.subarray(0, left);
        return;
      }
      left -= data.length;
      yield data;
    }
    if (left > 0) throw shortFile();
  } finally {
    source.destroy();
  }
}

/** Bytes `start`..`end` (inclusive) of a plain log file. */
export class PlainLogBody implements LogBody {
  constructor(
    private readonly handle: FileHandle,
    private readonly start: number,
    private readonly end: number,
  ) {}

  async writeTo(sink: Writable): Promise<void> {
    const buffers = [Buffer.allocUnsafeSlow(PLAIN_CHUNK_BYTES), Buffer.allocUnsafeSlow(PLAIN_CHUNK_BYTES)];
    let position = this.start;
    let next = 0;
    let writing: Promise<void> | null = null;
    try {
      while (position <= this.end) {
        const buffer = buffers[next] as Buffer;
        next = 1 - next;
        const { bytesRead } = await this.handle.read(
          buffer,
          0,
          Math.min(buffer.length, this.end - position + 1),
          position,
        );
        if (bytesRead === 0) throw shortFile();
        // The buffer read into now is the one not being written; the other is refilled next, so its write must be done.
        if (writing !== null) await writing;
        writing = writeAndWait(sink, buffer.subarray(0, bytesRead));
        // Awaited above or below; until then a failed write must not count as unhandled.
        writing.catch(() => {});
        position += bytesRead;
      }
      if (writing !== null) await writing;
    } finally {
      await this.handle.close();
    }
  }

  stream(): Readable {
    return this.handle.createReadStream({ start: this.start, end: this.end });
  }
}

/** Bytes `skip`..`skip + length - 1` of what a gzip log file inflates to. */
export class ArchivedLogBody implements LogBody {
  constructor(
    private readonly handle: FileHandle,
    private readonly skip: number,
    private readonly length: number,
    /** The range is the whole log: the stream needs no slicing. */
    private readonly whole: boolean,
    /** Inflate into reused buffers where this Node allows it (false: through zlib's stream, as a test may ask). */
    private readonly reuseBuffers = true,
  ) {}

  async writeTo(sink: Writable): Promise<void> {
    if (!this.reuseBuffers || !GunzipInto.available()) return this.writeThroughStream(sink);
    const inflater = new GunzipInto();
    const input = Buffer.allocUnsafeSlow(ARCHIVE_CHUNK_BYTES);
    const outputs = [Buffer.allocUnsafeSlow(INFLATED_CHUNK_BYTES), Buffer.allocUnsafeSlow(INFLATED_CHUNK_BYTES)];
    let next = 0;
    let position = 0;
    let inputStart = 0;
    let inputEnd = 0;
    let endOfFile = false;
    let toSkip = this.skip;
    let left = this.length;
    let writing: Promise<void> | null = null;
    try {
      while (left > 0) {
        if (inputStart === inputEnd && !endOfFile) {
          const { bytesRead } = await this.handle.read(input, 0, input.length, position);
          position += bytesRead;
          inputStart = 0;
          inputEnd = bytesRead;
          endOfFile = bytesRead === 0;
        }
        // Not the buffer being written (if any): that one is the other, until its write is awaited below.
        const output = outputs[next] as Buffer;
        const { consumed, produced } = inflater.inflate(input, inputStart, inputEnd - inputStart, output, endOfFile);
        inputStart += consumed;
        // With input or the end of the file to pass and room to inflate into, zlib moves unless its data has ended.
        if (consumed === 0 && produced === 0) break;
        let data = output.subarray(0, produced);
        if (toSkip > 0) {
          const skipped = Math.min(toSkip, data.length);
          toSkip -= skipped;
          data = data.subarray(skipped);
        }
        if (data.length === 0) continue;
        if (data.length > left) data = data.subarray(0, left);
        if (writing !== null) await writing;
        writing = writeAndWait(sink, data);
        // Awaited on the next write or below; until then a failed write must not count as unhandled.
        writing.catch(() => {});
        next = 1 - next;
        left -= data.length;
      }
      if (writing !== null) await writing;
      if (left > 0) throw shortFile();
    } finally {
      inflater.close();
      await this.handle.close();
    }
  }

  /** The previous way, through zlib's stream: its output chunks are fresh buffers, so they are written as pipe() would. */
  private async writeThroughStream(sink: Writable): Promise<void> {
    const gunzip = createGunzip();
    const feeding = this.feed(gunzip);
    let toSkip = this.skip;
    let left = this.length;
    try {
      for await (const chunk of gunzip as AsyncIterable<Buffer>) {
        let data = chunk;
        if (toSkip > 0) {
          if (data.length <= toSkip) {
            toSkip -= data.length;
            continue;
          }
          data = data.subarray(toSkip);
          toSkip = 0;
        }
        if (data.length > left) data = data.subarray(0, left);
        await writeWithBackpressure(sink, data);
        left -= data.length;
        if (left === 0) break;
      }
      if (left > 0) throw shortFile();
    } finally {
      // Stops the feeder (its pending write fails or its next loop sees the stream destroyed).
      gunzip.destroy();
      await feeding;
      await this.handle.close();
    }
  }

  /**
   * Reads the compressed file into two buffers in turn, like PlainLogBody: one
   * read overlaps gunzip's work on the other, and a buffer is refilled only
   * after gunzip took it. A failure destroys gunzip (the reader sees it).
   */
  private async feed(gunzip: Gunzip): Promise<void> {
    const inputs = [Buffer.allocUnsafeSlow(ARCHIVE_CHUNK_BYTES), Buffer.allocUnsafeSlow(ARCHIVE_CHUNK_BYTES)];
    let next = 0;
    let position = 0;
    let writing: Promise<void> | null = null;
    try {
      while (!gunzip.destroyed) {
        const input = inputs[next] as Buffer;
        next = 1 - next;
        const { bytesRead } = await this.handle.read(input, 0, input.length, position);
        if (writing !== null) await writing;
        if (bytesRead === 0) {
          gunzip.end();
          return;
        }
        position += bytesRead;
        writing = writeAndWait(gunzip, input.subarray(0, bytesRead));
        // Awaited on the next turn; until then a failed write must not count as unhandled.
        writing.catch(() => {});
      }
      if (writing !== null) await writing;
    } catch (error) {
      gunzip.destroy(error instanceof Error ? error : new Error(String(error)));
    }
  }

  stream(): Readable {
    const gunzip = createGunzip();
    const raw = this.handle.createReadStream({ highWaterMark: ARCHIVE_CHUNK_BYTES });
    raw.on('error', (error) => gunzip.destroy(error));
    // pipe() never ends its source early: a reader that stops must close the file too.
    gunzip.on('close', () => raw.destroy());
    raw.pipe(gunzip);
    if (this.whole) return gunzip;
    return Readable.from(sliceBytes(gunzip, this.skip, this.length), { objectMode: false });
  }
}
