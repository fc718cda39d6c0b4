// Uploading and downloading a 1 GiB artifact over the v4 protocol to and from
// a `gantry web` child process: throughput (MB/s) and how much the server's
// resident set grows meanwhile (target: peak growth ≤ 32 MB, i.e. bytes are
// streamed, never held). The client here speaks the protocol as
// @actions/artifact does (CreateArtifact, 8 MiB blocks four at a time, the
// block list, FinalizeArtifact with the SHA-256; GetSignedArtifactURL, then
// the signed download), with the runtime token a task of a seeded running job
// would get; it produces and counts bytes in this process, so its memory is
// not in the figure. Upload and download each run in a fresh server process.
// Peak growth is measured as in job-log-download.ts (the kernel's RSS
// high-water mark, reset just before). Upload growth is mostly the request
// body's chunks, each a fresh buffer from Node's HTTP parser: V8 collected
// them only once 32 MB had piled up (growth 33–34 MB); they are now collected
// every 4 MiB (modules/young-garbage.ts): growth about 10–13 MB.
// GANTRY_BENCH_ARTIFACT_MB changes the size (default 1024).
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { createDeps } from '../../src/deps.ts';
import { systemClock } from '../../src/modules/clock.ts';
import { RuntimeTokens } from '../../src/services/actions/runtime-tokens.ts';
import { freePort } from '../../test/support/free-port.ts';
import { GantryChild } from '../../test/support/gantry-child.ts';
import { readProcessMemory, resetPeakMemory } from '../lib/process-memory.ts';
import { insertRunningTask } from '../lib/running-task.ts';
import type { Metric, Scenario, ScenarioContext } from '../lib/scenario.ts';

const MB = 1024 * 1024;
const BLOCK_BYTES = 8 * MB;
const CONCURRENCY = 4;
const TARGET_GROWTH_MB = 32;
const TWIRP = '/twirp/github.actions.results.api.v1.ArtifactService';

export function artifactMegabytes(): number {
  const raw = process.env.GANTRY_BENCH_ARTIFACT_MB?.trim();
  if (!raw) return 1024;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`GANTRY_BENCH_ARTIFACT_MB must be a whole number ≥ 1, got "${raw}"`);
  return value;
}

export interface Seeded {
  url: string;
  env: NodeJS.ProcessEnv;
  runId: number;
  runtimeToken: string;
}

export async function seed(ctx: ScenarioContext, megabytes: number): Promise<Seeded> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-bench-artifacts-'));
  ctx.defer(() => fs.rm(dataDir, { recursive: true, force: true }));
  const databaseUrl = await ctx.databaseUrl();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const settings: Record<string, string> = {
    GANTRY_DATA_DIR: dataDir,
    GANTRY_HTTP_ADDR: '127.0.0.1',
    GANTRY_HTTP_PORT: String(port),
    GANTRY_ROOT_URL: `${url}/`,
    GANTRY_LOG_LEVEL: 'warn',
    GANTRY_ARTIFACT_MAX_SIZE: String((megabytes + 16) * MB),
    GANTRY_ARTIFACT_MAX_RUN_SIZE: String((megabytes + 16) * MB),
    ...(databaseUrl ? { GANTRY_DATABASE_URL: databaseUrl } : {}),
  };
  const deps = await createDeps(loadConfig(settings), { logger: pino({ level: 'silent' }) });
  try {
    const { services } = deps;
    const db = deps.database.db;
    const owner = await services.accounts.createUser({
      username: 'artifact-owner',
      email: 'artifact-owner@bench.invalid',
      password: 'bench-password',
      mustChangePassword: false,
    });
    const repo = await services.repos.create(owner, owner, { name: 'artifacts' });
    const now = Math.floor(Date.now() / 1000);
    const { job, taskId } = await insertRunningTask(
      db,
      { repoId: repo.id, ownerId: owner.id, title: 'big artifact', workflowId: 'build.yml', commitSha: 'c'.repeat(40) },
      now,
    );
    // The token the task's context would carry, signed with the data folder's key the server reads too.
    const runtimeToken = new RuntimeTokens(db, systemClock, services.keys).issue({
      taskId,
      runId: job.runId,
      jobId: job.id,
    });
    const env: NodeJS.ProcessEnv = { ...process.env, ...settings };
    if (!databaseUrl) delete env.GANTRY_DATABASE_URL;
    return { url, env, runId: job.runId, runtimeToken };
  } finally {
    await deps.close();
  }
}

