// Reads a whole zip archive held in memory, from its central directory, the
// way unzip does, and checks every entry's CRC-32 and sizes: enough to prove
// an archive the server streamed is well formed. Stored and deflated entries.
import assert from 'node:assert/strict';
import { crc32, inflateRawSync } from 'node:zlib';

export interface ZipEntry {
  name: string;
  data: Buffer;
}

export function readZip(zip: Buffer): ZipEntry[] {
  const end = zip.length - 22;
  assert.ok(
    end >= 0 && zip.readUInt32LE(end) === 0x06054b50,
    'an end of central directory record without comment ends the archive',
  );
  const count = zip.readUInt16LE(end + 10);
  const centralSize = zip.readUInt32LE(end + 12);
  let at = zip.readUInt32LE(end + 16);
  assert.equal(at + centralSize, end, 'the central directory ends where the end record starts');
  const entries: ZipEntry[] = [];
  for (let i = 0; i < count; i += 1) {
    assert.equal(zip.readUInt32LE(at), 0x02014b50, `central header ${i}`);
    const method = zip.readUInt16LE(at + 10);
    const crc = zip.readUInt32LE(at + 16);
    const compressed = zip.readUInt32LE(at + 20);
    const size = zip.readUInt32LE(at + 24);
    const nameLength = zip.readUInt16LE(at + 28);
    const extraLength = zip.readUInt16LE(at + 30);
    const commentLength = zip.readUInt16LE(at + 32);
    const offset = zip.readUInt32LE(at + 42);
    const name = zip.subarray(at + 46, at + 46 + nameLength).toString('utf8');
    at += 46 + nameLength + extraLength + commentLength;

    assert.equal(zip.readUInt32LE(offset), 0x04034b50, `local header of ${name}`);
    const localName = zip.subarray(offset + 30, offset + 30 + zip.readUInt16LE(offset + 26)).toString('utf8');
    assert.equal(localName, name, 'local and central names agree');
    const start = offset + 30 + zip.readUInt16LE(offset + 26) + zip.readUInt16LE(offset + 28);
    const raw = zip.subarray(start, start + compressed);
    const data = method === 0 ? Buffer.from(raw) : inflateRawSync(raw);
    assert.ok(method === 0 || method === 8, `method of ${name}`);
    assert.equal(data.length, size, `size of ${name}`);
    assert.equal(crc32(data) >>> 0, crc, `CRC-32 of ${name}`);
    if ((zip.readUInt16LE(offset + 6) & 0x0008) !== 0) {
      // The data descriptor after the data repeats CRC and sizes.
      const descriptor = start + compressed;
      assert.equal(zip.readUInt32LE(descriptor), 0x08074b50, `data descriptor of ${name}`);
      assert.deepEqual(
        [zip.readUInt32LE(descriptor + 4), zip.readUInt32LE(descriptor + 8), zip.readUInt32LE(descriptor + 12)],
        [crc, compressed, size],
      );
    }
    entries.push({ name, data });
  }
  return entries;
}
