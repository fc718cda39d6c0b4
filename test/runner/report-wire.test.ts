// UpdateTask and UpdateLog as a busy fleet sends them, seen from the wire:
// the call as connect-go puts it (a Content-Length body: forgejo-runner,
// act_runner) and as connect-es does (chunked: `gantry runner`, the tests'
// client) get the same answer byte for byte — status, headers, gzip
// negotiation, Connect errors — and the same treatment around it: the
// request line in the log, X-Request-Id, the metrics by route.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { createCurrentUserRepo, dispatchWorkflow } from '@llamaduck/forgejo-ts';
import {
  FetchTaskResponseSchema,
  Result,
  UpdateLogRequestSchema,
  UpdateLogResponseSchema,
  UpdateTaskRequestSchema,
  UpdateTaskResponseSchema,
} from '../../src/gen/runner/v1/messages_pb.ts';
import type { UpdateLogRequest, UpdateTaskRequest } from '../../src/gen/runner/v1/messages_pb.ts';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { rawRunnerCall, visibleHeaders } from '../support/raw-runner-call.ts';
import type { RawAnswer } from '../support/raw-runner-call.ts';
import { registerRunner } from '../support/runner-client.ts';
import type { RunnerCredentials } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';

const SERVICE = '/api/actions/runner.v1.RunnerService/';
const UPDATE_TASK = `${SERVICE}UpdateTask`;
const UPDATE_LOG = `${SERVICE}UpdateLog`;
const METRICS_TOKEN = 'report-wire-metrics-token';

const WORKFLOW = `on: workflow_dispatch
jobs:
  one:
    runs-on: report-wire
    steps:
      - run: echo one
      - run: echo two
`;

/** The same call sent both ways (Content-Length first): both answers. */
async function bothWays(
  url: string,
  route: string,
  runner: RunnerCredentials,
  body: Uint8Array,
  headers: Record<string, string> = {},
): Promise<[RawAnswer, RawAnswer]> {
  const plain = await rawRunnerCall(url, route, runner, body, { headers });
  const chunked = await rawRunnerCall(url, route, runner, body, { headers, chunked: true });
  return [plain, chunked];
}

function assertSameAnswer(plain: RawAnswer, chunked: RawAnswer, what: string): void {
  assert.equal(plain.status, chunked.status, `${what}: status`);
  assert.deepEqual(
    visibleHeaders(plain, ['x-request-id']),
    visibleHeaders(chunked, ['x-request-id']),
    `${what}: headers`,
  );
  assert.deepEqual(plain.body, chunked.body, `${what}: body`);
}

function updateTaskBody(init: MessageInitShape<typeof UpdateTaskRequestSchema>): Uint8Array {
  return toBinary(UpdateTaskRequestSchema, create(UpdateTaskRequestSchema, init) as UpdateTaskRequest);
}

function updateLogBody(init: MessageInitShape<typeof UpdateLogRequestSchema>): Uint8Array {
  return toBinary(UpdateLogRequestSchema, create(UpdateLogRequestSchema, init) as UpdateLogRequest);
}

function rows(from: number, count: number): MessageInitShape<typeof UpdateLogRequestSchema>['rows'] {
  return Array.from({ length: count }, (_, i) => ({
    time: timestampFromMs(1_700_000_000_000 + (from + i) * 1000),
    content: `line ${from + i}`,
  }));
}

