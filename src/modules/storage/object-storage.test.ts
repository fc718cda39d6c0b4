import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { LocalObjectStorage } from './object-storage.ts';

const root = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-storage-'));
after(() => fs.rm(root, { recursive: true, force: true }));
const storage = new LocalObjectStorage(root);

async function readAll(name: string): Promise<string> {
  const reader = await storage.open(name);
  try {
    const buffer = Buffer.alloc(reader.size);
    await reader.read(buffer, 0);
    return buffer.toString();
  } finally {
    await reader.close();
  }
}

test('put replaces an object whole; a failed put leaves the old one and no temporary file', async () => {
  assert.equal(await storage.put('1/2/a.zip', Readable.from([Buffer.from('old')])), 3);
  assert.equal(await readAll('1/2/a.zip'), 'old');
  const failing = storage.put('1/2/a.zip', Readable.from([Buffer.from('new '), Buffer.from('and more')]), (chunk) => {
    if (chunk.toString() === 'and more') throw new Error('too large');
  });
  await assert.rejects(failing, /too large/);
  assert.equal(await readAll('1/2/a.zip'), 'old');
  assert.deepEqual(await fs.readdir(path.join(root, '1', '2')), ['a.zip']);
});

test('a source may reuse one buffer: each chunk is written before the next is pulled', async () => {
  async function* reused(): AsyncGenerator<Buffer> {
    const buffer = Buffer.alloc(2);
    for (const text of ['ab', 'cd', 'ef']) {
      buffer.write(text);
      yield buffer;
    }
  }
  assert.equal(await storage.put('reuse', reused()), 6);
  assert.equal(await readAll('reuse'), 'abcdef');
  assert.equal(await storage.size('reuse'), 6);
  assert.equal(await storage.size('missing'), null);
});

test('names cannot leave the root; removal is idempotent', async () => {
  for (const name of ['../x', '/etc/passwd', 'a/../../x', '', '.', 'a\0b'])
    await assert.rejects(storage.put(name, Readable.from([Buffer.from('x')])), /unsafe storage name/, name);
  await storage.put('9/1/f', Readable.from([Buffer.from('x')]));
  await storage.removePrefix('9');
  await storage.removePrefix('9');
  await storage.remove('9/1/f');
  assert.equal(await storage.size('9/1/f'), null);
  await assert.rejects(storage.open('9/1/f'), { code: 'ENOENT' });
});

test('list names the objects directly in a folder with their sizes: not subfolders, not puts in progress', async () => {
  await storage.put('7/chunks/10_0_4', Readable.from([Buffer.from('abcd')]));
  await storage.put('7/chunks/10_4_6', Readable.from([Buffer.from('efghij')]));
  await storage.put('7/chunks/deeper/x', Readable.from([Buffer.from('x')]));
  await fs.writeFile(path.join(root, '7', 'chunks', '10_4_6.abc.tmp'), 'partial');
  const listed = (await storage.list('7/chunks')).sort((a, b) => a.name.localeCompare(b.name));
  assert.deepEqual(listed, [
    { name: '10_0_4', size: 4 },
    { name: '10_4_6', size: 6 },
  ]);
  assert.deepEqual(await storage.list('7/none'), []);
});
