// The runner.v1 messages as the runners' Go code puts them on the wire,
// encoded and decoded field by field from the numbers published in the
// protocol's own definitions — Gitea's actions-proto-def for the baseline,
// code.forgejo.org/forgejo/actions-proto v0.7.0 for Forgejo's additions — and
// never from Gantry's generated code, so a numbering mistake on the server
// side shows up here instead of being mirrored.
//
// Decoding follows Go's protobuf: a field whose wire type is not the one the
// definition says is an unknown field and is skipped, so a wrongly numbered
// answer reads as "absent", exactly what forgejo-runner sees.
import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';

/** runner.v1.Result. */
export const Result = { unspecified: 0, success: 1, failure: 2, cancelled: 3, skipped: 4 } as const;

export interface Timestamp {
  seconds: number;
  nanos: number;
}

export function timestampOf(date: Date): Timestamp {
  const ms = date.getTime();
  return { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1_000_000 };
}

export interface StepState {
  id: number;
  result: number;
  startedAt?: Timestamp;
  stoppedAt?: Timestamp;
  logIndex: number;
  logLength: number;
}

export interface TaskState {
  id: number;
  result: number;
  startedAt?: Timestamp;
  stoppedAt?: Timestamp;
  steps: StepState[];
}

export interface LogRow {
  time: Timestamp;
  content: string;
}

export interface WireRunner {
  id: number;
  uuid: string;
  token: string;
  name: string;
  version: string;
  labels: string[];
  ephemeral: boolean;
}

export interface WireTask {
  id: number;
  workflowPayload: string;
  context: Record<string, unknown> | null;
  secrets: Record<string, string>;
  needs: Record<string, { outputs: Record<string, string>; result: number }>;
  vars: Record<string, string>;
}

// ---- encoding -------------------------------------------------------------

function timestamp(w: BinaryWriter, field: number, value: Timestamp | undefined): void {
  if (value === undefined) return;
  // google.protobuf.Timestamp: 1 seconds int64, 2 nanos int32.
  w.tag(field, WireType.LengthDelimited).fork();
  if (value.seconds !== 0) w.tag(1, WireType.Varint).int64(value.seconds);
  if (value.nanos !== 0) w.tag(2, WireType.Varint).int32(value.nanos);
  w.join();
}

function strings(w: BinaryWriter, field: number, values: readonly string[]): void {
  for (const value of values) w.tag(field, WireType.LengthDelimited).string(value);
}

function stringMap(w: BinaryWriter, field: number, map: Record<string, string>): void {
  // A map entry is a message { 1 key, 2 value }.
  for (const [key, value] of Object.entries(map)) {
    w.tag(field, WireType.LengthDelimited)
      .fork()
      .tag(1, WireType.LengthDelimited)
      .string(key)
      .tag(2, WireType.LengthDelimited)
      .string(value)
      .join();
  }
}

/** RegisterRequest: 1 name, 2 token, 3 agent_labels, 4 custom_labels, 5 version, 6 labels, 7 ephemeral, 8 capabilities. */
export function encodeRegister(req: {
  name: string;
  token: string;
  agentLabels: string[];
  version: string;
  labels: string[];
  ephemeral?: boolean;
  capabilities?: string[];
}): Uint8Array {
  const w = new BinaryWriter();
  w.tag(1, WireType.LengthDelimited).string(req.name);
  w.tag(2, WireType.LengthDelimited).string(req.token);
  strings(w, 3, req.agentLabels);
  w.tag(5, WireType.LengthDelimited).string(req.version);
  strings(w, 6, req.labels);
  if (req.ephemeral === true) w.tag(7, WireType.Varint).bool(true);
  strings(w, 8, req.capabilities ?? []);
  return w.finish();
}

/** DeclareRequest: 1 version, 2 labels, 3 capabilities. */
export function encodeDeclare(req: { version: string; labels: string[]; capabilities?: string[] }): Uint8Array {
  const w = new BinaryWriter();
  w.tag(1, WireType.LengthDelimited).string(req.version);
  strings(w, 2, req.labels);
  strings(w, 3, req.capabilities ?? []);
  return w.finish();
}

/** FetchTaskRequest: 1 tasks_version, 2 task_capacity (optional: present even when 0 if set). */
export function encodeFetchTask(req: { tasksVersion: number; taskCapacity?: number }): Uint8Array {
  const w = new BinaryWriter();
  if (req.tasksVersion !== 0) w.tag(1, WireType.Varint).int64(req.tasksVersion);
  if (req.taskCapacity !== undefined) w.tag(2, WireType.Varint).int64(req.taskCapacity);
  return w.finish();
}

