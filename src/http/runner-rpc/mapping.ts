// Protocol messages ↔ domain values. Ids and versions are int64 on the wire
// (bigint here) and numbers in the domain; times are Timestamps on the wire and
// Unix seconds in the domain.
import { create } from '@bufbuild/protobuf';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { JsonObject } from '@bufbuild/protobuf';
import type { Timestamp } from '@bufbuild/protobuf/wkt';
import type { Runner as DomainRunner } from '../../models/runners.ts';
import type { TaskPayload } from '../../services/actions/runner-protocol.ts';
import { RunnerSchema, TaskSchema } from '../../gen/runner/v1/messages_pb.ts';
import type { LogRow, Runner, Task, TaskState, UpdateLogRequest } from '../../gen/runner/v1/messages_pb.ts';

/** The Runner message of Register and Declare; `token` only when it was just created. */
export function toProtoRunner(runner: DomainRunner, token = ''): Runner {
  const labels = runner.labels ?? [];
  return create(RunnerSchema, {
    id: BigInt(runner.id),
    uuid: runner.uuid,
    token,
    name: runner.name,
    version: runner.version,
    labels,
    ephemeral: runner.ephemeral,
  });
}

const encoder = new TextEncoder();

export function toProtoTask(task: TaskPayload): Task {
  const needs: MessageInitShape<typeof TaskSchema>['needs'] = {};
  for (const [jobId, need] of Object.entries(task.needs)) needs[jobId] = { outputs: need.outputs, result: need.result };
  return create(TaskSchema, {
    id: BigInt(task.id),
    workflowPayload: encoder.encode(task.workflowPayload),
    // The context is built from JSON values only (strings, booleans, the parsed event).
    context: task.context as JsonObject,
    secrets: task.secrets,
    vars: task.vars,
    needs,
  });
}

/**
 * Unix seconds, or undefined for an absent or zero timestamp (Forgejo's
 * convertTimestamp). Whole seconds for task and step times, which are stored
 * as integers; log rows keep the fraction for the line's time stamp.
 */
export function secondsOf(
  timestamp: Pick<Timestamp, 'seconds' | 'nanos'> | undefined,
  fraction = false,
): number | undefined {
  if (timestamp === undefined) return undefined;
  if (timestamp.seconds === 0n && timestamp.nanos === 0) return undefined;
  return Number(timestamp.seconds) + (fraction ? timestamp.nanos / 1e9 : 0);
}

/** A wire int64 as a number; ids and indexes stay far below 2^53. */
export function toNumber(value: bigint): number {
  return Number(value);
}

export interface DomainTaskState {
  id: number;
  result: number;
  startedAt?: number;
  stoppedAt?: number;
  steps: { id: number; result: number; startedAt?: number; stoppedAt?: number; logIndex: number; logLength: number }[];
}

function withTimes<T extends object>(
  base: T,
  startedAt: number | undefined,
  stoppedAt: number | undefined,
): T & { startedAt?: number; stoppedAt?: number } {
  return {
    ...base,
    ...(startedAt !== undefined ? { startedAt } : {}),
    ...(stoppedAt !== undefined ? { stoppedAt } : {}),
  };
}

export function fromProtoTaskState(state: TaskState | undefined): DomainTaskState {
  if (state === undefined) return { id: 0, result: 0, steps: [] };
  return withTimes(
    {
      id: toNumber(state.id),
      result: state.result,
      steps: state.steps.map((step) =>
        withTimes(
          {
            id: toNumber(step.id),
            result: step.result,
            logIndex: toNumber(step.logIndex),
            logLength: toNumber(step.logLength),
          },
          secondsOf(step.startedAt),
          secondsOf(step.stoppedAt),
        ),
      ),
    },
    secondsOf(state.startedAt),
    secondsOf(state.stoppedAt),
  );
}

export interface DomainLogRequest {
  taskId: number;
  index: number;
  rows: { time?: number; nanos?: number; content: string }[];
  noMore: boolean;
}

/** Whole seconds and the nanoseconds apart: a float of both loses the digits Forgejo prints. */
function fromProtoLogRow(row: LogRow): { time?: number; nanos?: number; content: string } {
  const time = secondsOf(row.time);
  return time === undefined ? { content: row.content } : { time, nanos: row.time?.nanos ?? 0, content: row.content };
}

export function fromProtoLogRequest(req: UpdateLogRequest): DomainLogRequest {
  return {
    taskId: toNumber(req.taskId),
    index: toNumber(req.index),
    rows: req.rows.map(fromProtoLogRow),
    noMore: req.noMore,
  };
}
