import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatLogLine, formatLogTime } from './task-logs.ts';

const T0 = 1_700_000_000;

test("a runner's timestamp prints as Forgejo prints it: nanoseconds cut to seven digits, never rounded through a float", () => {
  // 14 ms: as a float of seconds since 1970 this is 0.013999999…, which printed .0139999.
  assert.equal(formatLogTime(T0, 14_000_000), '2023-11-14T22:13:20.0140000Z');
  assert.equal(formatLogTime(T0, 999_999_999), '2023-11-14T22:13:20.9999999Z', 'Go truncates');
  assert.equal(formatLogTime(T0, 123_456_789), '2023-11-14T22:13:20.1234567Z');
  assert.equal(formatLogTime(T0, 0), '2023-11-14T22:13:20.0000000Z');
  assert.equal(
    formatLogTime(T0, 1_500_000_000),
    '2023-11-14T22:13:21.5000000Z',
    'out-of-range nanoseconds normalised as time.Unix does',
  );
  assert.equal(formatLogLine({ time: T0, nanos: 7_000_000, content: 'hello' }), '2023-11-14T22:13:20.0070000Z hello\n');
  for (let ms = 0; ms < 1000; ms += 1) {
    const expected = new Date(T0 * 1000 + ms).toISOString().replace(/Z$/, '0000Z');
    if (formatLogTime(T0, ms * 1_000_000) !== expected) assert.fail(`${ms} ms`);
  }
});
