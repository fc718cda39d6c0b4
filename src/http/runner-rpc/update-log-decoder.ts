// UpdateLogRequest (proto/runner/v1/messages.proto) read row by row from a
// byte stream, so a backlog of hundreds of MiB never sits in memory whole:
//
//   UpdateLogRequest  1 task_id int64 · 2 index int64 · 3 rows repeated LogRow · 4 no_more bool
//   LogRow            1 time google.protobuf.Timestamp · 2 content string
//   Timestamp         1 seconds int64 · 2 nanos int32
//
// Contract, matching fromBinary (protobuf-es) for every message it accepts:
// - Fields may come in any order and repeat (the last scalar wins, nested
//   messages merge); unknown fields are skipped, groups included.
// - A row's content must be valid UTF-8 (proto3 strings; Go's proto.Unmarshal
//   and protobuf-es refuse it alike). Only its first MAX_LOG_LINE_BYTES + 4
//   bytes are kept: a stored line is cut at MAX_LOG_LINE_BYTES anyway
//   (task-logs.ts formatLogLine; escaping only lengthens it), and the extra
//   bytes complete the character the cut looks at. The rest is validated
//   while it is skipped, never held.
// - task_id and index are read as they pass. Every encoder writes fields in
//   field-number order (Go's proto.Marshal, protobuf-es toBinary), so they
//   precede the rows; the caller freezes them before it stores the first
//   batch, and a differing value after that is an error rather than rows
//   stored under the wrong index.
// Malformed input throws WireError.
import type { LogRow } from '../../services/actions/task-logs.ts';
import { MAX_LOG_LINE_BYTES } from '../../services/actions/task-logs.ts';
import { ByteStream, WireError } from './byte-stream.ts';
import { secondsOf } from './mapping.ts';

const VARINT = 0;
const FIXED64 = 1;
const LENGTH_DELIMITED = 2;
const START_GROUP = 3;
const END_GROUP = 4;
const FIXED32 = 5;

/** Content bytes kept per row (see the header). */
export const KEPT_CONTENT_BYTES = MAX_LOG_LINE_BYTES + 4;
/** Unknown groups nest at most this deep (protobuf-es's default recursion limit). */
const MAX_GROUP_DEPTH = 100;

interface Tag {
  field: number;
  wireType: number;
}

async function readTag(stream: ByteStream): Promise<Tag> {
  const tag = await stream.varintNumber();
  const field = Math.floor(tag / 8);
  const wireType = tag % 8;
  if (field <= 0 || field > 0x1fffffff || wireType === 6 || wireType === 7)
    throw new WireError(`illegal tag: field no ${field} wire type ${wireType}`);
  return { field, wireType };
}

async function skipField(stream: ByteStream, tag: Tag, depth = 0): Promise<void> {
  switch (tag.wireType) {
    case VARINT:
      await stream.varint64();
      return;
    case FIXED64:
      await stream.skip(8);
      return;
    case FIXED32:
      await stream.skip(4);
      return;
    case LENGTH_DELIMITED:
      await stream.skip(await stream.varintNumber());
      return;
    case START_GROUP:
      if (depth >= MAX_GROUP_DEPTH) throw new WireError('maximum recursion depth reached');
      for (;;) {
        const inner = await readTag(stream);
        if (inner.wireType === END_GROUP) {
          if (inner.field !== tag.field) throw new WireError('invalid end group tag');
          return;
        }
        await skipField(stream, inner, depth + 1);
      }
    default:
      throw new WireError(`cannot skip wire type ${tag.wireType}`);
  }
}

function expectWireType(tag: Tag, wireType: number, name: string): void {
  if (tag.wireType !== wireType) throw new WireError(`wire type ${tag.wireType} for field ${name}`);
}

/** The end offset of a length-delimited field that starts here. */
async function endOfField(stream: ByteStream): Promise<number> {
  const length = await stream.varintNumber();
  return stream.offset + length;
}

function beyond(stream: ByteStream, end: number): void {
  if (stream.offset > end) throw new WireError('premature end of a nested message');
}

/**
 * A row as TaskLogStore takes it. A class rather than an object literal on
 * purpose: V8 tracks literals by allocation site and, when many of them
 * outlive a young-generation collection (a batch waiting for its fsync),
 * starts allocating them straight in the old generation, where they and the
 * content strings they hold pile up until a full collection — over 100 MB of
 * garbage for a 200 MB backlog. Instances of a class are never pretenured
 * that way, so each batch dies young.
 */
class DecodedRow implements LogRow {
  readonly content: string;
  // Declared only: a row without a time has no `time` (nor `nanos`) key, as fromBinary's mapping gives it.
  declare readonly time?: number;
  declare readonly nanos?: number;

