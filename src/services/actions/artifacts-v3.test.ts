import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { AppError } from '../../modules/errors.ts';
import { completeChunks, parseContentRange, splitItemPath } from './artifacts-v3.ts';

const invalid = (fn: () => unknown) =>
  assert.throws(fn, (error) => error instanceof AppError && error.kind === 'invalid');

describe('splitItemPath', () => {
  test('the first segment is the artifact, the rest the file path, cleaned', () => {
    assert.deepEqual(splitItemPath('out/a/b.txt'), { name: 'out', path: 'a/b.txt' });
    assert.deepEqual(splitItemPath('out\\win\\file.txt'), { name: 'out', path: 'win/file.txt' });
    assert.deepEqual(splitItemPath('/out//./a.txt'), { name: 'out', path: 'a.txt' });
  });
  test('no path, a path that climbs out, or NUL: 400', () => {
    for (const bad of ['out', 'out/', 'out/../x', '../out/x', 'out/a/../../b', 'out/a\0b', ''])
      invalid(() => splitItemPath(bad));
  });
});

describe('parseContentRange', () => {
  test('a chunk of a file, and the empty file the 1.x client announces as 0--1/0', () => {
    assert.deepEqual(parseContentRange('bytes 0-8388607/12582912'), { start: 0, length: 8388608, total: 12582912 });
    assert.deepEqual(parseContentRange('bytes 8388608-12582911/12582912'), {
      start: 8388608,
      length: 4194304,
      total: 12582912,
    });
    assert.deepEqual(parseContentRange('bytes 0--1/0'), { start: 0, length: 0, total: 0 });
  });
  test('missing, malformed or past the total: 400', () => {
    for (const bad of [undefined, '', 'bytes */10', 'bytes 0-10/10', 'bytes 5-3/10', 'bytes 3--1/10', 'bytes 0--1/5'])
      invalid(() => parseContentRange(bad));
  });
});

describe('completeChunks', () => {
  test('the chunks covering the file, in order; null while one is missing', () => {
    assert.deepEqual(
      (completeChunks(['20_10_10', '20_0_10']) ?? []).map((c) => c.name),
      ['20_0_10', '20_10_10'],
    );
    assert.equal(completeChunks(['20_0_10']), null);
    assert.equal(completeChunks(['20_0_10', '20_11_9']), null);
    assert.equal(completeChunks([]), null);
    assert.deepEqual(
      (completeChunks(['0_0_0']) ?? []).map((c) => c.name),
      ['0_0_0'],
    );
  });
  test('chunks of an earlier attempt with another total, and stray names, are left out', () => {
    assert.deepEqual(
      (completeChunks(['30_0_10', 'x.tmp', '20_0_10', '20_10_10']) ?? []).map((c) => c.name),
      ['20_0_10', '20_10_10'],
    );
  });
});
