// Uploading and downloading an artifact of two large files over the v3
// protocol (upload-artifact@v3) to and from a `gantry web` child process, and
// its REST zip, built from the files as it is sent: throughput (MB/s) and how
// much the server's resident set grows meanwhile (target: peak growth ≤ 32
// MB, i.e. chunks and the zip are streamed, never held). The client here
// speaks the protocol as @actions/artifact 1.x does (POST the container, each
// file PUT in 8 MiB chunks with Content-Range and MD5, two files at a time,
// PATCH to finalize; then the list, the files' URLs, each file), with the
// seeded task's runtime token (artifacts.ts seeds it). The repository is
// public, so the REST zip needs no token. GANTRY_BENCH_ARTIFACT_MB sets the
// size (default 1024).
import { createHash, randomBytes } from 'node:crypto';
import type { Metric, Scenario } from '../lib/scenario.ts';
import { artifactMegabytes, measured, seed } from './artifacts.ts';
import type { Seeded } from './artifacts.ts';

const MB = 1024 * 1024;
const CHUNK_BYTES = 8 * MB;
const FILES = 2;
const TARGET_GROWTH_MB = 32;
const NAME = 'bench-v3';

const runBase = (seeded: Seeded) =>
  `${seeded.url}/api/actions_pipeline/_apis/pipelines/workflows/${seeded.runId}/artifacts`;
const md5Hex = (text: string) => createHash('md5').update(text).digest('hex');

async function call(seeded: Seeded, method: string, url: string, init: RequestInit = {}): Promise<Response> {
  const response = await fetch(url, {
    ...init,
    method,
    headers: { authorization: `Bearer ${seeded.runtimeToken}`, ...(init.headers as Record<string, string>) },
  });
  if (response.status !== 200)
    throw new Error(`${method} ${url} answered ${response.status}: ${await response.text()}`);
  return response;
}

/** The chunk `index` of a file: one random chunk with the file and chunk numbers written in, so chunks differ. */
function chunkBytes(base: Buffer, file: number, index: number, size: number): Buffer {
  const chunk = Buffer.from(base.subarray(0, size));
  chunk.writeUInt32BE(file, 0);
  chunk.writeUInt32BE(index, 4);
  return chunk;
}

async function upload(seeded: Seeded, megabytes: number): Promise<{ bytes: number; digests: string[] }> {
  const created = await call(seeded, 'POST', runBase(seeded), {
    body: JSON.stringify({ Type: 'actions_storage', Name: NAME }),
    headers: { 'content-type': 'application/json' },
  });
  const container = ((await created.json()) as { fileContainerResourceUrl: string }).fileContainerResourceUrl;
  const fileBytes = Math.floor((megabytes * MB) / FILES);
  const base = randomBytes(CHUNK_BYTES);
  const sendFile = async (file: number): Promise<string> => {
    const whole = createHash('sha256');
    for (let start = 0, index = 0; start < fileBytes; start += CHUNK_BYTES, index += 1) {
      const body = chunkBytes(base, file, index, Math.min(CHUNK_BYTES, fileBytes - start));
      whole.update(body);
      await call(seeded, 'PUT', `${container}?itemPath=${encodeURIComponent(`${NAME}/file-${file}.bin`)}`, {
        body,
        headers: {
          'content-type': 'application/octet-stream',
          'content-range': `bytes ${start}-${start + body.length - 1}/${fileBytes}`,
          'x-actions-results-md5': createHash('md5').update(body).digest('base64'),
        },
      });
    }
    return whole.digest('hex');
  };
  const digests = await Promise.all(Array.from({ length: FILES }, (_, file) => sendFile(file)));
  await call(seeded, 'PATCH', `${runBase(seeded)}?artifactName=${NAME}`, {
    body: JSON.stringify({ Size: fileBytes * FILES }),
    headers: { 'content-type': 'application/json' },
  });
  return { bytes: fileBytes * FILES, digests };
}

async function download(seeded: Seeded): Promise<{ bytes: number; digests: string[] }> {
  const items = await call(seeded, 'GET', `${runBase(seeded)}/${md5Hex(NAME)}/download_url?itemPath=${NAME}`);
  const value = ((await items.json()) as { value: { path: string; contentLocation: string }[] }).value.sort((a, b) =>
    a.path.localeCompare(b.path),
  );
  let bytes = 0;
  const digests: string[] = [];
  for (const item of value) {
    const response = await call(seeded, 'GET', item.contentLocation);
    const hash = createHash('sha256');
    for await (const chunk of response.body ?? []) {
      bytes += (chunk as Uint8Array).byteLength;
      hash.update(chunk as Uint8Array);
    }
    digests.push(hash.digest('hex'));
  }
  return { bytes, digests };
}

async function restZip(seeded: Seeded): Promise<{ bytes: number }> {
  const list = await fetch(`${seeded.url}/api/v1/repos/artifact-owner/artifacts/actions/artifacts`);
  const [entry] = (await list.json()) as { id: number }[];
  if (entry === undefined) throw new Error('the REST list shows no artifact');
  const response = await fetch(`${seeded.url}/api/v1/repos/artifact-owner/artifacts/actions/artifacts/${entry.id}/zip`);
  if (response.status !== 200) throw new Error(`the REST zip answered ${response.status}`);
  let bytes = 0;
  for await (const chunk of response.body ?? []) bytes += (chunk as Uint8Array).byteLength;
  return { bytes };
}

export const artifactsV3: Scenario = {
  name: 'artifacts-v3',
  description: `upload, download and REST zip of a ${artifactMegabytes()} MB artifact of ${FILES} files (v3 protocol) with a gantry web process: MB/s and peak RSS growth`,
  async run(ctx) {
    const megabytes = artifactMegabytes();
    const seeded = await seed(ctx, megabytes);
    const up = await measured(ctx, seeded, 'v3 upload', () => upload(seeded, megabytes));
    const down = await measured(ctx, seeded, 'v3 download', () => download(seeded));
    if (down.result.bytes !== up.result.bytes || down.result.digests.join() !== up.result.digests.join())
      throw new Error('the downloaded files differ from the uploaded ones');
    const zip = await measured(ctx, seeded, 'v3 REST zip', () => restZip(seeded));
    const row = (metric: string, value: number, target: boolean): Metric => ({
      metric,
      value,
      baseline: null,
      ratio: null,
      target: target ? { of: 'value', kind: 'atMost', threshold: TARGET_GROWTH_MB } : null,
      decimals: 1,
    });
    return [
      row(`v3 upload throughput (MB/s), ${megabytes} MB`, up.mbPerSec, false),
      row(`v3 upload peak RSS growth (MB), ${megabytes} MB`, up.growthMb, true),
      row(`v3 download throughput (MB/s), ${megabytes} MB`, down.mbPerSec, false),
      row(`v3 download peak RSS growth (MB), ${megabytes} MB`, down.growthMb, true),
      row(`v3 REST zip throughput (MB/s), ${megabytes} MB`, zip.mbPerSec, false),
      row(`v3 REST zip peak RSS growth (MB), ${megabytes} MB`, zip.growthMb, true),
    ];
  },
};