/** FetchSingleTaskRequest (actions-proto v0.7.0): 1 tasks_version, 2 handle (optional). */
export function encodeFetchSingleTask(req: { tasksVersion: number; handle?: string }): Uint8Array {
  const w = new BinaryWriter();
  if (req.tasksVersion !== 0) w.tag(1, WireType.Varint).int64(req.tasksVersion);
  if (req.handle !== undefined) w.tag(2, WireType.LengthDelimited).string(req.handle);
  return w.finish();
}

/** UpdateTaskRequest: 1 state (TaskState: 1 id, 2 result, 3 started_at, 4 stopped_at, 5 steps), 2 outputs. */
export function encodeUpdateTask(req: { state: TaskState; outputs: Record<string, string> }): Uint8Array {
  const w = new BinaryWriter();
  const s = req.state;
  w.tag(1, WireType.LengthDelimited).fork();
  if (s.id !== 0) w.tag(1, WireType.Varint).int64(s.id);
  if (s.result !== 0) w.tag(2, WireType.Varint).int32(s.result);
  timestamp(w, 3, s.startedAt);
  timestamp(w, 4, s.stoppedAt);
  for (const step of s.steps) {
    // StepState: 1 id, 2 result, 3 started_at, 4 stopped_at, 5 log_index, 6 log_length.
    w.tag(5, WireType.LengthDelimited).fork();
    if (step.id !== 0) w.tag(1, WireType.Varint).int64(step.id);
    if (step.result !== 0) w.tag(2, WireType.Varint).int32(step.result);
    timestamp(w, 3, step.startedAt);
    timestamp(w, 4, step.stoppedAt);
    if (step.logIndex !== 0) w.tag(5, WireType.Varint).int64(step.logIndex);
    if (step.logLength !== 0) w.tag(6, WireType.Varint).int64(step.logLength);
    w.join();
  }
  w.join();
  stringMap(w, 2, req.outputs);
  return w.finish();
}

/** UpdateLogRequest: 1 task_id, 2 index, 3 rows (LogRow: 1 time, 2 content), 4 no_more. */
export function encodeUpdateLog(req: { taskId: number; index: number; rows: LogRow[]; noMore: boolean }): Uint8Array {
  const w = new BinaryWriter();
  if (req.taskId !== 0) w.tag(1, WireType.Varint).int64(req.taskId);
  if (req.index !== 0) w.tag(2, WireType.Varint).int64(req.index);
  for (const row of req.rows) {
    w.tag(3, WireType.LengthDelimited).fork();
    timestamp(w, 1, row.time);
    if (row.content !== '') w.tag(2, WireType.LengthDelimited).string(row.content);
    w.join();
  }
  if (req.noMore) w.tag(4, WireType.Varint).bool(true);
  return w.finish();
}

/** ping.v1.PingRequest: 1 data. */
export function encodePing(data: string): Uint8Array {
  return new BinaryWriter().tag(1, WireType.LengthDelimited).string(data).finish();
}

// ---- decoding -------------------------------------------------------------

type FieldReader = (r: BinaryReader) => void;

/**
 * Reads a message, handing each field to the reader registered for its
 * number and wire type; anything else is skipped as unknown (Go's rule).
 */
function readFields(bytes: Uint8Array, readers: Record<number, [WireType, FieldReader]>): void {
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [no, wireType] = r.tag();
    const reader = readers[no];
    if (reader !== undefined && reader[0] === wireType) reader[1](r);
    else r.skip(wireType, no);
  }
}

const varint = (read: (r: BinaryReader) => void): [WireType, FieldReader] => [WireType.Varint, read];
const delimited = (read: (r: BinaryReader) => void): [WireType, FieldReader] => [WireType.LengthDelimited, read];

function readStringMapEntry(bytes: Uint8Array, into: Record<string, string>): void {
  let key = '';
  let value = '';
  readFields(bytes, { 1: delimited((r) => (key = r.string())), 2: delimited((r) => (value = r.string())) });
  into[key] = value;
}

/** google.protobuf.Value: 1 null, 2 number, 3 string, 4 bool, 5 struct, 6 list. */
function readValue(bytes: Uint8Array): unknown {
  let value: unknown = null;
  readFields(bytes, {
    1: varint((r) => {
      r.int32();
      value = null;
    }),
    2: [WireType.Bit64, (r) => (value = r.double())],
    3: delimited((r) => (value = r.string())),
    4: varint((r) => (value = r.bool())),
    5: delimited((r) => (value = readStruct(r.bytes()))),
    6: delimited((r) => {
      const list: unknown[] = [];
      readFields(r.bytes(), { 1: delimited((lr) => list.push(readValue(lr.bytes()))) });
      value = list;
    }),
  });
  return value;
}

/** google.protobuf.Struct: 1 fields map<string, Value>. */
function readStruct(bytes: Uint8Array): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  readFields(bytes, {
    1: delimited((r) => {
      let key = '';
      let value: unknown = null;
      readFields(r.bytes(), {
        1: delimited((er) => (key = er.string())),
        2: delimited((er) => (value = readValue(er.bytes()))),
      });
      out[key] = value;
    }),
  });
  return out;
}

