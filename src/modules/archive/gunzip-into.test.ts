// Gunzip into the caller's buffer: the bytes come out exact through an
// output buffer smaller than the data (one or several members), the end of
// the data is seen (a call then moves nothing), and a corrupt or truncated
// gzip throws instead of ending short, without an unhandled 'error' later.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';
import { GunzipInto } from './gunzip-into.ts';

const content = Buffer.from(Array.from({ length: 20_000 }, (_, i) => `line ${i} ${'y'.repeat(i % 31)}\n`).join(''));

/** Inflates `packed`, fed `inputChunk` bytes at a time, through a reused `outputSize`-byte buffer. */
function inflateAll(packed: Buffer, inputChunk: number, outputSize: number): Buffer {
  const inflater = new GunzipInto();
  const output = Buffer.alloc(outputSize);
  const parts: Buffer[] = [];
  try {
    let offset = 0;
    for (;;) {
      const end = Math.min(packed.length, offset + inputChunk);
      const finish = end === packed.length;
      const { consumed, produced } = inflater.inflate(packed, offset, end - offset, output, finish);
      offset += consumed;
      parts.push(Buffer.from(output.subarray(0, produced)));
      if (consumed === 0 && produced === 0) return Buffer.concat(parts);
    }
  } finally {
    inflater.close();
  }
}

describe('GunzipInto', () => {
  test('this Node exposes the zlib handle it needs', () => {
    assert.equal(GunzipInto.available(), true);
  });

  test('inflates exact through an output buffer much smaller than the data, whatever the input chunking', () => {
    const packed = gzipSync(content);
    for (const [inputChunk, outputSize] of [
      [packed.length, 4096],
      [1000, 65_536],
      [1, 777],
    ] as const)
      assert.ok(inflateAll(packed, inputChunk, outputSize).equals(content), `${inputChunk}/${outputSize}`);
  });

  test('several gzip members inflate as one stream', () => {
    const packed = Buffer.concat([gzipSync(content.subarray(0, 12_345)), gzipSync(content.subarray(12_345))]);
    assert.ok(inflateAll(packed, 5000, 8192).equals(content));
  });

  test('a corrupt or truncated gzip throws, and no error is left to surface later', async () => {
    const packed = gzipSync(content);
    const corrupt = Buffer.from(packed);
    corrupt.fill(0xff, 100, 200);
    assert.throws(() => inflateAll(corrupt, 4096, 4096));
    assert.throws(() => inflateAll(packed.subarray(0, packed.length - 50), 4096, 4096), /unexpected end of file/);
    // The stream's own copy of the error would be emitted a tick later: it must not be unhandled.
    await new Promise((resolve) => setImmediate(resolve));
  });
});
