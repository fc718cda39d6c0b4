// FetchTaskResponse in binary protobuf, written straight from the messages
// fetch-task.ts builds, with the bytes toBinary writes (field order, map
// entries in insertion order with key and value always written, implicit
// zero values left out). toBinary goes through protobuf-es's reflection and
// turns the task's `github` context (a JsonObject standing for a
// google.protobuf.Struct) into Struct and Value messages first; on a busy
// fleet that was a visible part of every claimed job. A context holding
// something that is not a JSON value (which the payload never builds) is
// left to toBinary, so it fails or succeeds as it always did.
import { create, toBinary } from '@bufbuild/protobuf';
import type { JsonValue } from '@bufbuild/protobuf';
import { FetchTaskResponseSchema } from '../../gen/runner/v1/messages_pb.ts';
import type { FetchTaskResponse, Task } from '../../gen/runner/v1/messages_pb.ts';

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_DELIMITED = 2;

/**
 * From this many UTF-16 units on, a string goes to Buffer's native UTF-8
 * writer instead of the copy loop (Writer.string): where the two cost the same
 * on this project's bench machine (Node 20; 32 units: 230 ns against 340, 64:
 * 470 against 370).
 */
const NATIVE_FROM = 48;

/**
 * The most UTF-16 units of key and value together that Writer.shortAsciiEntry
 * writes: the entry's length (both, their tags and lengths, and a Value's tag
 * and length) then stays below 0x80, one varint byte.
 */
const SHORT_ENTRY = 120;

/**
 * The buffer the last answer was written in, for the next (taken while one is
 * written): a fresh 8 KiB buffer per answer, outside Node's pool, was about
 * 1 µs and 8 KiB of garbage for each answer, most of them a few KiB. A buffer
 * grown past SPARE_MAX for a large answer is not kept.
 */
let spareBuffer: Buffer | null = null;
const SPARE_MAX = 64 * 1024;

function takeSpareBuffer(): Buffer {
  const spare = spareBuffer;
  spareBuffer = null;
  return spare ?? Buffer.allocUnsafe(8192);
}

/** A value in the context that JSON cannot hold: the whole answer goes to toBinary. */
class NotJson extends Error {}

/** A growable byte buffer; a nested message is written in place and its length put in front when it ends. */
class Writer {
  buf = takeSpareBuffer();
  pos = 0;
  private readonly starts: number[] = [];

