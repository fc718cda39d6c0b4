// A log range written into a sink: the exact bytes whatever the range and
// however slowly the sink takes them, a plain or archived log through two
// buffers reused for the whole range, and a sink that goes away mid-range ends the write
// (rejected, file closed) instead of hanging.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { ArchivedLogBody, PlainLogBody } from './log-body.ts';

/** A sink that keeps a copy of every chunk and the chunk itself, and completes each write a tick later. */
class SlowSink extends Writable {
  readonly copies: Buffer[] = [];
  readonly given: Buffer[] = [];
  constructor(private readonly failAfter = Number.POSITIVE_INFINITY) {
    super();
  }
  override _write(chunk: Buffer, _encoding: string, done: (error?: Error | null) => void): void {
    this.given.push(chunk);
    this.copies.push(Buffer.from(chunk));
    if (this.copies.length >= this.failAfter) {
      this.destroy();
      return;
    }
    setImmediate(done);
  }
  bytes(): Buffer {
    return Buffer.concat(this.copies);
  }
}

describe('log bodies', () => {
  let dir: string;
  let plainFile: string;
  let gzipFile: string;
  // 300 KB of distinct lines: a range crosses several 64 KiB reads.
  const content = Buffer.from(
    Array.from({ length: 6000 }, (_, i) => `2026-01-01T00:00:00.0000000Z line ${i} ${'x'.repeat(i % 17)}\n`).join(''),
  );

  before(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-log-body-'));
    plainFile = path.join(dir, 'a.log');
    gzipFile = path.join(dir, 'a.log.gz');
    await fs.writeFile(plainFile, content);
    await fs.writeFile(gzipFile, gzipSync(content));
  });
  after(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  const ranges: readonly [number, number][] = [
    [0, content.length - 1],
    [0, 0],
    [65_535, 65_536],
    [1000, 200_000],
    [content.length - 10, content.length - 1],
  ];

  test('a plain log range arrives exact through a slow sink, in two buffers reused for the whole range', async () => {
    for (const [start, end] of ranges) {
      const sink = new SlowSink();
      await new PlainLogBody(await fs.open(plainFile, 'r'), start, end).writeTo(sink);
      assert.ok(sink.bytes().equals(content.subarray(start, end + 1)), `${start}-${end}`);
      assert.ok(new Set(sink.given.map((chunk) => chunk.buffer)).size <= 2, `${start}-${end}: two buffers at most`);
    }
  });

  test('an archived log range arrives exact, the bytes before it skipped after inflating, in two buffers reused for the whole range', async () => {
    for (const [start, end] of ranges) {
      const sink = new SlowSink();
      await new ArchivedLogBody(
        await fs.open(gzipFile, 'r'),
        start,
        end - start + 1,
        start === 0 && end === content.length - 1,
      ).writeTo(sink);
      assert.ok(sink.bytes().equals(content.subarray(start, end + 1)), `${start}-${end}`);
      assert.ok(new Set(sink.given.map((chunk) => chunk.buffer)).size <= 2, `${start}-${end}: two buffers at most`);
    }
  });

  test('an archived log range arrives exact through the gunzip stream too (the path for a Node without the zlib handle)', async () => {
    for (const [start, end] of ranges) {
      const sink = new SlowSink();
      await new ArchivedLogBody(
        await fs.open(gzipFile, 'r'),
        start,
        end - start + 1,
        start === 0 && end === content.length - 1,
        false,
      ).writeTo(sink);
      assert.ok(sink.bytes().equals(content.subarray(start, end + 1)), `${start}-${end}`);
    }
  });

  test('an archive of several gzip members (as appended logs may be) inflates whole', async () => {
    const members = path.join(dir, 'members.log.gz');
    const cut = 100_001;
    await fs.writeFile(members, Buffer.concat([gzipSync(content.subarray(0, cut)), gzipSync(content.subarray(cut))]));
    const sink = new SlowSink();
    await new ArchivedLogBody(await fs.open(members, 'r'), 0, content.length, true).writeTo(sink);
    assert.ok(sink.bytes().equals(content));
  });

  test('a corrupt or truncated archive is an error and the file is closed', async () => {
    const packed = gzipSync(content);
    const corrupt = path.join(dir, 'corrupt.log.gz');
    const truncated = path.join(dir, 'truncated.log.gz');
    const damaged = Buffer.from(packed);
    for (let i = 200; i < 400; i += 1) damaged[i] = 0xff;
    await fs.writeFile(corrupt, damaged);
    await fs.writeFile(truncated, packed.subarray(0, packed.length - 100));
    for (const file of [corrupt, truncated]) {
      for (const reuseBuffers of [true, false]) {
        const body = new ArchivedLogBody(await fs.open(file, 'r'), 0, content.length, true, reuseBuffers);
        const handle = (body as unknown as { handle: fs.FileHandle }).handle;
        await assert.rejects(body.writeTo(new SlowSink()), `${path.basename(file)} ${reuseBuffers}`);
        assert.equal(handle.fd, -1, 'closed');
      }
    }
  });

  test('a sink that goes away mid-range rejects the write and the file is closed', async () => {
    for (const open of [
      async () => new PlainLogBody(await fs.open(plainFile, 'r'), 0, content.length - 1),
      async () => new ArchivedLogBody(await fs.open(gzipFile, 'r'), 0, content.length, true),
      async () => new ArchivedLogBody(await fs.open(gzipFile, 'r'), 0, content.length, true, false),
    ]) {
      const body = await open();
      const handle = (body as unknown as { handle: fs.FileHandle }).handle;
      await assert.rejects(body.writeTo(new SlowSink(2)));
      assert.equal(handle.fd, -1, 'closed');
    }
  });

  test('a file shorter than promised is an error, not a short answer', async () => {
    await assert.rejects(
      new PlainLogBody(await fs.open(plainFile, 'r'), 0, content.length + 100).writeTo(new SlowSink()),
      /ended before its committed size/,
    );
    await assert.rejects(
      new ArchivedLogBody(await fs.open(gzipFile, 'r'), 0, content.length + 100, false).writeTo(new SlowSink()),
      /ended before its committed size/,
    );
  });
});
