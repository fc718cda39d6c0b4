// Artifacts as a job uploads and downloads them with actions/upload-artifact@v3
// and download-artifact@v3: the real @actions/artifact 1.x client, run in a
// child process with the environment a runner sets (ACTIONS_RUNTIME_URL =
// <instance>/api/actions_pipeline/, the runtime token from the task's context,
// GITHUB_RUN_ID), against a started server. Then the REST API over the same
// artifact (listed, zipped from its files), isolation between runs, the
// quota, and a rerun.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import { ArtifactRetention } from '../../src/services/actions/artifact-retention.ts';
import { runArtifactClientV1 } from '../support/artifact-client-v1.ts';
import type { ArtifactV1Command, ChildOutcome } from '../support/artifact-client-v1.ts';
import type { DecodedTask, RunnerClient } from '../support/runner-client.ts';
import { testDialects } from '../support/server.ts';
import { startArtifactRepo } from '../support/artifact-repo.ts';
import type { ArtifactRepo } from '../support/artifact-repo.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { readZip } from '../support/zip-reader.ts';

/** Run quota of the test server: the first artifact (about 12 MB stored) fits, 10 MB more do not. */
const MAX_RUN_BYTES = 20 * 1024 * 1024;
const PIPELINE = '/api/actions_pipeline/_apis/pipelines/workflows';

const WORKFLOW = [
  'on: workflow_dispatch',
  'jobs:',
  '  build:',
  '    runs-on: artifacts',
  '    steps:',
  '      - run: make',
  '',
].join('\n');

/** Two legs of one run, each uploading its own file to the same artifact. */
const MATRIX_WORKFLOW = [
  'on: workflow_dispatch',
  'jobs:',
  '  build:',
  '    runs-on: artifacts',
  '    strategy: { matrix: { leg: [one, two] } }',
  '    steps:',
  '      - run: make',
  '',
].join('\n');

const METRICS_TOKEN = 'metrics-token-for-the-v3-test';
const UPLOAD_ROUTE = '/api/actions_pipeline/_apis/pipelines/workflows/:run_id/artifacts/:hash/upload';

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const md5Hex = (text: string) => createHash('md5').update(text).digest('hex');
const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });

/** A text that gzip shrinks (so the client sends it gzip-encoded), of about `bytes` bytes. */
function logText(bytes: number): Buffer {
  const lines: string[] = [];
  for (let i = 0, size = 0; size < bytes; i += 1) {
    const line = `${new Date(1_700_000_000_000 + i * 1000).toISOString()} step ${i % 17} compiled module-${i % 97}\n`;
    lines.push(line);
    size += line.length;
  }
  return Buffer.from(lines.join(''));
}