  private ensure(bytes: number): void {
    if (this.pos + bytes <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + bytes));
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }

  /** A varint of a non-negative safe integer (tags, lengths, enums). */
  varint(value: number): void {
    this.ensure(10);
    let rest = value;
    while (rest >= 0x80) {
      this.buf[this.pos++] = (rest % 0x80) | 0x80;
      rest = Math.floor(rest / 0x80);
    }
    this.buf[this.pos++] = rest;
  }

  /** An int64 as a varint (two's complement for a negative value, as protobuf writes it). */
  varint64(value: bigint): void {
    let rest = BigInt.asUintN(64, value);
    if (rest <= BigInt(Number.MAX_SAFE_INTEGER)) return this.varint(Number(rest));
    this.ensure(10);
    while (rest >= 0x80n) {
      this.buf[this.pos++] = Number(rest & 0x7fn) | 0x80;
      rest >>= 7n;
    }
    this.buf[this.pos++] = Number(rest);
  }

  tag(field: number, wireType: number): void {
    this.varint((field << 3) | wireType);
  }

  string(field: number, value: string): void {
    this.tag(field, WIRE_DELIMITED);
    const length = value.length;
    // A long string (an event payload's, a context's) is measured and written
    // by Buffer's native UTF-8 code, about 6 ns a character faster than the
    // loop below (8 KiB: 2.7 µs against 50); below NATIVE_FROM units the two
    // calls cost more than the copy.
    if (length >= NATIVE_FROM) return this.utf8(value);
    // Most short strings are ASCII: their bytes are their UTF-16 units, copied here.
    const start = this.pos;
    this.varint(length);
    this.ensure(length);
    const buf = this.buf;
    let at = this.pos;
    for (let i = 0; i < length; i += 1) {
      const unit = value.charCodeAt(i);
      if (unit >= 0x80) {
        this.pos = start;
        return this.utf8(value);
      }
      buf[at++] = unit;
    }
    this.pos = at;
  }

  /**
   * A map entry or Struct entry whose key and string value are short and
   * ASCII, written whole: `entryField` { 1: key, 2: value }, with
   * `valueIsValue` when the value is a google.protobuf.Value (its string_value,
   * field 3) rather than the string itself. Most of a task's entries are such (the
   * context's keys and values, secrets, variables), and writing each through
   * fork, string and join cost more than the bytes: the entry's lengths are
   * known before it is written, so nothing is moved or measured twice. False,
   * with nothing written, when a unit is not ASCII or the entry is long; the
   * caller then writes it the general way.
   */
  shortAsciiEntry(entryField: number, key: string, value: string, valueIsValue: boolean): boolean {
    const keyLength = key.length;
    const valueLength = value.length;
    // Every length below then fits one varint byte (< 0x80).
    if (keyLength + valueLength > SHORT_ENTRY) return false;
    const valueBytes = valueIsValue ? valueLength + 2 : valueLength;
    const entryLength = 2 + keyLength + 2 + valueBytes;
    this.ensure(2 + entryLength);
    const buf = this.buf;
    let at = this.pos;
    let units = 0;
    buf[at++] = (entryField << 3) | WIRE_DELIMITED;
    buf[at++] = entryLength;
    buf[at++] = (1 << 3) | WIRE_DELIMITED;
    buf[at++] = keyLength;
    for (let i = 0; i < keyLength; i += 1) {
      const unit = key.charCodeAt(i);
      units |= unit;
      buf[at++] = unit;
    }
    buf[at++] = (2 << 3) | WIRE_DELIMITED;
    buf[at++] = valueBytes;
    if (valueIsValue) {
      buf[at++] = (3 << 3) | WIRE_DELIMITED;
      buf[at++] = valueLength;
    }
    for (let i = 0; i < valueLength; i += 1) {
      const unit = value.charCodeAt(i);
      units |= unit;
      buf[at++] = unit;
    }
    // A unit of 0x80 or more needs more than one byte: nothing written counts.
    if (units >= 0x80) return false;
    this.pos = at;
    return true;
  }

  private utf8(value: string): void {
    const length = Buffer.byteLength(value, 'utf8');
    this.varint(length);
    this.ensure(length);
    this.pos += this.buf.write(value, this.pos, length, 'utf8');
  }

  bytes(field: number, value: Uint8Array): void {
    this.tag(field, WIRE_DELIMITED);
    this.varint(value.byteLength);
    this.ensure(value.byteLength);
    this.buf.set(value, this.pos);
    this.pos += value.byteLength;
  }

  double(field: number, value: number): void {
    this.tag(field, WIRE_FIXED64);
    this.ensure(8);
    this.pos = this.buf.writeDoubleLE(value, this.pos);
  }

  /** Starts field `field` holding a message (end it with join); one byte is kept for its length. */
  fork(field: number): void {
    this.tag(field, WIRE_DELIMITED);
    this.ensure(1);
    this.starts.push(this.pos);
    this.pos += 1;
  }

  join(): void {
    const start = this.starts.pop() as number;
    const length = this.pos - start - 1;
    if (length < 0x80) {
      this.buf[start] = length;
      return;
    }
    // A longer message needs more length bytes: its bytes move up by as many.
    let extra = 0;
    for (let rest = length; rest >= 0x80; rest = Math.floor(rest / 0x80)) extra += 1;
    this.ensure(extra);
    this.buf.copyWithin(start + 1 + extra, start + 1, this.pos);
    const end = this.pos + extra;
    this.pos = start;
    this.varint(length);
    this.pos = end;
  }

  /** Bytes written before, as they are (a whole field). */
  raw(bytes: Uint8Array): void {
    this.ensure(bytes.byteLength);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.byteLength;
  }

  /** A copy of the bytes from `start` to the current position. */
  copyFrom(start: number): Uint8Array {
    return Uint8Array.prototype.slice.call(this.buf, start, this.pos);
  }

  /** The bytes written, copied out (a small answer into Node's buffer pool); the buffer is kept for the next answer. */
  finish(): Uint8Array {
    const bytes = Buffer.allocUnsafe(this.pos);
    this.buf.copy(bytes, 0, 0, this.pos);
    spareBuffer = this.buf.length <= SPARE_MAX ? this.buf : null;
    return bytes;
  }
}

function stringMap(w: Writer, field: number, map: Record<string, string>): void {
  // for…in: see context.
  for (const key in map) {
    if (w.shortAsciiEntry(field, key, map[key] as string, false)) continue;
    w.fork(field);
    w.string(1, key);
    w.string(2, map[key] as string);
    w.join();
  }
}

