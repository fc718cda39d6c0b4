import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { requestIdOf } from './request-id.ts';

const request = (headers: Record<string, string>) => ({ headers }) as unknown as IncomingMessage;

test('a request id is the client’s plausible X-Request-Id, else a fresh UUID', () => {
  assert.equal(requestIdOf(request({ 'x-request-id': 'abc-123' })), 'abc-123');
  const fresh = requestIdOf(request({ 'x-request-id': 'not an id' }));
  assert.match(fresh, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.notEqual(requestIdOf(request({})), fresh);
});

test('a fresh request id a held poll keeps costs about a flat 36-character string on the heap', () => {
  setFlagsFromString('--expose-gc');
  const collectGarbage = runInNewContext('gc') as () => void;
  const count = 20_000;
  const kept: string[] = [];
  collectGarbage();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < count; i += 1) kept.push(requestIdOf(request({})));
  collectGarbage();
  const perId = (process.memoryUsage().heapUsed - before) / count;
  // A flat one-byte string of 36 characters is 56 bytes, plus the array's slot;
  // randomUUID()'s unflattened chain of concatenations is about 490.
  assert.ok(perId < 150, `${perId.toFixed(0)} bytes of heap per kept request id`);
  assert.equal(kept.length, count);
});
