// A pull reader over a byte stream for protobuf's wire format: varints,
// length-delimited slices and skips, awaiting the next chunk only when the
// buffered bytes run out. It holds the unread rest of the current chunk plus
// at most one slice being assembled (a slice is only asked for when the
// caller knows it is small), so memory does not grow with the stream.
// Malformed or truncated input throws WireError; the caller decides what the
// client is told.

export class WireError extends Error {}

/** A varint never has more than 10 bytes (64 bits, 7 per byte). */
const MAX_VARINT_BYTES = 10;

export class ByteStream {
  private buf: Uint8Array = new Uint8Array(0);
  private pos = 0;
  private ended = false;
  /** Bytes consumed so far: positions of nested messages are checked against it. */
  offset = 0;

  constructor(private readonly source: AsyncIterator<Uint8Array>) {}

  private get buffered(): number {
    return this.buf.length - this.pos;
  }

  /** True once `n` bytes are buffered; false if the stream ends first. */
  private async ensure(n: number): Promise<boolean> {
    while (this.buffered < n) {
      if (this.ended) return false;
      const next = await this.source.next();
      if (next.done === true) {
        this.ended = true;
        return false;
      }
      if (next.value.length === 0) continue;
      const rest = this.buf.subarray(this.pos);
      if (rest.length === 0) {
        this.buf = next.value;
      } else {
        const joined = new Uint8Array(rest.length + next.value.length);
        joined.set(rest, 0);
        joined.set(next.value, rest.length);
        this.buf = joined;
      }
      this.pos = 0;
    }
    return true;
  }

  /** No byte left in the stream. */
  async atEnd(): Promise<boolean> {
    return !(await this.ensure(1));
  }

  /**
   * A varint as a 64-bit unsigned bigint (int64 fields are its two's
   * complement: BigInt.asIntN(64, …)). Bytes past the tenth are an error, as
   * in protobuf-es and Go's protowire.
   */
  async varint64(): Promise<bigint> {
    const short = this.shortVarint();
    if (short !== undefined) return BigInt(short);
    let value = 0n;
    for (let i = 0; i < MAX_VARINT_BYTES; i += 1) {
      if (this.buffered === 0 && !(await this.ensure(1))) throw new WireError('premature EOF');
      const byte = this.buf[this.pos] as number;
      this.pos += 1;
      this.offset += 1;
      value |= BigInt(byte & 0x7f) << BigInt(7 * i);
      if ((byte & 0x80) === 0) return BigInt.asUintN(64, value);
    }
    throw new WireError('invalid varint');
  }

  /** A varint used as a tag or a length: must fit a safe integer. */
  async varintNumber(): Promise<number> {
    const short = this.shortVarint();
    if (short !== undefined) return short;
    const value = await this.varint64();
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new WireError('length or tag out of range');
    return Number(value);
  }

  /**
   * The common case without bigint arithmetic: a varint of at most 7 bytes
   * (49 bits) already buffered is consumed and returned; anything else is
   * left for the general path (undefined).
   */
  private shortVarint(): number | undefined {
    const available = Math.min(this.buffered, 7);
    let value = 0;
    for (let i = 0; i < available; i += 1) {
      const byte = this.buf[this.pos + i] as number;
      value += (byte & 0x7f) * 2 ** (7 * i);
      if ((byte & 0x80) === 0) {
        this.pos += i + 1;
        this.offset += i + 1;
        return value;
      }
    }
    return undefined;
  }

  /** The next `n` bytes, assembled in memory: only for slices the caller has bounded. */
  async bytes(n: number): Promise<Uint8Array> {
    if (!(await this.ensure(n))) throw new WireError('premature EOF');
    const slice = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    this.offset += n;
    return slice;
  }

  /** Passes over `n` bytes, handing each piece to `sink` (if given) without assembling them. */
  async skip(n: number, sink?: (piece: Uint8Array) => void): Promise<void> {
    let left = n;
    while (left > 0) {
      if (this.buffered === 0 && !(await this.ensure(1))) throw new WireError('premature EOF');
      const take = Math.min(left, this.buffered);
      sink?.(this.buf.subarray(this.pos, this.pos + take));
      this.pos += take;
      this.offset += take;
      left -= take;
    }
  }
}