/** google.protobuf.Value. */
function value(w: Writer, item: JsonValue): void {
  if (item === null) {
    w.tag(1, WIRE_VARINT);
    w.varint(0);
  } else if (typeof item === 'number') w.double(2, item);
  else if (typeof item === 'string') w.string(3, item);
  else if (typeof item === 'boolean') {
    w.tag(4, WIRE_VARINT);
    w.varint(item ? 1 : 0);
  } else if (Array.isArray(item)) {
    w.fork(6);
    for (const element of item) {
      w.fork(1);
      value(w, element);
      w.join();
    }
    w.join();
  } else if (typeof item === 'object') {
    w.fork(5);
    struct(w, item);
    w.join();
  } else throw new NotJson();
}

/** One entry of google.protobuf.Struct's fields. */
function entry(w: Writer, key: string, item: JsonValue | undefined): void {
  if (item === undefined) throw new NotJson();
  if (typeof item === 'string' && w.shortAsciiEntry(1, key, item, true)) return;
  w.fork(1);
  w.string(1, key);
  w.fork(2);
  value(w, item);
  w.join();
  w.join();
}

/** google.protobuf.Struct's fields. */
function struct(w: Writer, object: { [key: string]: JsonValue }): void {
  for (const key of Object.keys(object)) entry(w, key, object[key]);
}

/**
 * The encoded Struct entries of frozen objects in a task's context, by the
 * object: a run's event payload (task-payload.ts parses it once per run and
 * freezes it) is most of a task's bytes and the same for every job of the
 * run. Frozen, the object cannot change under its cached bytes; an entry is
 * reused only under the same key.
 */
const frozenEntries = new WeakMap<object, { key: string; bytes: Uint8Array }>();

/** The task's context: struct, with the entries of frozen objects encoded once (frozenEntries). */
function context(w: Writer, object: { [key: string]: JsonValue }): void {
  // for…in, not Object.keys: V8 reads `object[key]` inside it by the object's
  // enumeration cache, where a key looked up by name was the loop's costliest
  // line (a plain object: both walk the same keys in the same order).
  for (const key in object) {
    const item = object[key];
    if (typeof item !== 'object' || item === null || !Object.isFrozen(item)) {
      entry(w, key, item);
      continue;
    }
    const cached = frozenEntries.get(item);
    if (cached !== undefined && cached.key === key) {
      w.raw(cached.bytes);
      continue;
    }
    const start = w.pos;
    entry(w, key, item);
    frozenEntries.set(item, { key, bytes: w.copyFrom(start) });
  }
}

function task(w: Writer, field: number, t: Task): void {
  w.fork(field);
  if (t.id !== 0n) {
    w.tag(1, WIRE_VARINT);
    w.varint64(t.id);
  }
  if (t.workflowPayload !== undefined) w.bytes(2, t.workflowPayload);
  if (t.context !== undefined) {
    w.fork(3);
    context(w, t.context);
    w.join();
  }
  stringMap(w, 4, t.secrets);
  if (t.machine !== '') w.string(5, t.machine);
  for (const jobId of Object.keys(t.needs)) {
    const need = t.needs[jobId] as Task['needs'][string];
    w.fork(6);
    w.string(1, jobId);
    w.fork(2);
    stringMap(w, 1, need.outputs);
    if (need.result !== 0) {
      w.tag(2, WIRE_VARINT);
      w.varint(need.result);
    }
    w.join();
    w.join();
  }
  stringMap(w, 7, t.vars);
  w.join();
}

/** The answer as toBinary(FetchTaskResponseSchema, create(FetchTaskResponseSchema, answer)) writes it. */
export function encodeFetchTaskResponse(
  answer: Pick<FetchTaskResponse, 'task' | 'additionalTasks' | 'tasksVersion'>,
): Uint8Array {
  try {
    const w = new Writer();
    if (answer.task !== undefined) task(w, 1, answer.task);
    if (answer.tasksVersion !== 0n) {
      w.tag(2, WIRE_VARINT);
      w.varint64(answer.tasksVersion);
    }
    for (const more of answer.additionalTasks) task(w, 3, more);
    return w.finish();
  } catch (error) {
    if (!(error instanceof NotJson)) throw error;
    return toBinary(FetchTaskResponseSchema, create(FetchTaskResponseSchema, answer));
  }
}