async function twirp(seeded: Seeded, method: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const response = await fetch(`${seeded.url}${TWIRP}/${method}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${seeded.runtimeToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ workflowRunBackendId: String(seeded.runId), workflowJobRunBackendId: '0', ...body }),
  });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${method} answered ${response.status}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** The artifact's bytes: one random 8 MiB block repeated with its index written in, so blocks differ. */
function blockBytes(base: Buffer, index: number, size: number): Buffer {
  const block = Buffer.from(base.subarray(0, size));
  block.writeUInt32BE(index, 0);
  return block;
}

async function upload(seeded: Seeded, megabytes: number): Promise<{ bytes: number; digest: string }> {
  const signedUploadUrl = String(
    (await twirp(seeded, 'CreateArtifact', { name: 'bench', version: 4 })).signedUploadUrl,
  );
  const total = megabytes * MB;
  const base = randomBytes(BLOCK_BYTES);
  const count = Math.ceil(total / BLOCK_BYTES);
  const ids = Array.from({ length: count }, (_, i) =>
    Buffer.from(`block-${String(i).padStart(6, '0')}`).toString('base64'),
  );
  const hash = createHash('sha256');
  for (let i = 0; i < count; i += 1) hash.update(blockBytes(base, i, Math.min(BLOCK_BYTES, total - i * BLOCK_BYTES)));
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < count; i = next++) {
      const body = blockBytes(base, i, Math.min(BLOCK_BYTES, total - i * BLOCK_BYTES));
      const response = await fetch(`${signedUploadUrl}&comp=block&blockid=${encodeURIComponent(ids[i] ?? '')}`, {
        method: 'PUT',
        body,
      });
      if (response.status !== 201) throw new Error(`block ${i} answered ${response.status}: ${await response.text()}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const list = `<?xml version="1.0" encoding="utf-8"?><BlockList>${ids.map((id) => `<Latest>${id}</Latest>`).join('')}</BlockList>`;
  const committed = await fetch(`${signedUploadUrl}&comp=blocklist`, { method: 'PUT', body: list });
  if (committed.status !== 201) throw new Error(`block list answered ${committed.status}: ${await committed.text()}`);
  const digest = hash.digest('hex');
  await twirp(seeded, 'FinalizeArtifact', { name: 'bench', size: String(total), hash: `sha256:${digest}` });
  return { bytes: total, digest };
}

async function download(seeded: Seeded): Promise<{ bytes: number; digest: string }> {
  const signedUrl = String((await twirp(seeded, 'GetSignedArtifactURL', { name: 'bench' })).signedUrl);
  const response = await fetch(signedUrl);
  if (response.status !== 200 || response.body === null) throw new Error(`download answered ${response.status}`);
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of response.body) {
    bytes += (chunk as Uint8Array).byteLength;
    hash.update(chunk as Uint8Array);
  }
  return { bytes, digest: hash.digest('hex') };
}

export interface Measured<T> {
  result: T;
  mbPerSec: number;
  growthMb: number;
}

/** Runs `work` against a fresh server and measures the server's peak RSS growth meanwhile. */
export async function measured<T extends { bytes: number }>(
  ctx: ScenarioContext,
  seeded: Seeded,
  what: string,
  work: () => Promise<T>,
): Promise<Measured<T>> {
  const server = new GantryChild(seeded.url, seeded.env);
  ctx.defer(async () => {
    await server.kill9();
  });
  await server.start();
  const pid = server.pid;
  if (pid === undefined) throw new Error('gantry web has no pid');
  // A small warm-up call, so first-request costs (route compilation, pools) are not in the figure.
  await twirp(seeded, 'ListArtifacts', {});
  const before = await readProcessMemory(pid);
  const exactPeak = await resetPeakMemory(pid);
  let sampledPeak = before.rss;
  const sampler = exactPeak
    ? null
    : setInterval(() => {
        void readProcessMemory(pid).then((m) => {
          sampledPeak = Math.max(sampledPeak, m.rss);
        });
      }, 20);
  const started = performance.now();
  let result: T;
  try {
    result = await work();
  } finally {
    if (sampler !== null) clearInterval(sampler);
  }
  const seconds = (performance.now() - started) / 1000;
  const after = await readProcessMemory(pid);
  const peak = exactPeak ? after.peakRss : sampledPeak;
  const growthMb = Math.max(0, peak - before.rss) / MB;
  const mbPerSec = result.bytes / MB / seconds;
  ctx.log(
    `${what}: ${(result.bytes / MB).toFixed(0)} MB in ${seconds.toFixed(2)} s (${mbPerSec.toFixed(1)} MB/s); RSS ${(before.rss / MB).toFixed(1)} MB before, peak +${growthMb.toFixed(1)} MB (${exactPeak ? 'kernel high-water mark' : 'sampled'})`,
  );
  const code = await server.stop();
  if (code !== 0) throw new Error(`gantry web exited with ${code} on SIGTERM:\n${server.tail()}`);
  return { result, mbPerSec, growthMb };
}

export const artifacts: Scenario = {
  name: 'artifacts',
  description: `upload and download of a ${artifactMegabytes()} MB artifact (v4 protocol) to a gantry web process: MB/s and peak RSS growth`,
  async run(ctx) {
    const megabytes = artifactMegabytes();
    const seeded = await seed(ctx, megabytes);
    const up = await measured(ctx, seeded, 'upload', () => upload(seeded, megabytes));
    const down = await measured(ctx, seeded, 'download', () => download(seeded));
    if (down.result.bytes !== up.result.bytes || down.result.digest !== up.result.digest)
      throw new Error('the downloaded artifact differs from the uploaded one');
    const row = (metric: string, value: number, target: boolean): Metric => ({
      metric,
      value,
      baseline: null,
      ratio: null,
      target: target ? { of: 'value', kind: 'atMost', threshold: TARGET_GROWTH_MB } : null,
      decimals: 1,
    });
    return [
      row(`upload throughput (MB/s), ${megabytes} MB artifact`, up.mbPerSec, false),
      row(`upload peak RSS growth (MB), ${megabytes} MB artifact`, up.growthMb, true),
      row(`download throughput (MB/s), ${megabytes} MB artifact`, down.mbPerSec, false),
      row(`download peak RSS growth (MB), ${megabytes} MB artifact`, down.growthMb, true),
    ];
  },
};
