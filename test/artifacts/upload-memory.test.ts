// Uploading a big artifact must not swell the server (issue 15: peak RSS
// growth of a 1 GiB upload ≤ 32 MB; `npm run bench` measures that one).
// Against a real `gantry web` process: a running task's runtime token uploads
// a 128 MiB artifact over the v4 protocol as @actions/artifact does (8 MiB
// blocks, four at a time, the block list, FinalizeArtifact with the SHA-256),
// while the server's peak resident memory (VmHWM, reset just before) is
// watched. Every read of a request body is a fresh buffer from Node's HTTP
// parser; they are collected every few MiB (modules/young-garbage.ts), so the
// growth stays far below the 32 MB that V8 otherwise lets such buffers pile
// up to before it collects them.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { readProcessMemory, resetPeakMemory } from '../../bench/lib/process-memory.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { freePort } from '../support/free-port.ts';
import { GantryChild } from '../support/gantry-child.ts';
import { createScratchPgDatabase } from '../support/pg-database.ts';
import { decodeTask } from '../support/runner-client.ts';
import { testDialects } from '../support/server.ts';
import { startChildWithTask } from '../support/child-task.ts';

const MIB = 1024 * 1024;
const ARTIFACT_BYTES = 128 * MIB;
const BLOCK_BYTES = 8 * MIB;
const CONCURRENCY = 4;
const MAX_PEAK_GROWTH = 20 * MIB;
const TWIRP = '/twirp/github.actions.results.api.v1.ArtifactService';

// Memory is not a property of the database: one dialect (the first listed) is enough, and keeps the suite fast.
const dialect = testDialects()[0] ?? 'sqlite';

describe(`uploading a big artifact [${dialect}]`, () => {
  test(`a ${ARTIFACT_BYTES / MIB} MiB artifact uploads whole while the server's peak memory grows by at most ${MAX_PEAK_GROWTH / MIB} MiB`, async (t) => {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-upload-memory-'));
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
      GANTRY_ARTIFACT_MAX_SIZE: String(2 * ARTIFACT_BYTES),
      GANTRY_ARTIFACT_MAX_RUN_SIZE: String(2 * ARTIFACT_BYTES),
      ...(scratch ? { GANTRY_DATABASE_URL: scratch.url } : {}),
    };
    const env: NodeJS.ProcessEnv = { ...process.env, ...settings };
    if (!scratch) delete env.GANTRY_DATABASE_URL;
    const server = new GantryChild(url, env);
    try {
      const { fetched } = await startChildWithTask(server, settings, {
        repo: 'app',
        workflowFile: 'build.yml',
        workflow: 'on: workflow_dispatch\njobs:\n  build:\n    runs-on: uploads\n    steps:\n      - run: make\n',
        label: 'uploads',
      });
      assert.ok(fetched.task, 'a task');
      const task = decodeTask(fetched.task as Task);
      const runtimeToken = String(task.context.gitea_runtime_token);
      const runId = String(task.context.run_id);
      const twirp = async (method: string, body: Record<string, unknown>): Promise<Record<string, unknown>> => {
        const res = await fetch(`${url}${TWIRP}/${method}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${runtimeToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({ workflowRunBackendId: runId, workflowJobRunBackendId: '0', ...body }),
        });
        const text = await res.text();
        assert.equal(res.status, 200, `${method}: ${text}`);
        return JSON.parse(text) as Record<string, unknown>;
      };
      // A first small call, so first-request costs (route compilation, pools) are not in the figure.
      await twirp('ListArtifacts', {});

      const base = randomBytes(BLOCK_BYTES);
      const count = ARTIFACT_BYTES / BLOCK_BYTES;
      const block = (i: number): Buffer => {
        const bytes = Buffer.from(base);
        bytes.writeUInt32BE(i, 0);
        return bytes;
      };
      const hash = createHash('sha256');
      for (let i = 0; i < count; i += 1) hash.update(block(i));
      const ids = Array.from({ length: count }, (_, i) => Buffer.from(`block-${i}`).toString('base64'));

      const pid = server.pid as number;
      const reset = await resetPeakMemory(pid);
      const before = await readProcessMemory(pid);
      const started = Date.now();
      const signed = String((await twirp('CreateArtifact', { name: 'big', version: 4 })).signedUploadUrl);
      let next = 0;
      const worker = async (): Promise<void> => {
        for (let i = next++; i < count; i = next++) {
          const res = await fetch(`${signed}&comp=block&blockid=${encodeURIComponent(ids[i] ?? '')}`, {
            method: 'PUT',
            body: block(i),
          });
          assert.equal(res.status, 201, `block ${i}: ${await res.text()}`);
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      const list = `<?xml version="1.0" encoding="utf-8"?><BlockList>${ids.map((id) => `<Latest>${id}</Latest>`).join('')}</BlockList>`;
      const committed = await fetch(`${signed}&comp=blocklist`, { method: 'PUT', body: list });
      assert.equal(committed.status, 201, await committed.text());
      const seconds = (Date.now() - started) / 1000;
      const after = await readProcessMemory(pid);
      // The server's hash of what it stored is the client's: every byte arrived, in order.
      const finalized = await twirp('FinalizeArtifact', {
        name: 'big',
        size: String(ARTIFACT_BYTES),
        hash: `sha256:${hash.digest('hex')}`,
      });
      assert.equal(finalized.ok, true);

      const growth = after.peakRss - (reset ? before.rss : before.peakRss);
      const mb = (bytes: number): string => (bytes / MIB).toFixed(1);
      const figure = `${ARTIFACT_BYTES / MIB} MiB in ${seconds.toFixed(1)} s; RSS ${mb(before.rss)} MiB before, peak ${mb(after.peakRss)} MiB, growth ${mb(growth)} MiB${reset ? '' : ' (VmHWM could not be reset)'}`;
      t.diagnostic(figure);
      console.log(`[upload-memory ${dialect}] ${figure}`);
      assert.ok(growth <= MAX_PEAK_GROWTH, `peak RSS grew by ${mb(growth)} MiB`);
    } finally {
      await server.kill9();
      await scratch?.drop();
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });
});
