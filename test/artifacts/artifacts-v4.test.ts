// Artifacts as a job uploads and downloads them with actions/upload-artifact@v4
// and download-artifact@v4: the real @actions/artifact client, run in a child
// process with the environment a runner sets (the runtime token from the
// task's context, ACTIONS_RESULTS_URL = the instance URL), against a started
// server. Then the REST API (Forgejo 16 shapes) over the same artifacts, the
// signed URLs' refusals, isolation between runs, quotas, rerun and clean-up.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import { ArtifactRetention } from '../../src/services/actions/artifact-retention.ts';
import { runArtifactClient } from '../support/artifact-client.ts';
import type { ArtifactCommand, ChildOutcome } from '../support/artifact-client.ts';
import type { DecodedTask, RunnerClient } from '../support/runner-client.ts';
import { testDialects } from '../support/server.ts';
import { startArtifactRepo } from '../support/artifact-repo.ts';
import type { ArtifactRepo } from '../support/artifact-repo.ts';
import type { TestServer, TestUser } from '../support/server.ts';

const FILES = 5;
const FILE_BYTES = 10 * 1024 * 1024;
/** Run quota of the test server: the 50 MB artifact fits, a second 20 MB one in the same run does not. */
const MAX_RUN_BYTES = 60 * 1024 * 1024;
const TWIRP = '/twirp/github.actions.results.api.v1.ArtifactService';

const WORKFLOW = [
  'on: workflow_dispatch',
  'jobs:',
  '  build:',
  '    runs-on: artifacts',
  '    steps:',
  '      - run: make',
  '',
].join('\n');

async function sha256OfFile(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

function decodeJwt(token: string): Record<string, unknown> {
  const payload = token.split('.')[1] ?? '';
  return JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Record<string, unknown>;
}

const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });

