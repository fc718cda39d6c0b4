import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { readZip } from '../../../test/support/zip-reader.ts';
import { ZipStream } from './zip-stream.ts';

async function collect(parts: AsyncIterable<Buffer> | Iterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of parts) chunks.push(chunk);
  return Buffer.concat(chunks);
}

async function* chunks(data: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let at = 0; at < data.length; at += size) yield data.subarray(at, at + size);
}

test('a streamed zip holds every entry with its CRC and sizes, UTF-8 names, and an empty entry', async () => {
  const big = Buffer.from(
    Array.from({ length: 50_000 }, (_, i) => `2026-01-01T00:00:00.0000000Z line ${i} ✓\n`).join(''),
    'utf8',
  );
  const zip = new ZipStream(new Date('2026-03-04T05:06:08Z'));
  const parts: Buffer[] = [];
  parts.push(await collect(zip.entry('build-1-attempt-1.log', chunks(big, 7_000))));
  parts.push(await collect(zip.entry('déploiement-2-attempt-1.MISSING', ['job has not been executed yet\n'])));
  parts.push(await collect(zip.entry('empty-3-attempt-1.log', [])));
  parts.push(await collect(zip.finish()));
  const archive = Buffer.concat(parts);
  const entries = readZip(archive);
  assert.deepEqual(
    entries.map((e) => e.name),
    ['build-1-attempt-1.log', 'déploiement-2-attempt-1.MISSING', 'empty-3-attempt-1.log'],
  );
  assert.ok(entries[0]?.data.equals(big));
  assert.equal(entries[1]?.data.toString(), 'job has not been executed yet\n');
  assert.equal(entries[2]?.data.length, 0);
  assert.ok(archive.length < big.length / 5, 'entries are deflated');
  if (existsSync('/usr/bin/unzip')) {
    // A second, independent reader where the machine has one.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'zip-stream-'));
    try {
      writeFileSync(path.join(dir, 'a.zip'), archive);
      execFileSync('/usr/bin/unzip', ['-tq', path.join(dir, 'a.zip')]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});

test('a source that fails mid-stream ends its entry early but keeps the archive valid', async () => {
  const zip = new ZipStream();
  async function* failing(): AsyncGenerator<Buffer> {
    yield Buffer.from('first part\n');
    throw new Error('disk gone');
  }
  const result = { error: null as Error | null };
  const parts = [
    await collect(zip.entry('a.log', failing(), result)),
    await collect(zip.entry('a.PARTIAL', ['log read failed mid-stream\n'])),
    await collect(zip.finish()),
  ];
  assert.equal(result.error?.message, 'disk gone');
  const entries = readZip(Buffer.concat(parts));
  assert.deepEqual(
    entries.map((e) => [e.name, e.data.toString()]),
    [
      ['a.log', 'first part\n'],
      ['a.PARTIAL', 'log read failed mid-stream\n'],
    ],
  );
});

test('fits refuses an entry that would need ZIP64', () => {
  const zip = new ZipStream();
  assert.equal(zip.fits(10, 1_000_000), true);
  assert.equal(zip.fits(10, 0xffffffff), false);
  assert.equal(zip.fits(10, 0xfff00000), false, 'the archive as a whole would pass 4 GiB');
});
