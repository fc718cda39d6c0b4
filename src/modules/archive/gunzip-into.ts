// Gunzip into the caller's buffer: the inflated bytes of a gzip file (one
// member or several, concatenated) written into a buffer the caller owns and
// reuses, instead of a fresh buffer per chunk.
//
// Why: zlib's streams (createGunzip) allocate a new output buffer whenever
// the last one is full, and V8 frees such buffers only when it gets round to
// collecting their wrappers, which under "external memory pressure" means
// once some 32 MB have piled up. Serving a 100 MB archived job log that way
// grew the server by 31–36 MB per download (issue 14's bench). Node has no
// public API that inflates into a given buffer; its zlib streams do it
// internally through their native handle's writeSync(flush, in, inOffset,
// inLength, out, outOffset, outLength), which reports what is left of each
// buffer in the stream's write state. This class drives that handle directly
// and nothing else: the stream object is never written or read, it only owns
// the handle (and closes it). `available()` says whether this Node has that
// handle; callers keep the stream path for the day it does not.
//
// Errors (a corrupt or truncated archive) are raised by zlib through the
// stream's destroy(), synchronously: they are rethrown from `inflate`. The
// stream would also emit them as 'error' a tick later, which unheard would
// crash the process: a listener takes that copy.
import { constants as zlibConstants, createGunzip } from 'node:zlib';
import type { Gunzip } from 'node:zlib';

/** The part of Node's native zlib handle this class uses (lib/zlib.js processChunkSync calls the same). */
interface NativeZlibHandle {
  writeSync(
    flush: number,
    input: Uint8Array,
    inputOffset: number,
    inputLength: number,
    output: Uint8Array,
    outputOffset: number,
    outputLength: number,
  ): void;
}

/** The internals of a zlib stream that lib/zlib.js sets in its constructor. */
interface ZlibInternals {
  _handle?: NativeZlibHandle | null;
  /** [bytes left in the output, bytes left in the input] after the last write. */
  _writeState?: Uint32Array;
}

export interface InflateStep {
  /** Input bytes zlib took (the rest must be passed again). */
  consumed: number;
  /** Bytes written at the start of the output buffer. */
  produced: number;
}

let probed: boolean | null = null;

export class GunzipInto {
  private readonly stream: Gunzip;
  private readonly handle: NativeZlibHandle;
  private readonly state: Uint32Array;

  /** Whether this Node's zlib streams expose the native handle (checked once). */
  static available(): boolean {
    if (probed === null) {
      const stream = createGunzip();
      const internals = stream as unknown as ZlibInternals;
      probed = typeof internals._handle?.writeSync === 'function' && internals._writeState instanceof Uint32Array;
      stream.close();
    }
    return probed;
  }

  constructor() {
    this.stream = createGunzip();
    // Already thrown from inflate(); this is the stream's own late copy.
    this.stream.on('error', () => {});
    const internals = this.stream as unknown as ZlibInternals;
    if (typeof internals._handle?.writeSync !== 'function' || !(internals._writeState instanceof Uint32Array)) {
      this.stream.close();
      throw new Error("this Node's zlib streams have no native handle to inflate into a buffer");
    }
    this.handle = internals._handle;
    this.state = internals._writeState;
  }

  /**
   * Inflates from `input` into `output` (from its start) as far as either
   * allows. `finish` says no input follows: a stream that is not complete
   * then throws ("unexpected end of file") instead of waiting for more. After
   * the end of the gzip data, a call consumes and produces nothing.
   */
  inflate(
    input: Uint8Array,
    inputOffset: number,
    inputLength: number,
    output: Uint8Array,
    finish: boolean,
  ): InflateStep {
    if (this.stream.errored) throw this.stream.errored;
    if (this.stream.destroyed) throw new Error('the inflater is closed');
    const flush = finish ? zlibConstants.Z_FINISH : zlibConstants.Z_NO_FLUSH;
    this.handle.writeSync(flush, input, inputOffset, inputLength, output, 0, output.length);
    if (this.stream.errored) throw this.stream.errored;
    const outputLeft = this.state[0] ?? 0;
    const inputLeft = this.state[1] ?? 0;
    return { consumed: inputLength - inputLeft, produced: output.length - outputLeft };
  }

  /** Frees zlib's memory; idempotent. */
  close(): void {
    this.stream.close();
  }
}
