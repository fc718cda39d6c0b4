// The runner protocol's transport, as a runner (or an attacker) on the wire
// sees it: credentials checked before a byte of the body is read, each
// method's body capped after decompression (gzip bombs stop early), gzip as
// the only compression in either direction (as a connect-go server), and
// UpdateLog bodies streamed into the log in batches — with the size limit
// storing and acknowledging what fit instead of refusing the backlog forever.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { createCurrentUserRepo, dispatchWorkflow } from '@llamaduck/forgejo-ts';
import { PingRequestSchema } from '../../src/gen/ping/v1/messages_pb.ts';
import {
  FetchTaskRequestSchema,
  FetchTaskResponseSchema,
  RegisterRequestSchema,
  UpdateLogRequestSchema,
  UpdateLogResponseSchema,
} from '../../src/gen/runner/v1/messages_pb.ts';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { findRepository } from '../../src/models/repos.ts';
import { registerRunner } from '../support/runner-client.ts';
import type { RunnerClient } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';

const LOG_REQUEST_LIMIT = 4 * 1024 * 1024;
const LEGS = 8;

const WORKFLOW = `on: workflow_dispatch
jobs:
  logs:
    runs-on: transport
    strategy:
      matrix:
        n: [${Array.from({ length: LEGS }, (_, i) => i).join(', ')}]
    steps:
      - run: echo \${{ matrix.n }}
`;

interface RawAnswer {
  status: number;
  headers: Headers;
  body: Buffer;
}

function connectError(answer: RawAnswer): { code: string; message: string } {
  return JSON.parse(answer.body.toString('utf8')) as { code: string; message: string };
}

type RowInit = MessageInitShape<typeof UpdateLogRequestSchema>['rows'];

function rows(from: number, count: number, width = 90): NonNullable<RowInit> {
  const time = { seconds: 1_700_000_000n, nanos: 0 };
  return Array.from({ length: count }, (_, k) => ({ time, content: `row ${from + k} ${'.'.repeat(width)}` }));
}

