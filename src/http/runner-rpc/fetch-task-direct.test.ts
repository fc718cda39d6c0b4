import { test } from 'node:test';
import assert from 'node:assert/strict';
import { create, toBinary } from '@bufbuild/protobuf';
import { FetchTaskResponseSchema } from '../../gen/runner/v1/messages_pb.ts';
import { noTaskAnswer } from './fetch-task-direct.ts';

test('an answer without a task is encoded byte for byte as toBinary encodes it', () => {
  for (const version of [0n, 1n, 127n, 128n, 300n, 16_384n, 2n ** 35n, 2n ** 63n - 1n, -1n]) {
    const expected = toBinary(FetchTaskResponseSchema, create(FetchTaskResponseSchema, { tasksVersion: version }));
    assert.deepEqual(noTaskAnswer(version), expected, `tasks_version ${version}`);
  }
});
