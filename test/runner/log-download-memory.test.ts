// Downloading a big job log must not swell the server (issue 14: peak RSS
// growth of a 100 MB download ≤ 32 MB; `npm run bench` measures that one).
// Against a real `gantry web` process: a runner streams a 48 MB log, and the
// running job's log is downloaded whole while the server's peak resident
// memory (VmHWM, reset just before) is watched; then the runner's last report
// archives it (gzip) and a fresh server serves the archived log, watched the
// same way. Both are served through buffers reused for the whole download, so
// the growth stays within a few MB; before, every 64 KiB read (plain) or
// inflated chunk (archived) was a fresh buffer, and the download grew the
// server by about 30 MB until V8 collected them.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { create } from '@bufbuild/protobuf';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { readProcessMemory, resetPeakMemory } from '../../bench/lib/process-memory.ts';
import { LogRowSchema } from '../../src/gen/runner/v1/messages_pb.ts';
import { freePort } from '../support/free-port.ts';
import { GantryChild } from '../support/gantry-child.ts';
import { createScratchPgDatabase } from '../support/pg-database.ts';
import { testDialects } from '../support/server.ts';
import { startChildWithTask } from '../support/child-task.ts';

const LOG_BYTES = 48 * 1000 * 1000;
const LINE_WIDTH = 1000;
const ROWS_PER_UPDATE = 4000;
const MAX_PEAK_GROWTH = 8 * 1024 * 1024;

function line(i: number): string {
  const head = `line ${i} `;
  return head + 'x'.repeat(LINE_WIDTH - head.length);
}

// Memory is not a property of the database: one dialect (the first listed) is enough, and keeps the suite fast.
const dialect = testDialects()[0] ?? 'sqlite';

describe(`downloading a big job log [${dialect}]`, () => {
  test(`a ${LOG_BYTES / 1e6} MB job log downloads whole, byte-exact, running (plain) and finished (archived), while the server's peak memory grows by at most ${MAX_PEAK_GROWTH / 1024 / 1024} MB`, async (t) => {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-log-download-'));
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
      ...(scratch ? { GANTRY_DATABASE_URL: scratch.url } : {}),
    };
    const env: NodeJS.ProcessEnv = { ...process.env, ...settings };
    if (!scratch) delete env.GANTRY_DATABASE_URL;
    const server = new GantryChild(url, env);
    let archivedServer: GantryChild | null = null;
    try {
      const { token, api, runner, fetched } = await startChildWithTask(server, settings, {
        repo: 'logs',
        workflowFile: 'ci.yml',
        workflow: 'on: workflow_dispatch\njobs:\n  chatty:\n    runs-on: big-log\n    steps:\n      - run: yes\n',
        label: 'big-log',
      });
      assert.ok(fetched.task, 'a task');
      const taskId = fetched.task.id;
      const time = timestampFromMs(Date.UTC(2026, 0, 2, 3, 4, 5));
      const count = Math.ceil(LOG_BYTES / (LINE_WIDTH + 30));
      for (let index = 0; index < count; index += ROWS_PER_UPDATE) {
        const rows = Array.from({ length: Math.min(ROWS_PER_UPDATE, count - index) }, (_, k) =>
          create(LogRowSchema, { time, content: line(index + k) }),
        );
        const ack = await runner.runner.updateLog({ taskId, index: BigInt(index), rows });
        assert.equal(Number(ack.ackIndex), index + rows.length);
      }
      const jobs = (await api('GET', '/repos/root/logs/actions/runs/1/jobs')) as Array<{ id: number }>;
      const logUrl = `${url}/api/v1/repos/root/logs/actions/jobs/${jobs[0]?.id}/logs`;
      const stamp = '2026-01-02T03:04:05.0000000Z';

      /** Downloads the whole log from `from`, checks its bytes and returns the peak RSS growth meanwhile. */
      const measure = async (from: GantryChild, what: string): Promise<number> => {
        const headers = { authorization: `token ${token}` };
        // A first small request, so first-request costs (route compilation, pools) are not in the figure.
        const warm = await fetch(logUrl, { headers: { ...headers, range: 'bytes=0-1023' } });
        assert.equal(warm.status, 206);
        await warm.arrayBuffer();

        const pid = from.pid as number;
        const reset = await resetPeakMemory(pid);
        const before = await readProcessMemory(pid);
        const started = Date.now();
        const res = await fetch(logUrl, { headers });
        assert.equal(res.status, 200);
        const expectedSize = Number(res.headers.get('content-length'));
        let received = 0;
        let head: Buffer = Buffer.alloc(0);
        let tail: Buffer = Buffer.alloc(0);
        for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
          if (head.length < 2 * LINE_WIDTH) head = Buffer.concat([head, chunk]).subarray(0, 2 * LINE_WIDTH);
          tail = Buffer.concat([tail, chunk]).subarray(-2 * LINE_WIDTH);
          received += chunk.byteLength;
        }
        const seconds = (Date.now() - started) / 1000;
        const after = await readProcessMemory(pid);

        assert.equal(received, expectedSize, `${what}: the whole log, as Content-Length announced`);
        assert.equal(expectedSize, count * (LINE_WIDTH + 30), `${what}: every line: time, space, content, newline`);
        assert.ok(head.toString('utf8').startsWith(`${stamp} ${line(0)}\n`), `${what}: the first line`);
        assert.ok(tail.toString('utf8').endsWith(`${stamp} ${line(count - 1)}\n`), `${what}: the last line`);

        // The peak since the reset, against the resident memory at the reset (without a reset: against the older peak).
        const growth = after.peakRss - (reset ? before.rss : before.peakRss);
        const mb = (bytes: number): string => (bytes / 1024 / 1024).toFixed(1);
        const figure = `${what}: ${mb(received)} MiB in ${seconds.toFixed(1)} s; RSS ${mb(before.rss)} MiB before, peak ${mb(after.peakRss)} MiB, growth ${mb(growth)} MiB${reset ? '' : ' (VmHWM could not be reset)'}`;
        t.diagnostic(figure);
        console.log(`[log-download ${dialect}] ${figure}`);
        return growth;
      };

      const runningGrowth = await measure(server, 'running (plain) log');
      assert.ok(runningGrowth <= MAX_PEAK_GROWTH, `running log: peak RSS grew by ${runningGrowth} bytes`);

      // The job's last report: the log is archived (gzip), as every finished job's is.
      await runner.runner.updateLog({ taskId, index: BigInt(count), rows: [], noMore: true });
      const stored = await fs.readdir(dataDir, { recursive: true });
      assert.ok(
        stored.some((name) => name.endsWith(`${taskId}.log.gz`)),
        'the log is archived (the plain file gives way to a .log.gz)',
      );
      // A fresh process, so the first download's heap neither flatters nor burdens the second.
      assert.equal(await server.stop(), 0, 'gantry web stops cleanly');
      archivedServer = new GantryChild(url, env);
      await archivedServer.start();
      const archivedGrowth = await measure(archivedServer, 'archived (gzip) log');
      assert.ok(archivedGrowth <= MAX_PEAK_GROWTH, `archived log: peak RSS grew by ${archivedGrowth} bytes`);
    } finally {
      await server.kill9();
      await archivedServer?.kill9();
      await scratch?.drop();
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });
});