for (const dialect of testDialects()) {
  describe(`runner transport [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let registrationToken: string;
    let runner: RunnerClient;
    const taskIds: number[] = [];

    const rpc = async (method: string, body: Uint8Array, headers: Record<string, string> = {}): Promise<RawAnswer> => {
      const res = await fetch(`${s.url}/api/actions/${method}`, {
        method: 'POST',
        headers: { 'content-type': 'application/proto', ...headers },
        body,
      });
      return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
    };
    const asRunner = (): Record<string, string> => ({
      'x-runner-uuid': runner.credentials?.uuid ?? '',
      'x-runner-token': runner.credentials?.token ?? '',
    });
    const nextTask = (): number => {
      const id = taskIds.shift();
      assert.ok(id !== undefined, 'a task left');
      return id;
    };
    const storedLines = async (taskId: number): Promise<string[]> => {
      const lines: string[] = [];
      for await (const line of s.server.deps.services.taskReports.readLog(taskId))
        lines.push(line.slice(line.indexOf(' ') + 1));
      return lines;
    };
    const updateLog = async (
      message: MessageInitShape<typeof UpdateLogRequestSchema>,
      headers: Record<string, string> = {},
      gzip = false,
    ): Promise<RawAnswer> => {
      const bytes = toBinary(UpdateLogRequestSchema, create(UpdateLogRequestSchema, message));
      return rpc('runner.v1.RunnerService/UpdateLog', gzip ? gzipSync(bytes) : bytes, {
        ...asRunner(),
        ...(gzip ? { 'content-encoding': 'gzip' } : {}),
        ...headers,
      });
    };
    const ackOf = (answer: RawAnswer): number => {
      assert.equal(answer.status, 200, answer.body.toString('utf8'));
      return Number(fromBinary(UpdateLogResponseSchema, answer.body).ackIndex);
    };

    before(async () => {
      s = await startTestServer(dialect, { GANTRY_ACTIONS_LOG_MAX_REQUEST_SIZE: String(LOG_REQUEST_LIMIT) });
      alice = await s.createUser('alice');
      assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name: 'wire' } })).status, 201);
      const work = await createWorkDir(remoteUrl(s.url, 'alice', 'wire', { user: 'alice', password: alice.token }));
      try {
        await work.commit({ '.forgejo/workflows/logs.yml': WORKFLOW }, 'logs');
        assert.equal((await work.push('main')).code, 0);
      } finally {
        await work.remove();
      }
      const repo = await findRepository(s.server.deps.database.db, alice.user.id, 'wire');
      assert.ok(repo);
      registrationToken = await s.server.deps.services.runners.registrationToken({ ownerId: 0, repoId: repo.id });
      runner = await registerRunner(s.url, registrationToken, { labels: ['transport'] });
      const dispatched = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'wire', workflowfilename: 'logs.yml' },
        body: { ref: 'main', inputs: {} },
      });
      assert.equal(dispatched.status, 204, JSON.stringify(dispatched.error));
      while (taskIds.length < LEGS - 1) {
        const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
        assert.ok(fetched.task, 'a task');
        taskIds.push(Number(fetched.task.id));
      }
    });

    after(() => s.stop());

    test('unknown runner credentials get 401 "unregistered runner" while the body is still being sent: it is never read', async () => {
      const forged = { 'x-runner-uuid': runner.credentials?.uuid ?? '', 'x-runner-token': '0'.repeat(40) };
      for (const [method, headers] of [
        ['UpdateLog', forged],
        ['UpdateTask', { 'x-runner-uuid': '00000000-0000-4000-8000-000000000000', 'x-runner-token': 'x' }],
        ['FetchTask', {}],
      ] as const) {
        const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
          const req = http.request(`${s.url}/api/actions/runner.v1.RunnerService/${method}`, {
            method: 'POST',
            headers: {
              'content-type': 'application/proto',
              'content-encoding': 'gzip',
              'content-length': String(512 * 1024 * 1024),
              ...headers,
            },
          });
          const timer = setTimeout(() => {
            req.destroy();
            reject(new Error(`${method}: no answer while the body was incomplete: the server waited for it`));
          }, 5000);
          req.on('response', (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => (body += chunk));
            res.on('end', () => {
              clearTimeout(timer);
              req.destroy();
              resolve({ status: res.statusCode ?? 0, body });
            });
          });
          req.on('error', (error) => {
            clearTimeout(timer);
            reject(error);
          });
          // The first 16 KiB of a "512 MiB" body; the rest never comes.
          req.write(Buffer.alloc(16 * 1024));
        });
        assert.equal(answer.status, 401, `${method}: ${answer.body}`);
        assert.deepEqual(JSON.parse(answer.body), { code: 'unauthenticated', message: 'unregistered runner' });
      }
    });

    test('FetchTask as connect-go sends it and the same call in JSON get one answer; a body that is not a FetchTaskRequest is invalid_argument', async () => {
      // The runner of this file has the `transport` label; a fresh one with another label has nothing to claim.
      const idle = await registerRunner(s.url, registrationToken, { name: 'wire-idle', labels: ['nothing-here'] });
      const idleHeaders = {
        'x-runner-uuid': idle.credentials?.uuid ?? '',
        'x-runner-token': idle.credentials?.token ?? '',
        'connect-protocol-version': '1',
        'connect-timeout-ms': '1000',
      };
      const started = Date.now();
      const binary = await rpc('runner.v1.RunnerService/FetchTask', new Uint8Array(0), idleHeaders);
      assert.ok(Date.now() - started < 1000, 'answered within the deadline it was given');
      assert.equal(binary.status, 200, binary.body.toString('utf8'));
      assert.equal(binary.headers.get('content-type'), 'application/proto');
      const answer = fromBinary(FetchTaskResponseSchema, binary.body);
      assert.equal(answer.task, undefined);
      assert.ok(answer.tasksVersion > 0n);

      const json = await fetch(`${s.url}/api/actions/runner.v1.RunnerService/FetchTask`, {
        method: 'POST',
        headers: { ...idleHeaders, 'content-type': 'application/json' },
        body: '{}',
      });
      assert.equal(json.status, 200);
      assert.equal(json.headers.get('content-type'), 'application/json');
      assert.deepEqual(await json.json(), { tasksVersion: String(answer.tasksVersion) });

      // connect-es sends its body chunked, without a length: the same answer.
      const chunked = await new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
        const req = http.request(`${s.url}/api/actions/runner.v1.RunnerService/FetchTask`, {
          method: 'POST',
          headers: { ...idleHeaders, 'content-type': 'application/proto', 'transfer-encoding': 'chunked' },
        });
        req.on('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        });
        req.on('error', reject);
        req.end(Buffer.from(toBinary(FetchTaskRequestSchema, create(FetchTaskRequestSchema, { tasksVersion: 1n }))));
      });
      assert.equal(chunked.status, 200, chunked.body.toString('utf8'));
      assert.equal(fromBinary(FetchTaskResponseSchema, chunked.body).tasksVersion, answer.tasksVersion);

      const garbage = await rpc('runner.v1.RunnerService/FetchTask', new Uint8Array([0xff, 0xff, 0xff]), idleHeaders);
      assert.equal(garbage.status, 400);
      const error = connectError(garbage);
      assert.equal(error.code, 'invalid_argument');
      assert.match(error.message, /^cannot decode the request as runner\.v1\.FetchTaskRequest: /);
    });

    test('Ping and Register read at most 64 KiB after decompression: a gzip bomb is resource_exhausted and registers nothing', async () => {
      const register = toBinary(
        RegisterRequestSchema,
        create(RegisterRequestSchema, {
          name: 'bomb-runner',
          token: registrationToken,
          version: 'v'.repeat(8 * 1024 * 1024),
          labels: ['transport'],
        }),
      );
      const bomb = gzipSync(register, { level: 9 });
      assert.ok(bomb.length < 64 * 1024, `${bomb.length} bytes on the wire`);
      const refused = await rpc('runner.v1.RunnerService/Register', bomb, { 'content-encoding': 'gzip' });
      assert.equal(refused.status, 429, refused.body.toString('utf8'));
      assert.deepEqual(connectError(refused), {
        code: 'resource_exhausted',
        message: 'the request is larger than 65536 bytes',
      });
      const found = await s.server.deps.database.db
        .selectFrom('action_runner')
        .select('id')
        .where('name', '=', 'bomb-runner')
        .execute();
      assert.deepEqual(found, [], 'no runner registered');

      const ping = await rpc(
        'ping.v1.PingService/Ping',
        gzipSync(toBinary(PingRequestSchema, create(PingRequestSchema, { data: 'x'.repeat(4 * 1024 * 1024) }))),
        { 'content-encoding': 'gzip' },
      );
      assert.equal(ping.status, 429, ping.body.toString('utf8'));
      assert.equal(connectError(ping).code, 'resource_exhausted');
      // Uncompressed alike, whatever Content-Length promises.
      const plain = await rpc(
        'ping.v1.PingService/Ping',
        toBinary(PingRequestSchema, create(PingRequestSchema, { data: 'x'.repeat(100 * 1024) })),
      );
      assert.equal(plain.status, 429, plain.body.toString('utf8'));
      // Small requests still go through, compressed or not.
      const small = await rpc(
        'ping.v1.PingService/Ping',
        gzipSync(toBinary(PingRequestSchema, create(PingRequestSchema, { data: 'small' }))),
        { 'content-encoding': 'gzip' },
      );
      assert.equal(small.status, 200, small.body.toString('utf8'));
    });

    test('compression as a connect-go server: gzip or identity only, whatever Accept-Encoding lists; a br body is unimplemented', async () => {
      // An answer over 16 KiB, the size from which answers are compressed.
      const ping = toBinary(PingRequestSchema, create(PingRequestSchema, { data: 'y'.repeat(20_000) }));
      const expected = `Hello, ${'y'.repeat(20_000)}!`;
      for (const [accept, encoding] of [
        ['br', null],
        ['br, gzip', 'gzip'],
        ['gzip', 'gzip'],
        ['identity', null],
      ] as const) {
        const res = await rpc('ping.v1.PingService/Ping', ping, { 'accept-encoding': accept });
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('content-encoding'), encoding, `Accept-Encoding: ${accept}`);
      }
      // A task (a few KiB) for a runner that prefers br: plain, as every answer under 16 KiB.
      const dispatchAgain = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'wire', workflowfilename: 'logs.yml' },
        body: { ref: 'main', inputs: {} },
      });
      assert.equal(dispatchAgain.status, 204);
      const fetched = await rpc('runner.v1.RunnerService/FetchTask', new Uint8Array(0), {
        ...asRunner(),
        'accept-encoding': 'br, gzip',
      });
      assert.equal(fetched.status, 200, fetched.body.toString('utf8'));
      assert.equal(fetched.headers.get('content-encoding'), null);
      const task = fromBinary(FetchTaskResponseSchema, fetched.body).task;
      assert.ok(task && task.id > 0n, 'the answer carries a task');

      const br = await rpc('ping.v1.PingService/Ping', ping, { 'content-encoding': 'br' });
      assert.equal(br.status, 501);
      assert.deepEqual(connectError(br), {
        code: 'unimplemented',
        message: 'unknown compression "br": supported encodings are gzip',
      });
      const plain = await rpc('ping.v1.PingService/Ping', ping, { 'accept-encoding': 'br' });
      assert.equal(Buffer.from(plain.body).toString('utf8').includes(expected), true, 'an identity answer');
    });

    test('a gzip-compressed UpdateLog larger than one batch is stored line for line; no_more archives it', async () => {
      const taskId = nextTask();
      const count = 25_000; // about 2.7 MiB: several batches
      const answer = await updateLog(
        { taskId: BigInt(taskId), index: 0n, rows: rows(0, count), noMore: true },
        {},
        true,
      );
      assert.equal(ackOf(answer), count);
      const lines = await storedLines(taskId);
      assert.equal(lines.length, count);
      assert.equal(lines[0], `row 0 ${'.'.repeat(90)}`);
      assert.equal(lines[count - 1], `row ${count - 1} ${'.'.repeat(90)}`);
      const row = await s.server.deps.database.db
        .selectFrom('action_task')
        .select(['log_length', 'log_in_storage'])
        .where('id', '=', taskId)
        .executeTakeFirstOrThrow();
      assert.equal(Number(row.log_length), count);
      assert.equal(Number(row.log_in_storage), 1, 'archived');
      // A resend of lines already stored (the runner lost the answer) changes nothing.
      assert.equal(
        ackOf(await updateLog({ taskId: BigInt(taskId), index: 0n, rows: rows(0, 10), noMore: true })),
        count,
      );
    });

    test(`an UpdateLog over GANTRY_ACTIONS_LOG_MAX_REQUEST_SIZE: the rows that fit are stored and acknowledged, the runner sends the rest next`, async () => {
      const taskId = nextTask();
      const count = 45_000; // about 4.9 MiB, limit 4 MiB
      const first = ackOf(await updateLog({ taskId: BigInt(taskId), index: 0n, rows: rows(0, count), noMore: true }));
      assert.ok(first > 0 && first < count, `acknowledged ${first} of ${count}`);
      const row = await s.server.deps.database.db
        .selectFrom('action_task')
        .select(['log_in_storage'])
        .where('id', '=', taskId)
        .executeTakeFirstOrThrow();
      assert.equal(Number(row.log_in_storage), 0, 'not archived: no_more was never read');
      // What forgejo-runner's reporter does with the ack: resend from it.
      const rest = rows(first, count - first);
      assert.equal(
        ackOf(await updateLog({ taskId: BigInt(taskId), index: BigInt(first), rows: rest, noMore: true })),
        count,
      );
      const lines = await storedLines(taskId);
      assert.equal(lines.length, count);
      lines.forEach((line, i) => {
        if (line !== `row ${i} ${'.'.repeat(90)}`) assert.fail(`line ${i}: ${line}`);
      });
      // A single row larger than the limit cannot be stored in steps: refused.
      const huge = await updateLog({
        taskId: BigInt(nextTask()),
        index: 0n,
        rows: [{ content: 'z'.repeat(LOG_REQUEST_LIMIT + 1) }],
      });
      assert.equal(huge.status, 429, huge.body.toString('utf8'));
      assert.deepEqual(connectError(huge), {
        code: 'resource_exhausted',
        message: `the request is larger than ${LOG_REQUEST_LIMIT} bytes (GANTRY_ACTIONS_LOG_MAX_REQUEST_SIZE)`,
      });
    });

    test('UpdateLog bodies that are not what they claim are invalid_argument; a long line is cut at 64 KiB as before', async () => {
      const taskId = nextTask();
      const whole = toBinary(
        UpdateLogRequestSchema,
        create(UpdateLogRequestSchema, { taskId: BigInt(taskId), index: 0n, rows: rows(0, 3) }),
      );
      const truncated = await rpc('runner.v1.RunnerService/UpdateLog', whole.subarray(0, whole.length - 5), asRunner());
      assert.equal(truncated.status, 400, truncated.body.toString('utf8'));
      assert.equal(connectError(truncated).code, 'invalid_argument');
      const garbage = await rpc('runner.v1.RunnerService/UpdateLog', Buffer.from('not gzip at all'), {
        ...asRunner(),
        'content-encoding': 'gzip',
      });
      assert.equal(garbage.status, 400, garbage.body.toString('utf8'));
      assert.match(connectError(garbage).message, /^cannot decompress the request body \(gzip\)/);
      const badUtf8 = Buffer.concat([
        Buffer.from(toBinary(UpdateLogRequestSchema, create(UpdateLogRequestSchema, { taskId: BigInt(taskId) }))),
        Buffer.from([0x1a, 0x04, 0x12, 0x02, 0xc3, 0x28]),
      ]);
      const refused = await rpc('runner.v1.RunnerService/UpdateLog', badUtf8, asRunner());
      assert.equal(refused.status, 400, refused.body.toString('utf8'));
      assert.equal(ackOf(await updateLog({ taskId: BigInt(taskId), index: 0n, rows: [] })), 0, 'nothing stored');

      const long = `${'é'.repeat(40_000)}tail`;
      assert.equal(
        ackOf(
          await updateLog(
            { taskId: BigInt(taskId), index: 0n, rows: [{ content: long }, { content: 'next' }] },
            {},
            true,
          ),
        ),
        2,
      );
      const [first, second] = await storedLines(taskId);
      assert.equal(Buffer.byteLength(first ?? '', 'utf8'), 64 * 1024);
      assert.equal(first, 'é'.repeat(32 * 1024));
      assert.equal(second, 'next');
    });
  });
}
