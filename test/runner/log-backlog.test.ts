// A runner back from an outage sends its whole log backlog in one UpdateLog
// (forgejo-runner's reporter never splits it). Against a real `gantry web`
// process: a 200 MB backlog is stored line for line and acknowledged, while
// the server's peak resident memory (VmHWM in /proc/<pid>/status, reset just
// before the upload) grows by at most 64 MB. Before, anything over 32 MiB
// was resource_exhausted, forever.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import pino from 'pino';
import { readProcessMemory, resetPeakMemory } from '../../bench/lib/process-memory.ts';
import { loadConfig } from '../../src/config.ts';
import { createDeps } from '../../src/deps.ts';
import { LogRowSchema, UpdateLogResponseSchema } from '../../src/gen/runner/v1/messages_pb.ts';
import { freePort } from '../support/free-port.ts';
import { GantryChild } from '../support/gantry-child.ts';
import { createScratchPgDatabase } from '../support/pg-database.ts';
import { testDialects } from '../support/server.ts';
import { startChildWithTask } from '../support/child-task.ts';

const BACKLOG_BYTES = 200 * 1000 * 1000;
const LINE_WIDTH = 1000;
const MAX_PEAK_GROWTH = 64 * 1024 * 1024;

function varint(value: number): number[] {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  bytes.push(rest);
  return bytes;
}

function line(i: number): string {
  const head = `line ${i} `;
  return head + 'x'.repeat(LINE_WIDTH - head.length);
}

/** UpdateLogRequest{task_id, index 0, rows × count} as binary protobuf, made as it is sent (about 1 MB at a time). */
function* backlog(taskId: number, count: number): Generator<Buffer> {
  yield Buffer.from([0x08, ...varint(taskId)]);
  const time = { seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 };
  let pending: Buffer[] = [];
  let size = 0;
  for (let i = 0; i < count; i += 1) {
    const row = toBinary(LogRowSchema, create(LogRowSchema, { time, content: line(i) }));
    pending.push(Buffer.from([0x1a, ...varint(row.length)]), Buffer.from(row));
    size += row.length + 3;
    if (size >= 1024 * 1024) {
      yield Buffer.concat(pending);
      pending = [];
      size = 0;
    }
  }
  if (pending.length > 0) yield Buffer.concat(pending);
}

function post(url: string, headers: Record<string, string>, body: Readable): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    body.pipe(req);
  });
}

// Memory is not a property of the database: one dialect (the first listed) is enough, and keeps the suite fast.
const dialect = testDialects()[0] ?? 'sqlite';

describe(`a log backlog in one UpdateLog [${dialect}]`, () => {
  test(`${BACKLOG_BYTES / 1e6} MB in one UpdateLog: stored and acknowledged, server peak memory grows by at most ${MAX_PEAK_GROWTH / 1024 / 1024} MB`, async (t) => {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-backlog-'));
    const scratch =
      dialect === 'postgres' ? await createScratchPgDatabase(process.env.GANTRY_TEST_PG_URL as string) : null;
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const settings: Record<string, string> = {
      GANTRY_DATA_DIR: dataDir,
      GANTRY_HTTP_ADDR: '127.0.0.1',
      GANTRY_HTTP_PORT: String(port),
      GANTRY_ROOT_URL: `${url}/`,
      GANTRY_LOG_LEVEL: 'warn',
      // The whole backlog is kept (the default cuts a log at 128 MiB with a notice).
      GANTRY_ACTIONS_LOG_MAX_SIZE: String(512 * 1024 * 1024),
      ...(scratch ? { GANTRY_DATABASE_URL: scratch.url } : {}),
    };
    const env: NodeJS.ProcessEnv = { ...process.env, ...settings };
    if (!scratch) delete env.GANTRY_DATABASE_URL;
    const config = loadConfig(settings);
    const server = new GantryChild(url, env);
    try {
      const { runner, fetched } = await startChildWithTask(server, settings, {
        repo: 'logs',
        workflowFile: 'ci.yml',
        workflow: 'on: workflow_dispatch\njobs:\n  chatty:\n    runs-on: backlog\n    steps:\n      - run: yes\n',
        label: 'backlog',
      });
      assert.ok(fetched.task, 'a task');
      const taskId = Number(fetched.task.id);

      const count = Math.ceil(BACKLOG_BYTES / (LINE_WIDTH + 18));
      const pid = server.pid as number;
      const reset = await resetPeakMemory(pid);
      const before = await readProcessMemory(pid);
      const started = Date.now();
      const answer = await post(
        `${url}/api/actions/runner.v1.RunnerService/UpdateLog`,
        {
          'content-type': 'application/proto',
          'x-runner-uuid': runner.credentials?.uuid ?? '',
          'x-runner-token': runner.credentials?.token ?? '',
        },
        Readable.from(backlog(taskId, count)),
      );
      const seconds = (Date.now() - started) / 1000;
      const after = await readProcessMemory(pid);
      assert.equal(answer.status, 200, answer.body.toString('utf8'));
      assert.equal(Number(fromBinary(UpdateLogResponseSchema, answer.body).ackIndex), count, 'every row acknowledged');

      // The peak since the reset, against the resident memory at the reset (without a reset: against the older peak).
      const growth = after.peakRss - (reset ? before.rss : before.peakRss);
      const mb = (bytes: number): string => (bytes / 1024 / 1024).toFixed(1);
      const figure = `${count} rows (${(BACKLOG_BYTES / 1e6).toFixed(0)} MB) in ${seconds.toFixed(1)} s; RSS ${mb(before.rss)} MiB before, peak ${mb(after.peakRss)} MiB, growth ${mb(growth)} MiB${reset ? '' : ' (VmHWM could not be reset)'}`;
      t.diagnostic(figure);
      console.log(`[log-backlog ${dialect}] ${figure}`);
      assert.ok(growth <= MAX_PEAK_GROWTH, `peak RSS grew by ${mb(growth)} MiB`);
      await server.stop();

      // What was stored: every line, in order (the first and last read back), the committed size is the file's.
      const check = await createDeps(config, { logger: pino({ level: 'silent' }), migrate: false });
      try {
        const row = await check.database.db
          .selectFrom('action_task')
          .select(['log_length', 'log_size', 'log_filename'])
          .where('id', '=', taskId)
          .executeTakeFirstOrThrow();
        assert.equal(Number(row.log_length), count);
        const file = check.services.taskReports.logs.resolve(row.log_filename);
        assert.ok((await fs.stat(file)).size >= Number(row.log_size));
        assert.ok(Number(row.log_size) > BACKLOG_BYTES);
        const first: string[] = [];
        for await (const stored of check.services.taskReports.readLog(taskId, { limit: 1 })) first.push(stored);
        assert.equal(first[0]?.slice(first[0].indexOf(' ') + 1), line(0));
        const handle = await fs.open(file, 'r');
        try {
          const tail = Buffer.alloc(LINE_WIDTH + 100);
          const { bytesRead } = await handle.read(tail, 0, tail.length, Number(row.log_size) - tail.length);
          const lastLine = tail.subarray(0, bytesRead).toString('utf8').trimEnd().split('\n').at(-1) ?? '';
          assert.equal(lastLine.slice(lastLine.indexOf(' ') + 1), line(count - 1));
        } finally {
          await handle.close();
        }
      } finally {
        await check.close();
      }
    } catch (error) {
      console.log(`[log-backlog ${dialect}] server output (tail):\n${server.tail()}`);
      throw error;
    } finally {
      await server.kill9();
      await scratch?.drop();
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });
});