for (const dialect of testDialects()) {
  describe(`artifacts v3 with @actions/artifact 1.x [${dialect}]`, () => {
    let repo: ArtifactRepo;
    let s: TestServer;
    let alice: TestUser;
    let runner: RunnerClient;
    let scratch: string;
    /** Run A uploads; run B is the other run whose token must see nothing of A. */
    const runs: { id: number; task: DecodedTask; token: string }[] = [];
    /** The files of the artifact, by their path inside it. */
    const files = new Map<string, Buffer>();

    const client = (run: { id: number; token: string }, command: ArtifactV1Command): Promise<ChildOutcome> =>
      runArtifactClientV1({ runtimeToken: run.token, instanceUrl: s.url, runId: run.id, workspace: scratch }, command);
    /** Chunks the server took (PUTs of the upload route answered 200), from its request metrics. */
    const chunksTaken = async (): Promise<number> => {
      const res = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
      const line = (await res.text())
        .split('\n')
        .find(
          (l) =>
            l.startsWith('gantry_http_requests_total{') &&
            l.includes('method="PUT"') &&
            l.includes(`route="${UPLOAD_ROUTE}"`) &&
            l.includes('status="200"'),
        );
      return line === undefined ? 0 : Number(line.split(' ').at(-1));
    };
    const bearerGet = async (url: string, token: string) => {
      const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
    };

    before(async () => {
      repo = await startArtifactRepo(
        dialect,
        { GANTRY_ARTIFACT_MAX_RUN_SIZE: String(MAX_RUN_BYTES), GANTRY_METRICS_TOKEN: METRICS_TOKEN },
        { 'build.yml': WORKFLOW, 'matrix.yml': MATRIX_WORKFLOW },
      );
      ({ s, alice, runner } = repo);
      for (let i = 0; i < 2; i += 1) runs.push(await repo.dispatchRun());
      scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-artifacts-v3-'));
      // 12 MB that gzip cannot shrink: sent as is, in two chunks (8 MB + 4 MB).
      files.set('big.bin', randomBytes(12 * 1024 * 1024));
      // Text over 64 KiB: packed on disk by the client and sent gzip-encoded.
      files.set('logs/build.log', logText(300 * 1024));
      // Text under 64 KiB: packed in memory, gzip-encoded too.
      files.set('logs/nested/summary.txt', logText(4 * 1024));
      files.set('empty.txt', Buffer.alloc(0));
      for (const [name, bytes] of files) {
        await fs.mkdir(path.dirname(path.join(scratch, 'upload', name)), { recursive: true });
        await fs.writeFile(path.join(scratch, 'upload', name), bytes);
      }
    });

    after(async () => {
      await fs.rm(scratch, { recursive: true, force: true });
      await repo.stop();
    });

    test('uploadArtifact sends every file (the big one chunked, text gzip-encoded); downloadArtifact gives them back byte-identical', async () => {
      const [a] = runs;
      assert.ok(a);
      const uploaded = await client(a, {
        op: 'upload',
        name: 'build-output',
        files: [...files.keys()].map((name) => path.join(scratch, 'upload', name)),
        root: path.join(scratch, 'upload'),
      });
      assert.equal(uploaded.code, 0, uploaded.stderr + uploaded.stdout);
      const result = uploaded.result as { failedItems: string[]; size: number; artifactItems: string[] };
      assert.deepEqual(result.failedItems, [], uploaded.stdout);
      assert.equal(result.artifactItems.length, files.size);
      assert.match(uploaded.stdout, /All files have been successfully uploaded/);
      // What the client chose (its ::debug:: lines): the random file as is, both texts gzip-packed.
      assert.match(
        uploaded.stdout,
        /big\.bin did not help with reducing the size of the file\. The original file will be uploaded as-is/,
      );
      assert.match(
        uploaded.stdout,
        /build\.log is smaller than the original file\. The file will be uploaded using gzip/,
      );
      assert.match(
        uploaded.stdout,
        /summary\.txt helped with reducing the size of the original file\. The file will be uploaded using gzip/,
      );
      // 12 MB in 8 MiB chunks: two PUTs for big.bin, one for each other file.
      assert.equal(await chunksTaken(), 2 + 3);

      const into = path.join(scratch, 'download');
      const downloaded = await client(a, { op: 'download', name: 'build-output', path: into });
      assert.equal(downloaded.code, 0, downloaded.stderr + downloaded.stdout);
      for (const [name, bytes] of files)
        assert.equal(sha256(await fs.readFile(path.join(into, name))), sha256(bytes), name);

      // On the wire: the artifact's file list, and a packed file served gzip-encoded as it was stored.
      const base = `${s.url}${PIPELINE}/${a.id}/artifacts`;
      const listed = await bearerGet(`${base}?api-version=6.0-preview`, a.token);
      assert.equal(listed.status, 200, listed.body.toString());
      const list = JSON.parse(listed.body.toString()) as { count: number; value: { name: string }[] };
      assert.deepEqual([list.count, list.value.map((x) => x.name)], [1, ['build-output']]);
      const items = await bearerGet(`${base}/${md5Hex('build-output')}/download_url?itemPath=build-output`, a.token);
      assert.equal(items.status, 200, items.body.toString());
      const value = (JSON.parse(items.body.toString()) as { value: { path: string; contentLocation: string }[] }).value;
      assert.deepEqual(value.map((x) => x.path).sort(), [...files.keys()].map((name) => `build-output/${name}`).sort());
      const log = value.find((x) => x.path === 'build-output/logs/build.log');
      assert.ok(log);
      const fetched = await bearerGet(log.contentLocation, a.token);
      assert.equal(fetched.status, 200);
      assert.equal(fetched.headers.get('content-encoding'), 'gzip');
      assert.equal(sha256(fetched.body), sha256(files.get('logs/build.log') ?? Buffer.alloc(0)), 'fetch unpacks it');
    });

    test('REST: the artifact is listed with its unpacked size, and its zip holds every file', async () => {
      const [a] = runs;
      assert.ok(a);
      const list = await s.api('GET', `/repos/alice/app/actions/runs/${a.id}/artifacts`, { token: alice.token });
      assert.equal(list.status, 200, list.text);
      const [entry] = list.json as { id: number; name: string; size_in_bytes: number; archive_download_url: string }[];
      assert.ok(entry);
      const total = [...files.values()].reduce((sum, bytes) => sum + bytes.length, 0);
      assert.deepEqual([entry.name, entry.size_in_bytes], ['build-output', total]);
      const one = await s.api('GET', `/repos/alice/app/actions/artifacts/${entry.id}`, { token: alice.token });
      assert.deepEqual([one.status, (one.json as { name: string }).name], [200, 'build-output']);

      const res = await fetch(entry.archive_download_url.replace(s.rootUrl, `${s.url}/`), {
        headers: { authorization: `token ${alice.token}` },
      });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'application/zip');
      assert.equal(res.headers.get('content-disposition'), 'attachment; filename="build-output.zip"');
      const entries = readZip(Buffer.from(await res.arrayBuffer()));
      assert.deepEqual(entries.map((e) => e.name).sort(), [...files.keys()].sort());
      for (const e of entries) assert.equal(sha256(e.data), sha256(files.get(e.name) ?? Buffer.from('?')), e.name);
    });

    test('REST: a v3 artifact too large for a zip without ZIP64 is refused with 422 before a byte is sent', async () => {
      const [a] = runs;
      assert.ok(a);
      const list = await s.api('GET', `/repos/alice/app/actions/runs/${a.id}/artifacts`, { token: alice.token });
      const [entry] = list.json as { id: number }[];
      assert.ok(entry);
      // White-box: one file claims 5 GB unpacked (uploading that much would take minutes).
      const db = s.server.deps.database.db;
      const row = await db
        .selectFrom('action_artifact')
        .select(['id', 'file_size'])
        .where('id', '=', entry.id)
        .executeTakeFirstOrThrow();
      await db.updateTable('action_artifact').set({ file_size: 5_000_000_000 }).where('id', '=', row.id).execute();
      try {
        const res = await s.api('GET', `/repos/alice/app/actions/artifacts/${entry.id}/zip`, { token: alice.token });
        assert.equal(res.status, 422, res.text);
        assert.match((res.json as { message: string }).message, /too large for a zip without ZIP64/);
      } finally {
        await db.updateTable('action_artifact').set({ file_size: row.file_size }).where('id', '=', row.id).execute();
      }
    });

    test("another run's token sees nothing of this run's artifacts", async () => {
      const [a, b] = runs;
      assert.ok(a && b);
      const download = await client(b, { op: 'download', name: 'build-output', path: path.join(scratch, 'stolen') });
      assert.notEqual(download.code, 0);
      assert.match(download.stderr, /Unable to find any artifacts for the associated workflow/);

      const foreign = `${s.url}${PIPELINE}/${a.id}/artifacts`;
      const refused = await bearerGet(foreign, b.token);
      assert.deepEqual([refused.status, refused.body.toString()], [400, 'run-id does not match']);
      const items = await bearerGet(`${foreign}/${md5Hex('build-output')}/download_url?itemPath=build-output`, b.token);
      assert.equal(items.status, 400);
      // Run A's file ids under run B's own URL: no such file there.
      const own = await bearerGet(
        `${s.url}${PIPELINE}/${a.id}/artifacts/${md5Hex('build-output')}/download_url?itemPath=build-output`,
        a.token,
      );
      const ids = (JSON.parse(own.body.toString()) as { value: { contentLocation: string }[] }).value.map(
        (x) => /\/artifacts\/(\d+)\/download$/.exec(x.contentLocation)?.[1],
      );
      for (const id of ids) {
        const stolen = await bearerGet(`${s.url}${PIPELINE}/${b.id}/artifacts/${id}/download`, b.token);
        assert.equal(stolen.status, 404, `file ${id}`);
      }
      const none = await fetch(foreign);
      assert.deepEqual([none.status, await none.text()], [401, 'Bad authorization header']);
    });

    test('past the run quota a file is refused at once with a message naming the setting; nothing of it is listed', async () => {
      const [a] = runs;
      assert.ok(a);
      const big = path.join(scratch, 'too-much.bin');
      await fs.writeFile(big, randomBytes(10 * 1024 * 1024));
      const started = Date.now();
      const refused = await client(a, { op: 'upload', name: 'too-much', files: [big], root: scratch });
      assert.equal(refused.code, 0, refused.stderr);
      assert.deepEqual((refused.result as { failedItems: string[] }).failedItems, [big]);
      assert.match(refused.stdout, /Status Code: 403/);
      assert.match(refused.stdout, /Status Message: Quota exceeded: .*GANTRY_ARTIFACT_MAX_RUN_SIZE/);
      assert.ok(Date.now() - started < 20_000, 'no retries with backoff');
      const list = await s.api('GET', `/repos/alice/app/actions/runs/${a.id}/artifacts`, { token: alice.token });
      assert.deepEqual(
        (list.json as { name: string }[]).map((x) => x.name),
        ['build-output'],
      );
      // Filled to the byte (what the refusal said was left): a new container is refused, which
      // the client reports as the storage quota.
      const left = Number(/(\d+) bytes were left/.exec(refused.stdout)?.[1]);
      assert.ok(left > 0 && left < 10 * 1024 * 1024, refused.stdout);
      const filler = path.join(scratch, 'filler.bin');
      await fs.writeFile(filler, randomBytes(left));
      assert.equal((await client(a, { op: 'upload', name: 'filler', files: [filler], root: scratch })).code, 0);
      const full = await client(a, { op: 'upload', name: 'one-more', files: [filler], root: scratch });
      assert.notEqual(full.code, 0);
      assert.match(full.stderr, /Artifact storage quota has been hit/);
    });

    test('bad input answers 4xx, never 500; a retried chunk makes one file; retentionDays is kept', async () => {
      const [, b] = runs;
      assert.ok(b);
      const base = `${s.url}${PIPELINE}/${b.id}/artifacts`;
      const call = async (
        method: string,
        url: string,
        body?: string | Buffer,
        headers: Record<string, string> = {},
      ) => {
        const res = await fetch(url, {
          method,
          headers: { authorization: `Bearer ${b.token}`, ...headers },
          ...(body === undefined ? {} : { body }),
        });
        return { status: res.status, text: await res.text() };
      };
      for (const body of ['{not json', '[1]', '{"Name":42}', '{"Name":"a/b"}', '{"Name":""}'])
        assert.equal((await call('POST', base, body)).status, 400, body);
      const created = await call(
        'POST',
        base,
        JSON.stringify({ Type: 'actions_storage', Name: 'edge', RetentionDays: 1 }),
      );
      assert.equal(created.status, 200, created.text);
      const upload = (JSON.parse(created.text) as { fileContainerResourceUrl: string }).fileContainerResourceUrl;
      assert.equal(
        upload,
        `${s.rootUrl}api/actions_pipeline/_apis/pipelines/workflows/${b.id}/artifacts/${md5Hex('edge')}/upload?retentionDays=1`,
      );
      const url = upload.replace(s.rootUrl, `${s.url}/`);
      const bytes = Buffer.from('hello, v3');
      const md5 = createHash('md5').update(bytes).digest('base64');
      const chunk = { 'content-range': `bytes 0-${bytes.length - 1}/${bytes.length}`, 'x-actions-results-md5': md5 };
      const cases: [string, string, Buffer, Record<string, string>][] = [
        ['wrong hash', `${base}/${md5Hex('other')}/upload?itemPath=edge/a.txt`, bytes, chunk],
        ['no file path', `${url}&itemPath=edge`, bytes, chunk],
        ['climbs out', `${url}&itemPath=edge/../x.txt`, bytes, chunk],
        ['no Content-Range', `${url}&itemPath=edge/a.txt`, bytes, { 'x-actions-results-md5': md5 }],
        ['no MD5', `${url}&itemPath=edge/a.txt`, bytes, { 'content-range': chunk['content-range'] }],
        [
          'wrong MD5',
          `${url}&itemPath=edge/a.txt`,
          bytes,
          { ...chunk, 'x-actions-results-md5': md5.replace(/^./, 'A') },
        ],
        ['longer than its range', `${url}&itemPath=edge/a.txt`, Buffer.concat([bytes, bytes]), chunk],
        ['shorter than its range', `${url}&itemPath=edge/a.txt`, bytes.subarray(1), chunk],
        ['brotli', `${url}&itemPath=edge/a.txt`, bytes, { ...chunk, 'content-encoding': 'br' }],
        ['bad retention', `${base}/${md5Hex('edge')}/upload?retentionDays=soon&itemPath=edge/a.txt`, bytes, chunk],
      ];
      for (const [what, target, body, headers] of cases) {
        const res = await call('PUT', target, body, headers);
        assert.equal(res.status, 400, `${what}: ${res.text}`);
      }
      assert.equal((await call('PATCH', base, '{}')).status, 400, 'no artifactName');
      assert.equal((await call('GET', `${base}/${md5Hex('x')}/download_url?itemPath=edge`)).status, 400);
      assert.equal((await call('GET', `${base}/${md5Hex('none')}/download_url?itemPath=none`)).status, 404);
      for (const id of ['0', 'abc', '99999999999999999999'])
        assert.equal((await call('GET', `${base}/${id}/download`)).status, 404, id);

      // The same chunk twice (a client's retry), then the finalize: one file of its size.
      for (let i = 0; i < 2; i += 1)
        assert.equal((await call('PUT', `${url}&itemPath=edge/a.txt`, bytes, chunk)).status, 200);
      assert.equal((await call('PATCH', `${base}?artifactName=edge`, '{"Size":9}')).status, 200);
      const list = await s.api('GET', `/repos/alice/app/actions/runs/${b.id}/artifacts`, { token: alice.token });
      const [entry] = list.json as { name: string; size_in_bytes: number; created_at: string; expires_at: string }[];
      assert.ok(entry, list.text);
      assert.deepEqual([entry.name, entry.size_in_bytes], ['edge', bytes.length]);
      assert.equal((Date.parse(entry.expires_at) - Date.parse(entry.created_at)) / 86_400_000, 1);
      // A v4 upload of the same name in this run is refused rather than mixed with the v3 files.
      const v4 = await fetch(`${s.url}/twirp/github.actions.results.api.v1.ArtifactService/CreateArtifact`, {
        method: 'POST',
        headers: { authorization: `Bearer ${b.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ workflow_run_backend_id: String(b.id), workflow_job_run_backend_id: '0', name: 'edge' }),
      });
      assert.equal(v4.status, 409, await v4.text());
    });

    test('the legs of a matrix upload to one artifact: each sees the files of both, the REST zip holds both', async () => {
      const first = await repo.dispatchRun('matrix.yml');
      const runId = first.id;
      const legs: { id: number; token: string }[] = [];
      for (const leg of ['one', 'two']) {
        const task = leg === 'one' ? first.task : await repo.takeJob();
        legs.push({ id: runId, token: String(task.context.gitea_runtime_token) });
        const dir = path.join(scratch, `leg-${leg}`);
        await fs.mkdir(dir, { recursive: true });
        await fs.writeFile(path.join(dir, `${leg}.txt`), `made by leg ${leg}\n`);
      }
      for (const [i, leg] of ['one', 'two'].entries()) {
        const dir = path.join(scratch, `leg-${leg}`);
        const up = await client(legs[i] ?? { id: 0, token: '' }, {
          op: 'upload',
          name: 'shared',
          files: [path.join(dir, `${leg}.txt`)],
          root: dir,
        });
        assert.equal(up.code, 0, up.stderr + up.stdout);
      }
      const into = path.join(scratch, 'shared');
      const down = await client(legs[0] ?? { id: 0, token: '' }, { op: 'download', name: 'shared', path: into });
      assert.equal(down.code, 0, down.stderr + down.stdout);
      assert.deepEqual((await fs.readdir(into)).sort(), ['one.txt', 'two.txt']);
      assert.equal(await fs.readFile(path.join(into, 'two.txt'), 'utf8'), 'made by leg two\n');

      const list = await s.api('GET', `/repos/alice/app/actions/runs/${runId}/artifacts`, { token: alice.token });
      const [entry] = list.json as { id: number; name: string }[];
      assert.ok(entry, list.text);
      const zip = await fetch(`${s.apiUrl}/repos/alice/app/actions/artifacts/${entry.id}/zip`, {
        headers: { authorization: `token ${alice.token}` },
      });
      assert.equal(zip.status, 200);
      assert.deepEqual(
        readZip(Buffer.from(await zip.arrayBuffer()))
          .map((e) => `${e.name}: ${e.data.toString().trim()}`)
          .sort(),
        ['one.txt: made by leg one', 'two.txt: made by leg two'],
      );
    });

    test('a rerun marks the artifact for deletion as v4 ones are; the clean-up pass removes its files', async () => {
      const [a] = runs;
      assert.ok(a);
      await runner.runner.updateTask({ state: { id: BigInt(a.task.id), result: Result.SUCCESS, stoppedAt: now() } });
      const rerun = await s.api('POST', `/repos/alice/app/actions/runs/${a.id}/rerun`, { token: alice.token });
      assert.ok(rerun.status === 200 || rerun.status === 201, rerun.text);
      const list = await s.api('GET', `/repos/alice/app/actions/runs/${a.id}/artifacts`, { token: alice.token });
      assert.deepEqual([list.json, list.headers.get('x-total-count')], [[], '0']);

      const [repoFolder] = await fs.readdir(path.join(s.dataDir, 'actions_artifacts'));
      const folder = path.join(s.dataDir, 'actions_artifacts', repoFolder ?? '', String(a.id));
      const filesIn = async (dir: string): Promise<string[]> =>
        (await fs.readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => e.name);
      assert.ok((await filesIn(folder)).length >= files.size, 'the files stay until the clean-up pass');
      const deps = s.server.deps;
      const cleaned = await new ArtifactRetention(
        deps.database.db,
        deps.clock,
        deps.services.artifactStorage,
      ).cleanOnce();
      assert.ok(cleaned >= files.size, `every file's row is cleaned (${cleaned})`);
      assert.deepEqual(await filesIn(folder), []);
    });
  });
}