for (const dialect of testDialects()) {
  describe(`artifacts v4 with @actions/artifact [${dialect}]`, () => {
    let repo: ArtifactRepo;
    let s: TestServer;
    let alice: TestUser;
    let bob: TestUser;
    let runner: RunnerClient;
    let scratch: string;
    /** Run A uploads; run B is the other run whose token must see nothing of A. */
    const runs: { id: number; task: DecodedTask; token: string }[] = [];
    const fileHashes = new Map<string, string>();
    let upload: { id: number; size: number; digest: string };

    const client = (token: string, command: ArtifactCommand): Promise<ChildOutcome> =>
      runArtifactClient({ runtimeToken: token, resultsUrl: s.url, workspace: scratch }, command);
    const twirp = async (method: string, token: string, body: unknown) => {
      const res = await fetch(`${s.url}${TWIRP}/${method}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
      const text = await res.text();
      return {
        status: res.status,
        text,
        json: res.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : null,
      };
    };
    const rawGet = async (url: string, token?: string) => {
      const res = await fetch(url, { headers: token === undefined ? {} : { authorization: `token ${token}` } });
      return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
    };

    before(async () => {
      repo = await startArtifactRepo(
        dialect,
        { GANTRY_ARTIFACT_MAX_RUN_SIZE: String(MAX_RUN_BYTES) },
        { 'build.yml': WORKFLOW },
      );
      ({ s, alice, runner } = repo);
      bob = await s.createUser('bob');
      for (let i = 0; i < 2; i += 1) runs.push(await repo.dispatchRun());
      scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-artifacts-'));
      await fs.mkdir(path.join(scratch, 'upload', 'nested'), { recursive: true });
      for (let i = 0; i < FILES; i += 1) {
        const name = i === 0 ? 'nested/first.bin' : `file-${i}.bin`;
        const bytes = randomBytes(FILE_BYTES);
        await fs.writeFile(path.join(scratch, 'upload', name), bytes);
        fileHashes.set(name, createHash('sha256').update(bytes).digest('hex'));
      }
    });

    after(async () => {
      await fs.rm(scratch, { recursive: true, force: true });
      await repo.stop();
    });

    test('the task context carries the runtime token: a JWT whose scp names the run and the job', () => {
      const [a] = runs;
      assert.ok(a);
      assert.equal(a.task.context.forgejo_runtime_token, a.task.context.gitea_runtime_token);
      const claims = decodeJwt(a.token);
      const jobId = claims.JobID as number;
      assert.equal(claims.scp, `Actions.Results:${a.id}:${jobId}`);
      assert.deepEqual([claims.TaskID, claims.RunID], [a.task.id, a.id]);
      assert.equal((claims.exp as number) - (claims.nbf as number), 24 * 3600);
      assert.notEqual(a.token, a.task.context.token, 'not the task token');
    });

    test('uploadArtifact sends 50 MB of five files; listArtifacts shows it; downloadArtifact gives every file back byte-identical', async () => {
      const [a] = runs;
      assert.ok(a);
      const files = [...fileHashes.keys()].map((name) => path.join(scratch, 'upload', name));
      const uploaded = await client(a.token, {
        op: 'upload',
        name: 'build-output',
        files,
        root: path.join(scratch, 'upload'),
        compressionLevel: 0,
      });
      assert.equal(uploaded.code, 0, uploaded.stderr);
      upload = uploaded.result as typeof upload;
      assert.ok(upload.id > 0);
      assert.ok(upload.size > FILES * FILE_BYTES, `the zip holds every byte (${upload.size})`);

      const listed = await client(a.token, { op: 'list' });
      assert.equal(listed.code, 0, listed.stderr);
      const artifacts = (listed.result as { artifacts: { id: number; name: string; size: number; digest?: string }[] })
        .artifacts;
      assert.deepEqual(
        artifacts.map((x) => [x.id, x.name, x.size, x.digest]),
        [[upload.id, 'build-output', upload.size, `sha256:${upload.digest}`]],
      );

      const into = path.join(scratch, 'download');
      const downloaded = await client(a.token, {
        op: 'download',
        id: upload.id,
        path: into,
        expectedHash: `sha256:${upload.digest}`,
      });
      assert.equal(downloaded.code, 0, downloaded.stderr);
      assert.equal((downloaded.result as { digestMismatch: boolean }).digestMismatch, false);
      for (const [name, hash] of fileHashes) assert.equal(await sha256OfFile(path.join(into, name)), hash, name);
    });

    test('REST: the artifact in the repository and run lists (bare array, X-Total-Count), by id, and its zip is the uploaded one', async () => {
      const [a, b] = runs;
      assert.ok(a && b);
      const list = await s.api('GET', '/repos/alice/app/actions/artifacts', { token: alice.token });
      assert.equal(list.status, 200, list.text);
      assert.equal(list.headers.get('x-total-count'), '1');
      const [entry] = list.json as Record<string, unknown>[];
      assert.ok(entry);
      assert.deepEqual(Object.keys(entry), [
        'id',
        'name',
        'size_in_bytes',
        'archive_download_url',
        'expired',
        'run_id',
        'created_at',
        'updated_at',
        'expires_at',
      ]);
      assert.deepEqual(
        [entry.id, entry.name, entry.size_in_bytes, entry.expired, entry.run_id, entry.archive_download_url],
        [
          upload.id,
          'build-output',
          upload.size,
          false,
          a.id,
          `${s.rootUrl}api/v1/repos/alice/app/actions/artifacts/${upload.id}/zip`,
        ],
      );
      const days = (Date.parse(entry.expires_at as string) - Date.parse(entry.created_at as string)) / 86_400_000;
      assert.equal(days, 90, 'GANTRY_ARTIFACT_RETENTION_DAYS by default');

      const ofRun = await s.api('GET', `/repos/alice/app/actions/runs/${a.id}/artifacts?name=build-output`, {
        token: alice.token,
      });
      assert.deepEqual([ofRun.status, (ofRun.json as { id: number }[]).map((x) => x.id)], [200, [upload.id]]);
      const otherRun = await s.api('GET', `/repos/alice/app/actions/runs/${b.id}/artifacts`, { token: alice.token });
      assert.deepEqual([otherRun.status, otherRun.json, otherRun.headers.get('x-total-count')], [200, [], '0']);
      const noName = await s.api('GET', '/repos/alice/app/actions/artifacts?name=nope', { token: alice.token });
      assert.deepEqual(noName.json, []);

      const one = await s.api('GET', `/repos/alice/app/actions/artifacts/${upload.id}`, { token: alice.token });
      assert.deepEqual([one.status, (one.json as { name: string }).name], [200, 'build-output']);

      const zip = await rawGet(`${s.apiUrl}/repos/alice/app/actions/artifacts/${upload.id}/zip`, alice.token);
      assert.equal(zip.status, 200);
      assert.equal(zip.headers.get('content-type'), 'application/zip');
      assert.equal(zip.headers.get('content-disposition'), 'attachment; filename="build-output.zip"');
      assert.equal(createHash('sha256').update(zip.body).digest('hex'), upload.digest);

      // Private repository: another user and anonymous see nothing (404, no existence leak).
      assert.equal((await s.api('GET', '/repos/alice/app/actions/artifacts', { token: bob.token })).status, 404);
      assert.equal((await rawGet(`${s.apiUrl}/repos/alice/app/actions/artifacts/${upload.id}/zip`)).status, 404);
      const missing = await s.api('GET', '/repos/alice/app/actions/artifacts/999999', { token: alice.token });
      assert.equal(missing.status, 404);
    });

    test('a signed download URL works as given; a tampered sig, expires, name or id is refused with 401', async () => {
      const [a] = runs;
      assert.ok(a);
      const signed = await twirp('GetSignedArtifactURL', a.token, {
        workflow_run_backend_id: String(a.id),
        workflow_job_run_backend_id: '0',
        name: 'build-output',
      });
      assert.equal(signed.status, 200, signed.text);
      const url = new URL((signed.json as { signedUrl: string }).signedUrl);
      assert.equal(url.origin, new URL(s.url).origin);
      const good = await fetch(url);
      assert.equal(good.status, 200);
      assert.equal(good.headers.get('content-type'), 'application/zip');
      assert.equal(
        createHash('sha256')
          .update(Buffer.from(await good.arrayBuffer()))
          .digest('hex'),
        upload.digest,
      );

      const tamper = (key: string, value: (old: string) => string) => {
        const copy = new URL(url.href);
        copy.searchParams.set(key, value(copy.searchParams.get(key) ?? ''));
        return copy;
      };
      const flip = (text: string) => (text[0] === 'A' ? 'B' : 'A') + text.slice(1);
      for (const bad of [
        tamper('sig', flip),
        tamper('sig', (sig) => `${sig}A`),
        tamper('expires', (e) => String(Number(e) + 3600)),
        tamper('artifactID', (id) => String(Number(id) + 1)),
        tamper('taskID', (id) => String(Number(id) + 1)),
        tamper('artifactName', () => 'other'),
      ]) {
        const res = await fetch(bad);
        assert.deepEqual([res.status, await res.text()], [401, 'Error unauthorized'], bad.search);
      }
      const unsigned = new URL(url.href);
      unsigned.searchParams.delete('sig');
      assert.equal((await fetch(unsigned)).status, 401);
    });

    test("another run's token sees nothing of this run's artifacts; naming this run is refused", async () => {
      const [a, b] = runs;
      assert.ok(a && b);
      const listed = await client(b.token, { op: 'list' });
      assert.equal(listed.code, 0, listed.stderr);
      assert.deepEqual((listed.result as { artifacts: unknown[] }).artifacts, []);
      const download = await client(b.token, { op: 'download', id: upload.id, path: path.join(scratch, 'stolen') });
      assert.notEqual(download.code, 0);
      assert.match(download.stderr, /No artifacts found for ID/);

      const foreign = { workflow_run_backend_id: String(a.id), workflow_job_run_backend_id: '0', name: 'build-output' };
      for (const method of ['ListArtifacts', 'GetSignedArtifactURL', 'DeleteArtifact', 'CreateArtifact']) {
        const res = await twirp(method, b.token, foreign);
        assert.deepEqual([res.status, res.text], [400, 'run-id does not match'], method);
      }
      const noToken = await fetch(`${s.url}${TWIRP}/ListArtifacts`, { method: 'POST', body: '{}' });
      assert.deepEqual([noToken.status, await noToken.text()], [401, 'Bad authorization header']);
      const forged = `${b.token.slice(0, -2)}xx`;
      assert.equal((await twirp('ListArtifacts', forged, { workflow_run_backend_id: String(b.id) })).status, 401);
      const garbage = await twirp('ListArtifacts', b.token, '{not json');
      assert.equal(garbage.status, 400);
    });

    test('past the run quota an upload is refused with 413 and nothing of it is listed', async () => {
      const [a] = runs;
      assert.ok(a);
      const big = path.join(scratch, 'big.bin');
      await fs.writeFile(big, randomBytes(20 * 1024 * 1024));
      const refused = await client(a.token, {
        op: 'upload',
        name: 'too-much',
        files: [big],
        root: scratch,
        compressionLevel: 0,
      });
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr + refused.stdout, /413|Quota exceeded/);
      const list = await s.api('GET', `/repos/alice/app/actions/runs/${a.id}/artifacts`, { token: alice.token });
      assert.deepEqual(
        (list.json as { name: string }[]).map((x) => x.name),
        ['build-output'],
      );
    });

    test('blocks of several artifacts sent at once never take a run past its quota between them', async () => {
      // A run of its own, so the quota is all free: six of the eight 10 MiB blocks fit in 60 MiB.
      const { id, task, token } = await repo.dispatchRun();
      const run = { workflowRunBackendId: String(id), workflowJobRunBackendId: '0' };
      const urls: string[] = [];
      for (let i = 0; i < 8; i += 1) {
        const created = await twirp('CreateArtifact', token, { ...run, name: `race-${i}`, version: 4 });
        assert.equal(created.status, 200, created.text);
        urls.push((created.json as { signedUploadUrl: string }).signedUploadUrl);
      }
      const block = randomBytes(FILE_BYTES);
      const statuses = await Promise.all(
        urls.map(async (url) => (await fetch(`${url}&comp=block&blockid=AAAA`, { method: 'PUT', body: block })).status),
      );
      assert.deepEqual(
        [statuses.filter((status) => status === 201).length, statuses.filter((status) => status === 413).length],
        [6, 2],
        `statuses: ${statuses.join(', ')}`,
      );
      await runner.runner.updateTask({ state: { id: BigInt(task.id), result: Result.SUCCESS, stoppedAt: now() } });
    });

    test('a block of an upload refused for passing the quota is refused so too, not answered "not found"', async () => {
      // The client sends blocks several at once and reports the first error back: each must say why.
      const { id, task, token } = await repo.dispatchRun();
      const run = { workflowRunBackendId: String(id), workflowJobRunBackendId: '0' };
      const created = await twirp('CreateArtifact', token, { ...run, name: 'over', version: 4 });
      assert.equal(created.status, 200, created.text);
      const url = (created.json as { signedUploadUrl: string }).signedUploadUrl;
      const block = randomBytes(FILE_BYTES);
      const put = async (n: number) => {
        const res = await fetch(`${url}&comp=block&blockid=${Buffer.from(`b${n}`).toString('base64')}`, {
          method: 'PUT',
          body: block,
        });
        return { status: res.status, text: await res.text() };
      };
      const blocks = MAX_RUN_BYTES / FILE_BYTES;
      for (let n = 0; n < blocks; n += 1) assert.equal((await put(n)).status, 201, `block ${n} fits`);
      const refused = await put(blocks);
      assert.equal(refused.status, 413, refused.text);
      const after = await put(blocks + 1);
      assert.equal(after.status, 413, after.text);
      assert.match(after.text, /Quota exceeded/);
      await runner.runner.updateTask({ state: { id: BigInt(task.id), result: Result.SUCCESS, stoppedAt: now() } });
    });

    test('bad input answers 4xx, never 500: undecodable bodies, wrong field types, unknown blocks, an id past 2^63', async () => {
      const [, b] = runs;
      assert.ok(b);
      const run = { workflow_run_backend_id: String(b.id), workflow_job_run_backend_id: '0' };
      const cases: [string, unknown, number][] = [
        ['ListArtifacts', '[1,2]', 400],
        ['ListArtifacts', { ...run, id_filter: '99999999999999999999' }, 400],
        ['ListArtifacts', { ...run, idFilter: '9223372036854775807' }, 200],
        ['CreateArtifact', { ...run, name: 42 }, 400],
        ['CreateArtifact', { ...run, name: 'a/b' }, 400],
        ['CreateArtifact', { ...run, name: 'ok', expires_at: 'tomorrow' }, 400],
        ['FinalizeArtifact', { ...run, name: 'never-created', size: '1' }, 404],
        ['GetSignedArtifactURL', { ...run, name: 'never-created' }, 404],
        ['DeleteArtifact', { ...run, name: 'never-created' }, 404],
      ];
      for (const [method, body, status] of cases) {
        const res = await twirp(method, b.token, body);
        assert.equal(res.status, status, `${method} ${JSON.stringify(body)}: ${res.text}`);
      }
      const created = await twirp('CreateArtifact', b.token, { ...run, name: 'edge' });
      assert.equal(created.status, 200, created.text);
      const url = (created.json as { signedUploadUrl: string }).signedUploadUrl;
      const put = async (query: string, body: string) =>
        (await fetch(`${url}${query}`, { method: 'PUT', body })).status;
      assert.equal(await put('&comp=appendBlock', 'x'), 400);
      assert.equal(await put('&comp=block', 'x'), 400, 'a block without an id');
      assert.equal(await put(`&comp=block&blockid=${'A'.repeat(200)}`, 'x'), 400);
      assert.equal(await put('&comp=blocklist', 'not xml'), 400);
      assert.equal(await put('&comp=blocklist', '<BlockList><Latest>bm9wZQ==</Latest></BlockList>'), 400);
      const early = await twirp('FinalizeArtifact', b.token, { ...run, name: 'edge', size: '0' });
      assert.equal(early.status, 400, 'nothing was committed yet');
      assert.equal(await put('&comp=block&blockid=YQ%3D%3D', 'hello'), 201);
      assert.equal(
        await put('&comp=blocklist', '<?xml version="1.0"?><BlockList><Latest>YQ==</Latest></BlockList>'),
        201,
      );
      const wrongHash = await twirp('FinalizeArtifact', b.token, {
        ...run,
        name: 'edge',
        size: '5',
        hash: `sha256:${'0'.repeat(64)}`,
      });
      assert.deepEqual([wrongHash.status, wrongHash.text], [400, 'Error artifact hash mismatch']);
      const hash = createHash('sha256').update('hello').digest('hex');
      const done = await twirp('FinalizeArtifact', b.token, {
        ...run,
        name: 'edge',
        size: '5',
        hash: `sha256:${hash}`,
      });
      assert.equal(done.status, 200, done.text);
      const id = Number((done.json as { artifactId: string }).artifactId);
      const zip = await rawGet(`${s.apiUrl}/repos/alice/app/actions/artifacts/${id}/zip`, alice.token);
      assert.deepEqual([zip.status, zip.body.toString()], [200, 'hello']);
    });

    test('retention: past its expiry an artifact is listed as expired, its zip is gone; lists page with Link', async () => {
      const [a] = runs;
      assert.ok(a);
      const small = path.join(scratch, 'short.txt');
      await fs.writeFile(small, 'kept for a day\n');
      const short = await client(a.token, {
        op: 'upload',
        name: 'short',
        files: [small],
        root: scratch,
        retentionDays: 1,
      });
      assert.equal(short.code, 0, short.stderr);
      const shortId = (short.result as { id: number }).id;
      const deps = s.server.deps;
      const later = {
        nowMs: () => Date.now() + 2 * 86_400_000,
        nowSec: () => Math.floor(Date.now() / 1000) + 2 * 86_400,
      };
      assert.equal(await new ArtifactRetention(deps.database.db, later, deps.services.artifactStorage).cleanOnce(), 1);
      const one = await s.api('GET', `/repos/alice/app/actions/artifacts/${shortId}`, { token: alice.token });
      assert.deepEqual([one.status, (one.json as { expired: boolean }).expired], [200, true]);
      const zip = await rawGet(`${s.apiUrl}/repos/alice/app/actions/artifacts/${shortId}/zip`, alice.token);
      assert.equal(zip.status, 404);
      const still = await rawGet(`${s.apiUrl}/repos/alice/app/actions/artifacts/${upload.id}/zip`, alice.token);
      assert.equal(still.status, 200, 'the 90-day artifact stays');

      const page = await s.api('GET', '/repos/alice/app/actions/artifacts?limit=1', { token: alice.token });
      assert.equal(page.status, 200);
      assert.deepEqual(
        (page.json as { id: number }[]).map((x) => x.id),
        [shortId],
        'newest first',
      );
      assert.equal(page.headers.get('x-total-count'), '3');
      assert.match(page.headers.get('link') ?? '', /page=2>; rel="next"/);
    });

    test("a finished task's runtime token and signed URLs open nothing", async () => {
      const [, b] = runs;
      assert.ok(b);
      const signed = await twirp('CreateArtifact', b.token, {
        workflowRunBackendId: String(b.id),
        workflowJobRunBackendId: '0',
        name: 'late',
        version: 4,
      });
      assert.equal(signed.status, 200, signed.text);
      await runner.runner.updateTask({ state: { id: BigInt(b.task.id), result: Result.SUCCESS, stoppedAt: now() } });
      const after = await twirp('ListArtifacts', b.token, { workflow_run_backend_id: String(b.id) });
      assert.deepEqual([after.status, after.text], [401, 'Error runner api getting task: task is not running']);
      const put = await fetch(
        `${(signed.json as { signedUploadUrl: string }).signedUploadUrl}&comp=block&blockid=AAAA`,
        {
          method: 'PUT',
          body: 'bytes',
        },
      );
      assert.equal(put.status, 401);
    });

    test('REST delete needs write access; a rerun marks the artifacts for deletion; the clean-up pass removes their files once', async () => {
      const [a] = runs;
      assert.ok(a);
      // Run A's own second artifact, deleted through REST.
      const small = path.join(scratch, 'small.txt');
      await fs.writeFile(small, 'small artifact\n');
      const second = await client(a.token, { op: 'upload', name: 'notes', files: [small], root: scratch });
      assert.equal(second.code, 0, second.stderr);
      const notesId = (second.result as { id: number }).id;
      const readOnly = await s.tokenFor(alice, ['read:repository']);
      assert.equal(
        (await s.api('DELETE', `/repos/alice/app/actions/artifacts/${notesId}`, { token: readOnly })).status,
        403,
      );
      const deleted = await s.api('DELETE', `/repos/alice/app/actions/artifacts/${notesId}`, { token: alice.token });
      assert.equal(deleted.status, 204, deleted.text);
      assert.equal(
        (await s.api('GET', `/repos/alice/app/actions/artifacts/${notesId}`, { token: alice.token })).status,
        404,
      );

      await runner.runner.updateTask({ state: { id: BigInt(a.task.id), result: Result.SUCCESS, stoppedAt: now() } });
      const rerun = await s.api('POST', `/repos/alice/app/actions/runs/${a.id}/rerun`, { token: alice.token });
      assert.ok(rerun.status === 200 || rerun.status === 201, rerun.text);
      const list = await s.api('GET', `/repos/alice/app/actions/runs/${a.id}/artifacts`, { token: alice.token });
      assert.deepEqual([list.json, list.headers.get('x-total-count')], [[], '0']);

      // The files of run A (<data>/actions_artifacts/<repo id>/<run id>/…); run B's artifact stays.
      const [repoFolder] = await fs.readdir(path.join(s.dataDir, 'actions_artifacts'));
      const folder = path.join(s.dataDir, 'actions_artifacts', repoFolder ?? '', String(a.id));
      const filesIn = async (dir: string): Promise<string[]> =>
        (await fs.readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => e.name);
      assert.ok((await filesIn(folder)).includes('artifact.zip'), 'the files stay until the clean-up pass');
      const deps = s.server.deps;
      const passes = [0, 1].map(
        () => new ArtifactRetention(deps.database.db, deps.clock, deps.services.artifactStorage),
      );
      const cleaned = await Promise.all(passes.map((pass) => pass.cleanOnce()));
      // build-output, notes, short (expired) and the refused upload's row: each claimed by exactly one pass.
      assert.equal((cleaned[0] ?? 0) + (cleaned[1] ?? 0), 4);
      assert.deepEqual(await filesIn(folder), []);
    });

    test("deleting the repository takes its artifacts' rows and files", async () => {
      const db = s.server.deps.database.db;
      const folder = path.join(s.dataDir, 'actions_artifacts');
      assert.equal((await fs.readdir(folder)).length, 1, "run B's artifact is still stored");
      const deleted = await s.api('DELETE', '/repos/alice/app', { token: alice.token });
      assert.equal(deleted.status, 204, deleted.text);
      assert.deepEqual(await db.selectFrom('action_artifact').select('id').execute(), []);
      assert.deepEqual(await fs.readdir(folder), []);
    });
  });
}