/** Runner: 1 id, 2 uuid, 3 token, 4 name, 5 status, 6 agent_labels, 7 custom_labels, 8 version, 9 labels, 10 ephemeral. */
function readRunner(bytes: Uint8Array): WireRunner {
  const runner: WireRunner = { id: 0, uuid: '', token: '', name: '', version: '', labels: [], ephemeral: false };
  readFields(bytes, {
    1: varint((r) => (runner.id = Number(r.int64()))),
    2: delimited((r) => (runner.uuid = r.string())),
    3: delimited((r) => (runner.token = r.string())),
    4: delimited((r) => (runner.name = r.string())),
    8: delimited((r) => (runner.version = r.string())),
    9: delimited((r) => runner.labels.push(r.string())),
    10: varint((r) => (runner.ephemeral = r.bool())),
  });
  return runner;
}

/** Task: 1 id, 2 workflow_payload, 3 context, 4 secrets, 5 machine, 6 needs, 7 vars. */
function readTask(bytes: Uint8Array): WireTask {
  const task: WireTask = { id: 0, workflowPayload: '', context: null, secrets: {}, needs: {}, vars: {} };
  readFields(bytes, {
    1: varint((r) => (task.id = Number(r.int64()))),
    2: delimited((r) => (task.workflowPayload = new TextDecoder().decode(r.bytes()))),
    3: delimited((r) => (task.context = readStruct(r.bytes()))),
    4: delimited((r) => readStringMapEntry(r.bytes(), task.secrets)),
    6: delimited((r) => {
      // TaskNeed: 1 outputs, 2 result.
      let key = '';
      const need = { outputs: {} as Record<string, string>, result: 0 };
      readFields(r.bytes(), {
        1: delimited((er) => (key = er.string())),
        2: delimited((er) =>
          readFields(er.bytes(), {
            1: delimited((nr) => readStringMapEntry(nr.bytes(), need.outputs)),
            2: varint((nr) => (need.result = nr.int32())),
          }),
        ),
      });
      task.needs[key] = need;
    }),
    7: delimited((r) => readStringMapEntry(r.bytes(), task.vars)),
  });
  return task;
}

/** RegisterResponse and DeclareResponse: 1 runner. */
export function decodeRunnerResponse(bytes: Uint8Array): WireRunner | null {
  let runner: WireRunner | null = null;
  readFields(bytes, { 1: delimited((r) => (runner = readRunner(r.bytes()))) });
  return runner;
}

/** FetchTaskResponse: 1 task, 2 tasks_version, 3 additional_tasks. */
export function decodeFetchTask(bytes: Uint8Array): {
  task: WireTask | null;
  tasksVersion: number;
  additionalTasks: WireTask[];
} {
  const out = { task: null as WireTask | null, tasksVersion: 0, additionalTasks: [] as WireTask[] };
  readFields(bytes, {
    1: delimited((r) => (out.task = readTask(r.bytes()))),
    2: varint((r) => (out.tasksVersion = Number(r.int64()))),
    3: delimited((r) => out.additionalTasks.push(readTask(r.bytes()))),
  });
  return out;
}

/** FetchSingleTaskResponse (actions-proto v0.7.0): 1 tasks_version, 2 task — the reverse of FetchTaskResponse. */
export function decodeFetchSingleTask(bytes: Uint8Array): { task: WireTask | null; tasksVersion: number } {
  const out = { task: null as WireTask | null, tasksVersion: 0 };
  readFields(bytes, {
    1: varint((r) => (out.tasksVersion = Number(r.int64()))),
    2: delimited((r) => (out.task = readTask(r.bytes()))),
  });
  return out;
}

/** UpdateTaskResponse: 1 state (TaskState: 1 id, 2 result), 2 sent_outputs. */
export function decodeUpdateTask(bytes: Uint8Array): { id: number; result: number; sentOutputs: string[] } {
  const out = { id: 0, result: 0, sentOutputs: [] as string[] };
  readFields(bytes, {
    1: delimited((r) =>
      readFields(r.bytes(), {
        1: varint((sr) => (out.id = Number(sr.int64()))),
        2: varint((sr) => (out.result = sr.int32())),
      }),
    ),
    2: delimited((r) => out.sentOutputs.push(r.string())),
  });
  return out;
}

/** UpdateLogResponse: 1 ack_index. */
export function decodeUpdateLog(bytes: Uint8Array): { ackIndex: number } {
  const out = { ackIndex: 0 };
  readFields(bytes, { 1: varint((r) => (out.ackIndex = Number(r.int64()))) });
  return out;
}

/** PingResponse: 1 data. */
export function decodePing(bytes: Uint8Array): string {
  let data = '';
  readFields(bytes, { 1: delimited((r) => (data = r.string())) });
  return data;
}