for (const dialect of testDialects()) {
  describe(`UpdateTask and UpdateLog on the wire [${dialect}]`, () => {
    let s: TestServer;
    let owner: TestUser;
    let runner: RunnerCredentials;
    let logFile: string;

    /** Dispatches the workflow and claims its job: the task's id. */
    async function claimTask(): Promise<bigint> {
      await dispatchWorkflow({
        client: owner.client,
        path: { owner: owner.name, repo: 'report-wire', workflowfilename: 'wire.yml' },
        body: { ref: 'main' },
        throwOnError: true,
      });
      const fetched = await rawRunnerCall(s.url, `${SERVICE}FetchTask`, runner, new Uint8Array(0));
      assert.equal(fetched.status, 200, fetched.body.toString('utf8'));
      const task = fromBinary(FetchTaskResponseSchema, fetched.body).task;
      assert.ok(task !== undefined, 'the dispatched job is handed out');
      return task.id;
    }

    before(async () => {
      logFile = path.join(os.tmpdir(), `gantry-log-${randomBytes(6).toString('hex')}.jsonl`);
      s = await startTestServer(
        dialect,
        { GANTRY_METRICS_TOKEN: METRICS_TOKEN, GANTRY_LOG_LEVEL: 'info' },
        { logFile },
      );
      owner = await s.createUser('report-wire-owner');
      await createCurrentUserRepo({ client: owner.client, body: { name: 'report-wire' }, throwOnError: true });
      const work = await createWorkDir(
        remoteUrl(s.url, owner.name, 'report-wire', { user: owner.name, password: owner.token }),
      );
      await work.commit({ '.forgejo/workflows/wire.yml': WORKFLOW }, 'wire');
      assert.equal((await work.push('main')).code, 0);
      await work.remove();
      const registrationToken = await s.server.deps.services.runners.registrationToken({
        ownerId: owner.user.id,
        repoId: 0,
      });
      const client = await registerRunner(s.url, registrationToken, { labels: ['report-wire'] });
      runner = client.credentials as RunnerCredentials;
    });
    after(async () => {
      await s?.stop();
      await fs.rm(logFile, { force: true });
    });

    test('UpdateTask: the same answer either way, while running, with outputs (gzipped from 16 KiB), and finished', async () => {
      const id = await claimTask();
      const running = updateTaskBody({
        state: { id, startedAt: timestampFromMs(1_700_000_000_000), steps: [{ id: 0n, logIndex: 0n, logLength: 0n }] },
      });
      const [plain, chunked] = await bothWays(s.url, UPDATE_TASK, runner, running);
      assertSameAnswer(plain, chunked, 'running');
      assert.equal(plain.status, 200, plain.body.toString('utf8'));
      assert.equal(plain.headers['content-type'], 'application/proto');
      const answer = fromBinary(UpdateTaskResponseSchema, plain.body);
      assert.equal(answer.state?.id, id);
      assert.equal(answer.state?.result, Result.UNSPECIFIED);

      // Enough output keys, long ones, that the answer (the keys taken) passes 16 KiB.
      const outputs = Object.fromEntries(
        Array.from({ length: 70 }, (_, i) => [
          `output_number_${String(i).padStart(3, '0')}_${'k'.repeat(230)}`,
          `value ${i}`,
        ]),
      );
      const withOutputs = updateTaskBody({ state: { id }, outputs });
      for (const acceptGzip of [true, false]) {
        const headers: Record<string, string> = acceptGzip ? { 'accept-encoding': 'gzip' } : {};
        const [a, b] = await bothWays(s.url, UPDATE_TASK, runner, withOutputs, headers);
        assertSameAnswer(a, b, `outputs, gzip ${acceptGzip}`);
        assert.equal(a.headers['content-encoding'], acceptGzip ? 'gzip' : undefined);
        assert.ok(a.body.length >= 16 * 1024, 'the answer is large enough to be compressed');
        assert.deepEqual(fromBinary(UpdateTaskResponseSchema, a.body).sentOutputs.sort(), Object.keys(outputs).sort());
        if (acceptGzip) assert.deepEqual(a.raw, b.raw, 'the same gzip bytes');
      }

      const finished = updateTaskBody({
        state: {
          id,
          result: Result.SUCCESS,
          startedAt: timestampFromMs(1_700_000_000_000),
          stoppedAt: timestampFromMs(1_700_000_005_000),
          steps: [
            { id: 0n, result: Result.SUCCESS, logIndex: 0n, logLength: 2n },
            { id: 1n, result: Result.SUCCESS, logIndex: 2n, logLength: 2n },
          ],
        },
      });
      const [done, doneAgain] = await bothWays(s.url, UPDATE_TASK, runner, finished);
      assertSameAnswer(done, doneAgain, 'finished');
      assert.equal(fromBinary(UpdateTaskResponseSchema, done.body).state?.result, Result.SUCCESS);
    });

    test('UpdateLog: the same acknowledgement either way', async () => {
      const id = await claimTask();
      const first = updateLogBody({ taskId: id, index: 0n, rows: rows(0, 3) });
      const [a, b] = await bothWays(s.url, UPDATE_LOG, runner, first);
      assertSameAnswer(a, b, 'first rows');
      assert.equal(fromBinary(UpdateLogResponseSchema, a.body).ackIndex, 3n);
      // The other way round: the chunked call stores, the plain one finds them stored.
      const second = updateLogBody({ taskId: id, index: 3n, rows: rows(3, 2), noMore: true });
      const chunked = await rawRunnerCall(s.url, UPDATE_LOG, runner, second, { chunked: true });
      const plain = await rawRunnerCall(s.url, UPDATE_LOG, runner, second);
      assertSameAnswer(plain, chunked, 'last rows');
      assert.equal(fromBinary(UpdateLogResponseSchema, plain.body).ackIndex, 5n);
    });

    test('Connect errors are the same either way: an undecodable body, a task that is not the runner’s, bad credentials', async () => {
      const junk = new Uint8Array([0x0a, 0xff, 0xff, 0xff]);
      for (const route of [UPDATE_TASK, UPDATE_LOG]) {
        const [plain, chunked] = await bothWays(s.url, route, runner, junk);
        assert.equal(plain.status, 400, plain.body.toString('utf8'));
        assertSameAnswer(plain, chunked, `junk to ${route}`);
        assert.equal((JSON.parse(plain.body.toString('utf8')) as { code: string }).code, 'invalid_argument');
      }
      const stranger = updateTaskBody({ state: { id: 987_654n, result: Result.SUCCESS } });
      const [plain, chunked] = await bothWays(s.url, UPDATE_TASK, runner, stranger);
      assert.notEqual(plain.status, 200);
      assertSameAnswer(plain, chunked, 'a task of no one');
      const strangerLog = updateLogBody({ taskId: 987_654n, index: 0n, rows: rows(0, 1) });
      const [logPlain, logChunked] = await bothWays(s.url, UPDATE_LOG, runner, strangerLog);
      assert.notEqual(logPlain.status, 200);
      assertSameAnswer(logPlain, logChunked, 'a log of no one');
      const impostor = { ...runner, token: 'not-the-token' };
      const [badPlain, badChunked] = await bothWays(s.url, UPDATE_TASK, impostor, stranger);
      assert.equal(badPlain.status, 401);
      assertSameAnswer(badPlain, badChunked, 'bad credentials');
    });

    test('each call is counted under its route in /metrics and writes one request line with its request id', async () => {
      const count = async (route: string): Promise<number> => {
        const res = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
        const text = await res.text();
        const label = `method="POST",route="${route}",status="200"`;
        const line = text.split('\n').find((l) => l.startsWith(`gantry_http_requests_total{${label}}`));
        return line === undefined ? 0 : Number(line.split(' ').at(-1));
      };
      const id = await claimTask();
      const beforeTask = await count(UPDATE_TASK);
      const beforeLog = await count(UPDATE_LOG);
      const report = updateTaskBody({ state: { id } });
      const logs = updateLogBody({ taskId: id, index: 0n, rows: rows(0, 1) });
      const answers: RawAnswer[] = [];
      for (const chunked of [false, true]) {
        const tag = chunked ? 'chunked' : 'plain';
        answers.push(
          await rawRunnerCall(s.url, UPDATE_TASK, runner, report, {
            chunked,
            headers: { 'x-request-id': `report-${tag}` },
          }),
          await rawRunnerCall(s.url, UPDATE_LOG, runner, logs, { chunked, headers: { 'x-request-id': `log-${tag}` } }),
        );
      }
      for (const answer of answers) assert.equal(answer.status, 200, answer.body.toString('utf8'));
      assert.deepEqual(
        answers.map((a) => a.headers['x-request-id']),
        ['report-plain', 'log-plain', 'report-chunked', 'log-chunked'],
      );
      assert.equal((await count(UPDATE_TASK)) - beforeTask, 2);
      assert.equal((await count(UPDATE_LOG)) - beforeLog, 2);

      type Line = { level: number; msg: string; reqId?: string; req?: Record<string, unknown>; res?: unknown };
      const lines = readFileSync(logFile, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Line & { responseTime?: number; time?: number });
      const lineOf = (reqId: string): Line & { responseTime?: number } => {
        const mine = lines.filter((l) => l.reqId === reqId);
        assert.equal(mine.length, 1, `one line for ${reqId}: ${JSON.stringify(mine)}`);
        return mine[0] as Line;
      };
      for (const name of ['report', 'log']) {
        const plain = lineOf(`${name}-plain`);
        const chunked = lineOf(`${name}-chunked`);
        assert.equal(typeof plain.responseTime, 'number');
        const shape = (line: Line & { responseTime?: number }): unknown => ({
          ...line,
          reqId: undefined,
          time: undefined,
          responseTime: undefined,
          req: { ...line.req, remotePort: undefined },
        });
        assert.deepEqual(shape(plain), shape(chunked));
        assert.equal(plain.msg, 'request completed');
      }
    });
  });
}
