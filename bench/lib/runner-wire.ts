// A runner's calls as forgejo-runner puts them on the wire (connect-go over
// HTTP/1.1: binary Connect, Connect-Protocol-Version 1, Accept-Encoding gzip,
// a Content-Length body, the runner's uuid and token headers, its
// fetch_timeout as Connect-Timeout-Ms when it sends one), each runner with
// its own kept-alive connections, as Go's http.Transport keeps them.
// forgejo-runner runs on other machines; here the runners share the bench's
// 2 cores with the server they measure, so they must cost little: request
// bodies are encoded by hand (a few bytes each), of an answer only the task
// id is decoded, and the calls go over plain sockets (http1-connection.ts),
// not node:http's client, which cost the swarm's clients about half a
// millisecond of CPU per job (two calls) on this machine. The Connect client
// of test/support/runner-client.ts does the same work with more than 1 ms of
// CPU per job (Headers, abort signals, async iterables, full message
// decoding); the tests keep it, as it checks every field.
import { randomUUID } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { Http1Connection } from './http1-connection.ts';
import type { Http1CallOptions } from './http1-connection.ts';

export type FetchOutcome =
  /** taskId: the task the answer holds, null when none. */
  | { kind: 'answered'; taskId: bigint | null }
  /** The call ran out of its deadline on the client. */
  | { kind: 'timeout' }
  /** The connection was closed under the call (or the caller aborted it). */
  | { kind: 'dropped' };

/** The server answered a call with a status other than 200. */
export class RunnerWireError extends Error {}

export interface WireCallOptions {
  /** The call's deadline: sent as Connect-Timeout-Ms and enforced here, as connect-go does. */
  timeoutMs?: number;
  /** Aborting ends the call at once (its outcome: dropped). */
  signal?: AbortSignal;
  /**
   * Sends a fresh x-runner-request-key with the FetchTask (true), or this
   * one (a string), as forgejo-runner releases of 2026 do with every fetch (a
   * retry of a lost answer repeats it).
   */
  requestKey?: boolean | string;
}

export interface WireRunner {
  /** FetchTask with tasks_version 0: the server holds it while it has nothing to claim. */
  fetchTask(options?: WireCallOptions): Promise<FetchOutcome>;
  /** UpdateTask reporting the task finished with success (no steps, no outputs). */
  finishTask(taskId: bigint): Promise<void>;
  /**
   * What forgejo-runner's reporter sends for a job shorter than its report
   * interval, before the final UpdateTask: UpdateLog and UpdateTask as the
   * job starts (one log row, the task started), then the closing UpdateLog
   * (one more row, no_more).
   */
  reportTask(taskId: bigint): Promise<void>;
  /** Ping: opens (or reuses) a kept-alive connection. */
  ping(): Promise<void>;
}

/** Every connection of a fleet's runners, so that the bench can close them all at its end. */
export class WireFleet {
  private readonly open = new Set<Http1Connection>();

  connect(host: string, port: number): Http1Connection {
    const connection = new Http1Connection(host, port, (closed) => this.open.delete(closed));
    this.open.add(connection);
    return connection;
  }

  destroy(): void {
    for (const connection of this.open) connection.destroy();
    this.open.clear();
  }
}

const SERVICE = '/api/actions/runner.v1.RunnerService/';
const PING_PATH = '/api/actions/ping.v1.PingService/Ping';
/** FetchTaskRequest{tasks_version: 0}: every field at its default, so no bytes. */
const FETCH_TASK_BODY = Buffer.alloc(0);
/** PingRequest{data: "bench"}. */
const PING_BODY = Buffer.from([0x0a, 5, ...Buffer.from('bench')]);
const RESULT_SUCCESS = 1;

function varint(value: bigint): number[] {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80n) {
    bytes.push(Number(rest & 0x7fn) | 0x80);
    rest >>= 7n;
  }
  bytes.push(Number(rest));
  return bytes;
}

/** UpdateTaskRequest{state: TaskState{id, result: RESULT_SUCCESS}}. */
function finishTaskBody(taskId: bigint): Buffer {
  const state = [0x08, ...varint(taskId), 0x10, RESULT_SUCCESS];
  return Buffer.from([0x0a, ...varint(BigInt(state.length)), ...state]);
}

function delimited(field: number, bytes: number[]): number[] {
  return [(field << 3) | 2, ...varint(BigInt(bytes.length)), ...bytes];
}

/** UpdateTaskRequest{state: TaskState{id, started_at}}: the task running. */
function startTaskBody(taskId: bigint, seconds: bigint): Buffer {
  const state = [0x08, ...varint(taskId), ...delimited(3, [0x08, ...varint(seconds)])];
  return Buffer.from(delimited(1, state));
}

/** UpdateLogRequest{task_id, index, rows: [LogRow{time, content}], no_more}. */
function logBody(taskId: bigint, index: bigint, seconds: bigint, content: string, noMore: boolean): Buffer {
  const row = [...delimited(1, [0x08, ...varint(seconds)]), ...delimited(2, [...Buffer.from(content)])];
  return Buffer.from([
    0x08,
    ...varint(taskId),
    ...(index === 0n ? [] : [0x10, ...varint(index)]),
    ...delimited(3, row),
    ...(noMore ? [0x20, 1] : []),
  ]);
}

