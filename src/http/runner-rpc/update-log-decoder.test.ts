// The streaming UpdateLogRequest decoder against protobuf-es's fromBinary:
// the same rows, task_id, index and no_more for any message, cut into chunks
// anywhere; refusals where fromBinary refuses; long rows kept only as far as
// a stored line needs them.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { UpdateLogRequestSchema } from '../../gen/runner/v1/messages_pb.ts';
import { formatLogLine } from '../../services/actions/task-logs.ts';
import type { LogRow } from '../../services/actions/task-logs.ts';
import { WireError } from './byte-stream.ts';
import { fromProtoLogRequest } from './mapping.ts';
import { KEPT_CONTENT_BYTES, UpdateLogDecoder } from './update-log-decoder.ts';

async function* chunked(bytes: Uint8Array, cuts: number[]): AsyncGenerator<Uint8Array> {
  let start = 0;
  for (const cut of [...cuts.map((c) => c % (bytes.length + 1))].sort((a, b) => a - b)) {
    yield bytes.subarray(start, Math.max(start, cut));
    start = Math.max(start, cut);
  }
  yield bytes.subarray(start);
}

interface Decoded {
  taskId: number;
  index: number;
  rows: LogRow[];
  noMore: boolean;
}

async function decode(bytes: Uint8Array, cuts: number[] = []): Promise<Decoded> {
  const decoder = new UpdateLogDecoder(chunked(bytes, cuts));
  const rows: LogRow[] = [];
  // Plain copies: the decoder's rows are instances of a class (see DecodedRow), fromBinary's mapping gives literals.
  for (let row = await decoder.nextRow(); row !== null; row = await decoder.nextRow()) rows.push({ ...row });
  return { taskId: Number(decoder.taskId), index: Number(decoder.index), rows, noMore: decoder.noMore };
}

const int64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
const row = fc.record(
  {
    time: fc.record({
      seconds: fc.oneof(int64, fc.bigInt({ min: 0n, max: 2n ** 35n })),
      nanos: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
    }),
    content: fc.oneof(fc.string({ unit: 'grapheme', maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 200 })),
  },
  { requiredKeys: ['content'] },
);
const message = fc.record({
  taskId: int64,
  index: int64,
  rows: fc.array(row, { maxLength: 12 }),
  noMore: fc.boolean(),
});