  /** Whole seconds and the nanoseconds apart (mapping.ts fromProtoLogRow): a float of both loses the digits Forgejo prints. */
  constructor(content: string, time: { seconds: bigint; nanos: number } | undefined) {
    this.content = content;
    const seconds = secondsOf(time);
    if (seconds !== undefined) {
      this.time = seconds;
      this.nanos = time?.nanos ?? 0;
    }
  }
}

export interface LogRequestHead {
  taskId: bigint;
  index: bigint;
}

export class UpdateLogDecoder {
  private readonly stream: ByteStream;
  private readonly head: LogRequestHead = { taskId: 0n, index: 0n };
  private frozen: LogRequestHead | null = null;
  private readonly utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  noMore = false;

  constructor(source: AsyncIterable<Uint8Array>) {
    this.stream = new ByteStream(source[Symbol.asyncIterator]());
  }

  /** task_id and index as read so far (all of them once nextRow returned null). */
  get taskId(): bigint {
    return this.head.taskId;
  }

  get index(): bigint {
    return this.head.index;
  }

  /** From now on task_id and index must keep these values: rows were stored under them. */
  freezeHead(): LogRequestHead {
    this.frozen = { ...this.head };
    return this.frozen;
  }

  /** The next row, or null at the end of the message (task_id, index, no_more then final). */
  async nextRow(): Promise<LogRow | null> {
    const stream = this.stream;
    while (!(await stream.atEnd())) {
      const tag = await readTag(stream);
      switch (tag.field) {
        case 1:
          expectWireType(tag, VARINT, 'task_id');
          this.setHead('taskId', BigInt.asIntN(64, await stream.varint64()));
          break;
        case 2:
          expectWireType(tag, VARINT, 'index');
          this.setHead('index', BigInt.asIntN(64, await stream.varint64()));
          break;
        case 3:
          expectWireType(tag, LENGTH_DELIMITED, 'rows');
          return this.readRow(await endOfField(stream));
        case 4:
          expectWireType(tag, VARINT, 'no_more');
          this.noMore = (await stream.varint64()) !== 0n;
          break;
        default:
          await skipField(stream, tag);
      }
    }
    return null;
  }

  private setHead(key: keyof LogRequestHead, value: bigint): void {
    if (this.frozen !== null && this.frozen[key] !== value) {
      throw new WireError(
        `${key === 'taskId' ? 'task_id' : 'index'} must precede the rows of a large UpdateLog (fields in field-number order)`,
      );
    }
    this.head[key] = value;
  }

  private async readRow(end: number): Promise<LogRow> {
    const stream = this.stream;
    let time: { seconds: bigint; nanos: number } | undefined;
    let content = '';
    while (stream.offset < end) {
      const tag = await readTag(stream);
      if (tag.field === 1) {
        expectWireType(tag, LENGTH_DELIMITED, 'time');
        time = await this.readTimestamp(await endOfField(stream), time ?? { seconds: 0n, nanos: 0 });
      } else if (tag.field === 2) {
        expectWireType(tag, LENGTH_DELIMITED, 'content');
        content = await this.readContent(await stream.varintNumber());
      } else {
        await skipField(stream, tag);
      }
      beyond(stream, end);
    }
    beyond(stream, end);
    return new DecodedRow(content, time);
  }

  /** Fields of a repeated Timestamp merge into the one before (protobuf's merge rule). */
  private async readTimestamp(
    end: number,
    into: { seconds: bigint; nanos: number },
  ): Promise<{ seconds: bigint; nanos: number }> {
    const stream = this.stream;
    const time = { ...into };
    while (stream.offset < end) {
      const tag = await readTag(stream);
      if (tag.field === 1) {
        expectWireType(tag, VARINT, 'seconds');
        time.seconds = BigInt.asIntN(64, await stream.varint64());
      } else if (tag.field === 2) {
        expectWireType(tag, VARINT, 'nanos');
        time.nanos = Number(BigInt.asIntN(32, await stream.varint64()));
      } else {
        await skipField(stream, tag);
      }
      beyond(stream, end);
    }
    beyond(stream, end);
    return time;
  }

  /** The kept prefix of a content field as text; the rest is checked as UTF-8 and dropped. */
  private async readContent(length: number): Promise<string> {
    // One decoder for every row: a call without `stream` ends the text and resets it.
    const decoder = this.utf8;
    try {
      if (length <= KEPT_CONTENT_BYTES) return decoder.decode(await this.stream.bytes(length));
      const kept = decoder.decode(await this.stream.bytes(KEPT_CONTENT_BYTES), { stream: true });
      await this.stream.skip(length - KEPT_CONTENT_BYTES, (piece) => decoder.decode(piece, { stream: true }));
      decoder.decode();
      return kept;
    } catch (error) {
      if (error instanceof TypeError) {
        decoder.decode(); // drop a partial character it may still hold
        throw new WireError('invalid UTF-8 in a log row');
      }
      throw error;
    }
  }
}
