// The hand-written FetchTaskResponse encoding writes exactly what protobuf-es's
// toBinary writes, for every shape a task takes.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { create, toBinary } from '@bufbuild/protobuf';
import type { JsonObject } from '@bufbuild/protobuf';
import { FetchTaskResponseSchema, Result, TaskSchema } from '../../gen/runner/v1/messages_pb.ts';
import type { FetchTaskResponse, Task } from '../../gen/runner/v1/messages_pb.ts';
import { encodeFetchTaskResponse } from './task-encoding.ts';

type Answer = Pick<FetchTaskResponse, 'task' | 'additionalTasks' | 'tasksVersion'>;

function expected(answer: Answer): Uint8Array {
  return toBinary(FetchTaskResponseSchema, create(FetchTaskResponseSchema, answer));
}

const CONTEXT: JsonObject = {
  token: 'ghs_0123456789abcdef',
  run_id: '1234',
  run_number: '7',
  retention_days: '90',
  event: {
    ref: 'refs/heads/main',
    commits: [{ id: 'abc', message: 'héllo — wörld ✓ 🚀', added: [], author: { name: 'a', email: null } }],
    forced: false,
    size: 3,
    ratio: 0.125,
    negative: -42,
    large: 2 ** 53 + 2,
    tiny: 5e-324,
    nested: { deeper: { deepest: [1, 'two', true, null, { x: [] }, []] } },
    '2': 'a numeric key',
    '': 'an empty key',
  },
  event_name: 'workflow_dispatch',
  long: 'x'.repeat(20_000),
  longUnicode: `${'x'.repeat(200)}é${'y'.repeat(200)}`,
  loneSurrogate: 'a\ud800b',
  // Either side of where strings leave the copy loop for Buffer's writer (task-encoding.ts NATIVE_FROM).
  ascii47: 'q'.repeat(47),
  ascii48: 'q'.repeat(48),
  unicode47: `${'q'.repeat(46)}é`,
  unicode48: `é${'q'.repeat(47)}`,
  ascii127: 'z'.repeat(127),
  ascii128: 'z'.repeat(128),
  // Either side of the entries written whole (task-encoding.ts SHORT_ENTRY: key and value, 120 units).
  [`${'k'.repeat(60)}`]: 'v'.repeat(60),
  [`${'k'.repeat(61)}`]: 'v'.repeat(60),
  // The first whose entry's length takes two varint bytes.
  [`${'k'.repeat(62)}`]: 'v'.repeat(60),
  [`${'k'.repeat(59)}é`]: 'v'.repeat(60),
  [`${'k'.repeat(20)}ü`]: '',
  short: `${'v'.repeat(20)}\u007f`,
  shortUnicode: `${'v'.repeat(20)}\u0080`,
  '': '',
};

function taskOf(init: Parameters<typeof create<typeof TaskSchema>>[1]): Task {
  return create(TaskSchema, init);
}

const TASKS: Record<string, Task> = {
  full: taskOf({
    id: 42n,
    workflowPayload: new TextEncoder().encode('on: push\njobs:\n  a:\n    runs-on: x\n'),
    context: CONTEXT,
    secrets: {
      GITHUB_TOKEN: 'secret',
      EMPTY: '',
      ÜNI: 'cödé',
      LONG: 'x'.repeat(116),
      LONGER: 'x'.repeat(118),
      LONGEST: 'x'.repeat(200),
      '': 'é',
    },
    vars: { A: '1', B: '' },
    needs: {
      build: { outputs: { out: 'value', empty: '' }, result: Result.SUCCESS },
      lint: { outputs: {}, result: Result.UNSPECIFIED },
    },
  }),
  bare: taskOf({}),
  emptyParts: taskOf({ id: 1n, workflowPayload: new Uint8Array(0), context: {} }),
  bigId: taskOf({ id: 2n ** 62n + 12345n, machine: 'old' }),
};

describe('encodeFetchTaskResponse', () => {
  for (const [name, task] of Object.entries(TASKS)) {
    test(`a ${name} task, alone and with more`, () => {
      for (const answer of [
        { task, additionalTasks: [], tasksVersion: 0n },
        { task, additionalTasks: [], tasksVersion: 1n },
        { task, additionalTasks: [TASKS.full as Task, TASKS.bare as Task], tasksVersion: 2n ** 40n },
      ]) {
        assert.deepEqual(Buffer.from(encodeFetchTaskResponse(answer)), Buffer.from(expected(answer)));
      }
    });
  }

  test('an answer keeps its bytes while later answers are encoded', () => {
    const large = taskOf({ id: 7n, context: { big: 'b'.repeat(100_000) } });
    const answers = [TASKS.full, large, TASKS.emptyParts, TASKS.full].map((task) => ({
      task,
      additionalTasks: [],
      tasksVersion: 3n,
    }));
    const encoded = answers.map((answer) => encodeFetchTaskResponse(answer));
    for (const [i, answer] of answers.entries())
      assert.deepEqual(Buffer.from(encoded[i] as Uint8Array), Buffer.from(expected(answer)), `answer ${i}`);
  });

  test('no task: the version alone, or nothing', () => {
    for (const tasksVersion of [0n, 1n, 300n, 2n ** 63n - 1n]) {
      const answer = { task: undefined, additionalTasks: [], tasksVersion };
      assert.deepEqual(Buffer.from(encodeFetchTaskResponse(answer)), Buffer.from(expected(answer)));
    }
  });

  test("a frozen object in the context (a run's event, shared by its jobs) encodes as toBinary writes it, every time", () => {
    const freeze = (value: unknown): void => {
      if (typeof value !== 'object' || value === null) return;
      for (const item of Object.values(value)) freeze(item);
      Object.freeze(value);
    };
    const event = structuredClone(CONTEXT.event) as JsonObject;
    freeze(event);
    const small = Object.freeze({ a: 'b' });
    const contexts: JsonObject[] = [
      { token: 'first', event, event_name: 'push' },
      { token: 'second, longer', event, event_name: 'push', small },
      // The same objects under other keys, and next to other values.
      { renamed: event, event: small, long: 'y'.repeat(300) },
      { event },
    ];
    for (const [i, context] of contexts.entries()) {
      const task = taskOf({ id: BigInt(i + 1), context, secrets: { S: String(i) } });
      const answer = { task, additionalTasks: [task], tasksVersion: 9n };
      assert.deepEqual(Buffer.from(encodeFetchTaskResponse(answer)), Buffer.from(expected(answer)), `context ${i}`);
    }
  });

  test('a context with a value JSON cannot hold is left to toBinary', () => {
    const task = taskOf({ id: 3n, context: { fine: 'yes' } });
    (task.context as Record<string, unknown>).odd = undefined;
    const answer = { task, additionalTasks: [], tasksVersion: 5n };
    let toBinaryResult: Uint8Array | Error;
    try {
      toBinaryResult = expected(answer);
    } catch (error) {
      toBinaryResult = error as Error;
    }
    if (toBinaryResult instanceof Error) assert.throws(() => encodeFetchTaskResponse(answer));
    else assert.deepEqual(Buffer.from(encodeFetchTaskResponse(answer)), Buffer.from(toBinaryResult));
  });
});