describe('UpdateLogDecoder', () => {
  test('decodes what toBinary wrote exactly as fromBinary does, however the bytes are chunked', async () => {
    await fc.assert(
      fc.asyncProperty(message, fc.array(fc.nat(), { maxLength: 8 }), async (init, cuts) => {
        const bytes = toBinary(UpdateLogRequestSchema, create(UpdateLogRequestSchema, init));
        assert.deepEqual(await decode(bytes, cuts), fromProtoLogRequest(fromBinary(UpdateLogRequestSchema, bytes)));
      }),
      { numRuns: 300 },
    );
  });

  test('fields in any order, repeated, unknown (groups too): the last scalar wins, as in fromBinary', async () => {
    const bytes = new Uint8Array([
      0x1a,
      0x05,
      0x12,
      0x03,
      0x61,
      0x62,
      0x63, // rows { content "abc" }
      0x08,
      0x07, // task_id 7
      0x2b,
      0x08,
      0x01,
      0x2c, // group 5 { 1: 1 }
      0x10,
      0x02,
      0x10,
      0x03, // index 2, then 3
      0x29,
      1,
      2,
      3,
      4,
      5,
      6,
      7,
      8, // field 5 fixed64: unknown, skipped
      0x1a,
      0x0b,
      0x0a,
      0x02,
      0x08,
      0x05,
      0x0a,
      0x02,
      0x10,
      0x01,
      0x12,
      0x01,
      0x78, // rows { time{seconds 5} time{nanos 1} content "x" }
      0x20,
      0x01, // no_more
    ]);
    const expected = fromProtoLogRequest(fromBinary(UpdateLogRequestSchema, bytes));
    const decoded = await decode(bytes, [3, 9, 20]);
    assert.deepEqual(decoded, expected);
    assert.deepEqual(decoded.rows, [{ content: 'abc' }, { time: 5, nanos: 1, content: 'x' }]);
    assert.equal(decoded.taskId, 7);
    assert.equal(decoded.index, 3);
  });

  test('truncated or malformed bytes are refused where fromBinary refuses them', async () => {
    const whole = toBinary(
      UpdateLogRequestSchema,
      create(UpdateLogRequestSchema, { taskId: 9n, rows: [{ content: 'hello' }, { content: 'world' }] }),
    );
    for (let cut = 1; cut < whole.length; cut += 1) {
      const bytes = whole.subarray(0, cut);
      let refused = false;
      try {
        fromBinary(UpdateLogRequestSchema, bytes);
      } catch {
        refused = true;
      }
      if (refused) await assert.rejects(decode(bytes), WireError, `cut at ${cut}`);
      else
        assert.deepEqual(
          await decode(bytes),
          fromProtoLogRequest(fromBinary(UpdateLogRequestSchema, bytes)),
          `cut at ${cut}`,
        );
    }
    await assert.rejects(decode(new Uint8Array([0x1a, 0x03, 0x12, 0x01, 0xff])), /invalid UTF-8/);
    await assert.rejects(decode(new Uint8Array([0x00])), /illegal tag/);
    await assert.rejects(
      decode(new Uint8Array([0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])),
      /invalid varint/,
    );
    await assert.rejects(decode(new Uint8Array([0x0a, 0x00])), /wire type 2 for field task_id/);
  });

  test('a row longer than a stored line keeps only what the stored line needs, and is still checked as UTF-8', async () => {
    const long = `${'a'.repeat(KEPT_CONTENT_BYTES - 2)}€${'b\n'.repeat(200_000)}`;
    const bytes = toBinary(
      UpdateLogRequestSchema,
      create(UpdateLogRequestSchema, { taskId: 1n, rows: [{ content: long }, { content: 'after' }] }),
    );
    const decoded = await decode(bytes, [70_000, 70_001, 200_000]);
    assert.equal(decoded.rows.length, 2);
    assert.ok(Buffer.byteLength(decoded.rows[0]?.content ?? '', 'utf8') <= KEPT_CONTENT_BYTES);
    assert.equal(formatLogLine(decoded.rows[0] as LogRow), formatLogLine({ content: long }));
    assert.equal(decoded.rows[1]?.content, 'after');

    const invalidTail = Buffer.concat([Buffer.from(bytes.subarray(0, bytes.length - 7)), Buffer.from([0xff])]);
    await assert.rejects(decode(invalidTail), WireError);
  });

  test('the cut of a long row gives the same stored line as the whole row, whatever characters sit at the cut', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: 'binary', minLength: 1, maxLength: 8 }),
        fc.integer({ min: KEPT_CONTENT_BYTES - 24, max: KEPT_CONTENT_BYTES + 24 }),
        fc.boolean(),
        async (unit, prefix, newlines) => {
          const content = `${'x'.repeat(prefix)}${unit.repeat(30)}${newlines ? '\n'.repeat(9) : ''}${unit.repeat(3000)}`;
          const bytes = toBinary(
            UpdateLogRequestSchema,
            create(UpdateLogRequestSchema, { taskId: 1n, rows: [{ content }] }),
          );
          const decoded = await decode(bytes, [prefix + 3]);
          assert.equal(formatLogLine(decoded.rows[0] as LogRow), formatLogLine({ content }));
        },
      ),
      { numRuns: 60 },
    );
  });

  test('task_id and index arriving after rows were stored must not change them', async () => {
    const first = toBinary(
      UpdateLogRequestSchema,
      create(UpdateLogRequestSchema, { taskId: 4n, rows: [{ content: 'a' }] }),
    );
    const late = toBinary(UpdateLogRequestSchema, create(UpdateLogRequestSchema, { index: 10n }));
    const decoder = new UpdateLogDecoder(chunked(new Uint8Array([...first, ...late]), []));
    assert.deepEqual({ ...(await decoder.nextRow()) }, { content: 'a' });
    assert.deepEqual(decoder.freezeHead(), { taskId: 4n, index: 0n });
    await assert.rejects(decoder.nextRow(), /index must precede the rows/);
  });
});
