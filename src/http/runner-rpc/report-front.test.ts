// Which calls the report front path serves itself and which it hands on to
// Fastify (test/runner/report-wire.test.ts checks that both answer alike).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { create, toBinary } from '@bufbuild/protobuf';
import type { FastifyBaseLogger } from 'fastify';
import pino from 'pino';
import { UpdateTaskRequestSchema } from '../../gen/runner/v1/messages_pb.ts';
import type { Runner } from '../../models/runners.ts';
import type { RunnerProtocolService } from '../../services/actions/runner-protocol.ts';
import type { TaskReportService } from '../../services/actions/task-reports.ts';
import { reportFront, UPDATE_LOG_PATH, UPDATE_TASK_PATH } from './report-front.ts';

const RUNNER = { id: 1, uuid: 'runner-uuid' } as Runner;
const TOKEN = 'runner-token';

describe('report front path', () => {
  let server: http.Server;
  let url: string;
  let passAll = false;
  const handedOn: string[] = [];
  const reported: number[] = [];

  before(async () => {
    const protocol = {
      authenticate: async (uuid: string, token: string, active: boolean) =>
        uuid === RUNNER.uuid && token === TOKEN && active ? RUNNER : null,
    } as unknown as RunnerProtocolService;
    const reports = {
      updateTask: async (_runner: Runner, state: { id: number }) => {
        reported.push(state.id);
        return { result: 0, sentOutputs: [] };
      },
      updateLog: async () => ({ ackIndex: 0 }),
    } as unknown as TaskReportService;
    const listener = reportFront(
      {
        protocol,
        reports,
        updateTaskMaxBytes: 1024,
        updateLogMaxBytes: 1024,
        transferIdleTimeoutMs: 10_000,
        transferTimeoutMs: 0,
        logger: pino({ level: 'silent' }) as unknown as FastifyBaseLogger,
        isLevelEnabled: () => false,
        observe: null,
        passAll: () => passAll,
      },
      (req, res) => {
        handedOn.push(req.url ?? '');
        res.writeHead(299).end();
      },
    );
    server = http.createServer(listener);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  async function post(path: string, headers: Record<string, string>, body: Uint8Array): Promise<number> {
    const res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/proto',
        'x-runner-uuid': RUNNER.uuid,
        'x-runner-token': TOKEN,
        ...headers,
      },
      body,
    });
    await res.arrayBuffer();
    return res.status;
  }

  const report = toBinary(UpdateTaskRequestSchema, create(UpdateTaskRequestSchema, { state: { id: 7n } }));

  test('serves UpdateTask and UpdateLog as connect-go sends them, without handing them on', async () => {
    handedOn.length = 0;
    assert.equal(await post(UPDATE_TASK_PATH, { 'connect-protocol-version': '1' }, report), 200);
    assert.equal(await post(UPDATE_LOG_PATH, {}, new Uint8Array(0)), 200);
    assert.deepEqual(handedOn, []);
    assert.deepEqual(reported, [7]);
  });

  test('hands on every other shape, unknown credentials, oversized bodies, and everything while passAll', async () => {
    handedOn.length = 0;
    const cases: [string, Record<string, string>, Uint8Array][] = [
      [UPDATE_TASK_PATH, { 'content-type': 'application/json' }, new TextEncoder().encode('{}')],
      [UPDATE_TASK_PATH, { 'content-encoding': 'gzip' }, report],
      [UPDATE_TASK_PATH, { 'connect-protocol-version': '2' }, report],
      [UPDATE_TASK_PATH, { 'connect-timeout-ms': '1000' }, report],
      [UPDATE_TASK_PATH, { 'x-runner-token': 'wrong' }, report],
      [UPDATE_TASK_PATH, {}, new Uint8Array(2048)],
      [UPDATE_LOG_PATH, {}, new Uint8Array(2048)],
      ['/api/actions/runner.v1.RunnerService/Declare', {}, new Uint8Array(0)],
    ];
    for (const [path, headers, body] of cases) assert.equal(await post(path, headers, body), 299, path);
    passAll = true;
    assert.equal(await post(UPDATE_TASK_PATH, {}, report), 299);
    passAll = false;
    assert.equal(handedOn.length, cases.length + 1);
  });
});
