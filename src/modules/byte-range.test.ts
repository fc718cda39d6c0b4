import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseByteRange } from './byte-range.ts';

test('Range headers read as Go http.ServeContent reads one range', () => {
  assert.deepEqual(parseByteRange(undefined, 100), { kind: 'whole' });
  assert.deepEqual(parseByteRange('bytes=0-9', 100), { kind: 'partial', start: 0, end: 9 });
  assert.deepEqual(parseByteRange('bytes=90-', 100), { kind: 'partial', start: 90, end: 99 });
  assert.deepEqual(parseByteRange('bytes=90-500', 100), { kind: 'partial', start: 90, end: 99 });
  assert.deepEqual(parseByteRange('bytes=-10', 100), { kind: 'partial', start: 90, end: 99 });
  assert.deepEqual(parseByteRange('bytes=-500', 100), { kind: 'partial', start: 0, end: 99 });
  assert.deepEqual(parseByteRange('bytes= 5 - 6 ', 100), { kind: 'partial', start: 5, end: 6 });
  assert.deepEqual(parseByteRange('bytes=0-1,5-6', 100), { kind: 'whole' });
  for (const bad of [
    'bytes=100-',
    'bytes=100-200',
    'bytes=9-3',
    'bytes=a-b',
    'items=0-1',
    'bytes=',
    'bytes=5',
    'bytes=-0',
    'bytes=-x',
  ]) {
    assert.deepEqual(parseByteRange(bad, 100), { kind: 'unsatisfiable' }, bad);
  }
  assert.deepEqual(parseByteRange('bytes=0-', 0), { kind: 'unsatisfiable' });
});