/** Reads protobuf varints and skips fields, over one buffer. */
class ProtoReader {
  pos: number;
  constructor(
    readonly bytes: Uint8Array,
    start = 0,
    readonly end = bytes.length,
  ) {
    this.pos = start;
  }

  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (this.pos >= this.end) throw new RunnerWireError('truncated varint');
      const byte = this.bytes[this.pos++] as number;
      result |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return result;
      shift += 7n;
    }
  }

  skip(wireType: number): void {
    if (wireType === 0) this.varint();
    else if (wireType === 1) this.pos += 8;
    else if (wireType === 2) {
      // Read before adding: `pos += varint()` would add to pos as it was before the length.
      const length = Number(this.varint());
      this.pos += length;
    } else if (wireType === 5) this.pos += 4;
    else throw new RunnerWireError(`unexpected wire type ${wireType}`);
  }
}

/** The id of FetchTaskResponse.task (field 1, its field 1), null when the answer holds no task. */
export function taskIdOf(bytes: Uint8Array): bigint | null {
  const reader = new ProtoReader(bytes);
  while (reader.pos < reader.end) {
    const tag = Number(reader.varint());
    if (tag !== 0x0a) {
      reader.skip(tag & 7);
      continue;
    }
    const length = Number(reader.varint());
    const task = new ProtoReader(bytes, reader.pos, reader.pos + length);
    let id = 0n;
    while (task.pos < task.end) {
      const field = Number(task.varint());
      if (field === 0x08) id = task.varint();
      else task.skip(field & 7);
    }
    return id;
  }
  return null;
}

interface Answer {
  status: number;
  body: Buffer;
}

export function wireRunner(serverUrl: string, runner: { uuid: string; token: string }, fleet: WireFleet): WireRunner {
  const url = new URL(serverUrl);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = Number(url.port || 80);
  // The header lines every call sends (Go's order: Host, User-Agent, then the rest).
  const baseHead =
    `Host: ${url.host}\r\n` +
    'User-Agent: connect-go/1.18.1 (go1.24)\r\n' +
    'Content-Type: application/proto\r\n' +
    'Connect-Protocol-Version: 1\r\n' +
    'Accept-Encoding: gzip\r\n' +
    `X-Runner-Uuid: ${runner.uuid}\r\n` +
    `X-Runner-Token: ${runner.token}\r\n`;
  /** This runner's idle kept-alive connections (a call takes one, or opens one). */
  const idle: Http1Connection[] = [];

  function request(path: string, extraHead: string, body: Buffer): Buffer {
    const head = `POST ${path} HTTP/1.1\r\n${baseHead}${extraHead}Content-Length: ${body.length}\r\n\r\n`;
    const headLength = Buffer.byteLength(head, 'latin1');
    const bytes = Buffer.allocUnsafe(headLength + body.length);
    bytes.write(head, 0, 'latin1');
    body.copy(bytes, headLength);
    return bytes;
  }

  /** One unary call: resolves with the answer (its body decoded from gzip), or with 'timeout' / 'dropped'. */
  async function call(
    path: string,
    extraHead: string,
    body: Buffer,
    options: Http1CallOptions,
  ): Promise<Answer | 'timeout' | 'dropped'> {
    let connection = idle.pop();
    while (connection !== undefined && !connection.usable) connection = idle.pop();
    connection ??= fleet.connect(host, port);
    const outcome = await connection.call(request(path, extraHead, body), options);
    if (connection.usable) idle.push(connection);
    if (typeof outcome === 'string') return outcome;
    const bytes = outcome.headers.get('content-encoding') === 'gzip' ? gunzipSync(outcome.body) : outcome.body;
    return { status: outcome.status, body: bytes };
  }

  function check(answer: Answer, what: string): Answer {
    if (answer.status !== 200)
      throw new RunnerWireError(`${what} answered ${answer.status}: ${answer.body.toString('utf8').slice(0, 200)}`);
    return answer;
  }

  return {
    async fetchTask(options = {}) {
      const timeout = options.timeoutMs === undefined ? '' : `Connect-Timeout-Ms: ${options.timeoutMs}\r\n`;
      const key = options.requestKey
        ? `X-Runner-Request-Key: ${typeof options.requestKey === 'string' ? options.requestKey : randomUUID()}\r\n`
        : '';
      const answer = await call(`${SERVICE}FetchTask`, timeout + key, FETCH_TASK_BODY, options);
      if (answer === 'timeout') return { kind: 'timeout' };
      if (answer === 'dropped') return { kind: 'dropped' };
      return { kind: 'answered', taskId: taskIdOf(check(answer, 'FetchTask').body) };
    },
    async finishTask(taskId) {
      const body = finishTaskBody(taskId);
      const answer = await call(`${SERVICE}UpdateTask`, '', body, {});
      if (typeof answer === 'string') throw new RunnerWireError(`UpdateTask of task ${taskId}: connection ${answer}`);
      check(answer, 'UpdateTask');
    },
    async reportTask(taskId) {
      const seconds = BigInt(Math.floor(Date.now() / 1000));
      const send = async (method: 'UpdateLog' | 'UpdateTask', body: Buffer): Promise<void> => {
        const answer = await call(`${SERVICE}${method}`, '', body, {});
        if (typeof answer === 'string') throw new RunnerWireError(`${method} of task ${taskId}: connection ${answer}`);
        check(answer, method);
      };
      await send('UpdateLog', logBody(taskId, 0n, seconds, `received task ${taskId}`, false));
      await send('UpdateTask', startTaskBody(taskId, seconds));
      await send('UpdateLog', logBody(taskId, 1n, seconds, 'job succeeded', true));
    },
    async ping() {
      const answer = await call(PING_PATH, '', PING_BODY, {});
      if (typeof answer === 'string') throw new RunnerWireError(`Ping: connection ${answer}`);
      check(answer, 'Ping');
    },
  };
}
