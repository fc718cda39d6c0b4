// Jobs and logs of a run as a user reads them (Forgejo 16's ListActionRunJobs,
// GetActionJobLogs, GetActionRunLogs; Gitea's GetWorkflowJob), with a runner
// streaming over the real Connect protocol: the log while the job runs (what
// has been acknowledged) and after it ended (from the gzip archive),
// byte-identical to `<RFC 3339 time, 7 fractional digits> <content>` per line
// the runner sent; ranges, attempts, the run's zip and the 404 texts.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { createCurrentUserRepo, dispatchWorkflow, repoGetRunnerRegistrationToken } from '@llamaduck/forgejo-ts';
import { Result } from '../../src/gen/runner/v1/messages_pb.ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { decodeTask, registerRunner } from '../support/runner-client.ts';
import type { DecodedTask, RunnerClient } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';
import { readZip } from '../support/zip-reader.ts';

const LOG_LINES = 10_000;
const BATCH = 1_000;
/** Sent before the job ends: the log endpoint must show exactly these while it runs. */
const LIVE_LINES = 4_000;

const WORKFLOW = [
  'on: workflow_dispatch',
  'jobs:',
  '  build:',
  '    runs-on: jobs-logs',
  '    steps:',
  '      - run: make',
  '      - run: make check',
  '  never:',
  '    runs-on: no-such-runner',
  '    steps:',
  '      - run: echo never',
  '',
].join('\n');

/** The documented line format, computed here independently of the server's formatter. */
function expectedLine(ms: number, content: string): string {
  return `${new Date(ms).toISOString().replace(/Z$/, '0000Z')} ${content}\n`;
}

const base = Date.UTC(2026, 10, 25, 12, 0, 0);
const rowTime = (i: number) => base + i * 7;
const rowContent = (i: number) => (i % 997 === 0 ? `step output ${i}: ✓ naïve “quoted” \t tab` : `line ${i}`);
const row = (i: number) => ({
  time: { seconds: BigInt(Math.floor(rowTime(i) / 1000)), nanos: (rowTime(i) % 1000) * 1_000_000 },
  content: rowContent(i),
});
const expectedText = (lines: number) =>
  Array.from({ length: lines }, (_, i) => expectedLine(rowTime(i), rowContent(i))).join('');

const now = () => ({ seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 });

interface RawResponse {
  status: number;
  headers: Headers;
  body: Buffer;
}

for (const dialect of testDialects()) {
  describe(`jobs and logs API [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let bob: TestUser;
    let work: WorkDir;
    let runId: number;
    let buildJobId: number;
    let neverJobId: number;
    let runner: RunnerClient;
    let task: DecodedTask;

    const raw = async (
      path: string,
      options: { token?: string; headers?: Record<string, string> } = {},
    ): Promise<RawResponse> => {
      const headers: Record<string, string> = { ...options.headers };
      if (options.token !== undefined) headers.authorization = `token ${options.token}`;
      const res = await fetch(`${s.apiUrl}${path}`, { headers });
      return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
    };
    const logOf = (jobId: number, query = '', headers: Record<string, string> = {}) =>
      raw(`/repos/alice/app/actions/jobs/${jobId}/logs${query}`, { token: alice.token, headers });
    const message = (res: RawResponse) => (JSON.parse(res.body.toString()) as { message: string }).message;
    const sendLines = async (from: number, to: number, noMore = false) =>
      Number(
        (
          await runner.runner.updateLog({
            taskId: BigInt(task.id),
            index: BigInt(from),
            rows: Array.from({ length: to - from }, (_, k) => row(from + k)),
            noMore,
          })
        ).ackIndex,
      );

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      bob = await s.createUser('bob');
      assert.equal(
        (await createCurrentUserRepo({ client: alice.client, body: { name: 'app', private: false } })).status,
        201,
      );
      assert.equal(
        (await createCurrentUserRepo({ client: alice.client, body: { name: 'vault', private: true } })).status,
        201,
      );
      work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      await work.commit({ '.forgejo/workflows/logs.yml': WORKFLOW }, 'Add workflow');
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      const token = await repoGetRunnerRegistrationToken({
        client: alice.client,
        path: { owner: 'alice', repo: 'app' },
      });
      runner = await registerRunner(s.url, (token.data as { token: string }).token, { labels: ['jobs-logs'] });
      const dispatched = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'app', workflowfilename: 'logs.yml' },
        body: { ref: 'main', inputs: {}, return_run_info: true },
      });
      assert.equal(dispatched.status, 201, JSON.stringify(dispatched.error));
      runId = (dispatched.data as { id: number }).id;
      const jobs = await s.api('GET', `/repos/alice/app/actions/runs/${runId}/jobs`, { token: alice.token });
      assert.equal(jobs.status, 200, jobs.text);
      [buildJobId, neverJobId] = (jobs.json as { id: number }[]).map((job) => job.id) as [number, number];
    });

    after(async () => {
      await work.remove();
      await s.stop();
    });

    test('the jobs of a run: a bare array by id with run_id, unpaginated; 404 for unknown and foreign runs', async () => {
      const res = await s.api('GET', `/repos/alice/app/actions/runs/${runId}/jobs`, { token: alice.token });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-total-count'), null, 'Forgejo sends no total for this list');
      const jobs = res.json as Record<string, unknown>[];
      assert.deepEqual(
        jobs.map((job) => Object.keys(job)),
        [0, 1].map(() => [
          'id',
          'run_id',
          'attempt',
          'handle',
          'repo_id',
          'owner_id',
          'name',
          'needs',
          'runs_on',
          'task_id',
          'status',
        ]),
      );
      assert.deepEqual(
        jobs.map((job) => [job.id, job.run_id, typeof job.attempt, job.name, job.needs, job.runs_on, job.status]),
        [
          [buildJobId, runId, 'number', 'build', null, ['jobs-logs'], 'waiting'],
          [neverJobId, runId, 'number', 'never', null, ['no-such-runner'], 'waiting'],
        ],
      );
      assert.ok(buildJobId < neverJobId);

      const unknown = await s.api('GET', '/repos/alice/app/actions/runs/999999/jobs', { token: alice.token });
      assert.deepEqual(
        [unknown.status, (unknown.json as { message: string }).message],
        [404, 'run with id 999999: resource does not exist'],
      );
      const foreign = await s.api('GET', `/repos/alice/vault/actions/runs/${runId}/jobs`, { token: alice.token });
      assert.deepEqual(
        [foreign.status, (foreign.json as { message: string }).message],
        [404, 'resource does not exist'],
      );
    });

    test('a job never started: 404 "job has not been executed yet", an empty steps list, and Forgejo\'s 404 texts for unknown jobs and attempts', async () => {
      const notRun = await logOf(neverJobId);
      assert.deepEqual([notRun.status, message(notRun)], [404, 'job has not been executed yet']);
      const unknown = await logOf(999_999);
      assert.deepEqual([unknown.status, message(unknown)], [404, 'run job with id 999999: resource does not exist']);
      const foreign = await raw(`/repos/alice/vault/actions/jobs/${neverJobId}/logs`, { token: alice.token });
      assert.deepEqual([foreign.status, message(foreign)], [404, 'resource does not exist']);
      const noAttempt = await logOf(neverJobId, '?attempt=1');
      assert.deepEqual(
        [noAttempt.status, message(noAttempt)],
        [404, `task with job_id ${neverJobId} and attempt 1: resource does not exist`],
      );

      const job = await s.api('GET', `/repos/alice/app/actions/jobs/${neverJobId}`, { token: alice.token });
      assert.equal(job.status, 200, job.text);
      const body = job.json as Record<string, unknown>;
      assert.deepEqual(
        [body.status, body.conclusion, body.steps, body.runner_id, body.started_at],
        ['queued', undefined, [], undefined, '1970-01-01T00:00:00Z'],
      );
      const missing = await s.api('GET', '/repos/alice/app/actions/jobs/999999', { token: alice.token });
      assert.deepEqual(
        [missing.status, (missing.json as { message: string }).message],
        [404, 'run job with id 999999: resource does not exist'],
      );
    });

    test('a runner streams 10,000 lines: while the job runs the acknowledged prefix is served, after it ended the archive, byte-identical', async () => {
      const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(fetched.task, 'the build job is handed out');
      task = decodeTask(fetched.task as Task);
      await runner.runner.updateTask({
        state: {
          id: BigInt(task.id),
          result: Result.UNSPECIFIED,
          startedAt: now(),
          steps: [{ id: 0n, result: Result.UNSPECIFIED, startedAt: now(), logIndex: 0n, logLength: 0n }],
        },
      });
      for (let at = 0; at < LIVE_LINES; at += BATCH) assert.equal(await sendLines(at, at + BATCH), at + BATCH);

      // Running: the log is exactly what the runner has been acknowledged.
      const live = await logOf(buildJobId);
      assert.equal(live.status, 200, live.body.toString().slice(0, 200));
      assert.equal(live.headers.get('content-type'), 'text/plain; charset=utf-8');
      assert.equal(live.headers.get('accept-ranges'), 'bytes');
      assert.equal(live.headers.get('content-disposition'), `attachment; filename="job-${buildJobId}-attempt-1.log"`);
      assert.ok(live.headers.get('last-modified'));
      const liveText = expectedText(LIVE_LINES);
      assert.equal(live.body.toString('utf8'), liveText);
      assert.equal(live.headers.get('content-length'), String(Buffer.byteLength(liveText)));
      // Bytes past the committed size (a write whose commit never came, e.g. a crash) are never served.
      const repoId =
        (
          (await s.api('GET', `/repos/alice/app/actions/runs/${runId}/jobs`, { token: alice.token })).json as {
            repo_id: number;
          }[]
        )[0]?.repo_id ?? 0;
      const plainFile = path.join(
        s.dataDir,
        'actions_log',
        String(repoId),
        (task.id % 256).toString(16).padStart(2, '0'),
        `${task.id}.log`,
      );
      await fs.appendFile(plainFile, 'uncommitted bytes\n');
      const afterStray = await logOf(buildJobId);
      assert.equal(afterStray.body.toString('utf8'), liveText, 'only the acknowledged lines');
      const liveZip = readZip((await raw(`/repos/alice/app/actions/runs/${runId}/logs`, { token: alice.token })).body);
      assert.equal(
        liveZip[0]?.data.toString('utf8'),
        liveText,
        "the run's zip too holds only the acknowledged lines of a running job",
      );
      const liveRange = await logOf(buildJobId, '', { range: 'bytes=0-99' });
      assert.equal(liveRange.status, 206);
      assert.equal(liveRange.headers.get('content-range'), `bytes 0-99/${Buffer.byteLength(liveText)}`);
      assert.ok(liveRange.body.equals(Buffer.from(liveText).subarray(0, 100)));

      const running = (await s.api('GET', `/repos/alice/app/actions/jobs/${buildJobId}`, { token: alice.token }))
        .json as {
        status: string;
        runner_name?: string;
        steps: { name: string; number: number; status: string; conclusion?: string }[];
      };
      assert.equal(running.status, 'in_progress');
      assert.deepEqual(
        running.steps.map((step) => [step.number, step.status, step.conclusion]),
        [
          [0, 'in_progress', undefined],
          [1, 'queued', undefined],
        ],
        "each step's own status, not the job's",
      );

      for (let at = LIVE_LINES; at < LOG_LINES; at += BATCH)
        assert.equal(await sendLines(at, at + BATCH, at + BATCH === LOG_LINES), at + BATCH);
      const done = await runner.runner.updateTask({
        state: {
          id: BigInt(task.id),
          result: Result.SUCCESS,
          startedAt: now(),
          stoppedAt: now(),
          steps: [
            { id: 0n, result: Result.SUCCESS, startedAt: now(), stoppedAt: now(), logIndex: 0n, logLength: 6000n },
            { id: 1n, result: Result.SKIPPED, logIndex: 6000n, logLength: 0n },
          ],
        },
      });
      assert.equal(done.state?.result, Result.SUCCESS);
      const stored = await s.server.deps.database.db
        .selectFrom('action_task')
        .select('log_in_storage')
        .where('id', '=', task.id)
        .executeTakeFirstOrThrow();
      assert.equal(Number(stored.log_in_storage), 1, 'the log is archived');

      const full = expectedText(LOG_LINES);
      const fullBytes = Buffer.from(full, 'utf8');
      const archived = await logOf(buildJobId);
      assert.equal(archived.status, 200);
      assert.equal(archived.headers.get('content-length'), String(fullBytes.length));
      assert.deepEqual(
        [archived.headers.get('cache-control'), archived.headers.get('x-request-id') !== null],
        ['max-age=0, private, must-revalidate, no-transform', true],
        'written past Fastify, the log still carries the headers every API answer has',
      );
      assert.ok(
        archived.body.equals(fullBytes),
        'the archived log is byte-identical to what the runner sent, in the documented format',
      );

      const ended = (await s.api('GET', `/repos/alice/app/actions/jobs/${buildJobId}`, { token: alice.token }))
        .json as Record<string, unknown> & {
        steps: { name: string; status: string; conclusion?: string }[];
      };
      assert.deepEqual(
        [ended.status, ended.conclusion, ended.run_id, ended.run_attempt, ended.name, ended.labels, ended.head_branch],
        ['completed', 'success', runId, 1, 'build', ['jobs-logs'], 'main'],
      );
      assert.equal(typeof ended.runner_id, 'number');
      assert.equal(ended.url, `${s.rootUrl}api/v1/repos/alice/app/actions/jobs/${buildJobId}`);
      assert.equal(ended.run_url, `${s.rootUrl}api/v1/repos/alice/app/actions/runs/${runId}`);
      assert.deepEqual(
        ended.steps.map((step) => [step.status, step.conclusion]),
        [
          ['completed', 'success'],
          ['completed', 'skipped'],
        ],
        "each step's own result (Gitea would repeat the job's success)",
      );
    });

    test('ranges on the archived log are served by skipping decompressed bytes; unsatisfiable ranges answer 416', async () => {
      const fullBytes = Buffer.from(expectedText(LOG_LINES), 'utf8');
      const size = fullBytes.length;
      for (const [header, start, end] of [
        ['bytes=0-0', 0, 0],
        ['bytes=100000-100199', 100_000, 100_199],
        [`bytes=${size - 10}-`, size - 10, size - 1],
        ['bytes=-50', size - 50, size - 1],
        [`bytes=200-${size + 1000}`, 200, size - 1],
      ] as const) {
        const res = await logOf(buildJobId, '', { range: header });
        assert.equal(res.status, 206, header);
        assert.equal(res.headers.get('content-range'), `bytes ${start}-${end}/${size}`, header);
        assert.equal(res.headers.get('content-length'), String(end - start + 1), header);
        assert.ok(res.body.equals(fullBytes.subarray(start, end + 1)), header);
      }
      for (const header of [`bytes=${size}-`, 'bytes=9-3', 'lines=1-2']) {
        const res = await logOf(buildJobId, '', { range: header });
        assert.equal(res.status, 416, header);
        assert.equal(res.headers.get('content-range'), `bytes */${size}`, header);
      }
    });

    test('attempt selection: attempt 1 explicitly is the same log; an unknown or unparsable attempt is a 404', async () => {
      const current = await logOf(buildJobId);
      const first = await logOf(buildJobId, '?attempt=1');
      assert.equal(first.status, 200);
      assert.ok(first.body.equals(current.body));
      assert.equal(first.headers.get('content-disposition'), `attachment; filename="job-${buildJobId}-attempt-1.log"`);
      const second = await logOf(buildJobId, '?attempt=2');
      assert.deepEqual(
        [second.status, message(second)],
        [404, `task with job_id ${buildJobId} and attempt 2: resource does not exist`],
      );
      const head = await fetch(`${s.apiUrl}/repos/alice/app/actions/jobs/${buildJobId}/logs`, {
        method: 'HEAD',
        headers: { authorization: `token ${alice.token}` },
      });
      assert.deepEqual(
        [head.status, head.headers.get('content-length'), (await head.arrayBuffer()).byteLength],
        [200, String(current.body.length), 0],
        'HEAD: the size, no body',
      );
      const garbage = await logOf(buildJobId, '?attempt=abc');
      assert.deepEqual(
        [garbage.status, message(garbage)],
        [404, `task with job_id ${buildJobId} and attempt 0: resource does not exist`],
      );
    });

    test('the run logs zip: one entry per job with Forgejo names, a .MISSING entry for the job never started', async () => {
      const res = await raw(`/repos/alice/app/actions/runs/${runId}/logs`, { token: alice.token });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'application/zip');
      assert.equal(res.headers.get('content-disposition'), `attachment; filename="run-${runId}-logs.zip"`);
      const entries = readZip(res.body);
      // Names carry each job's current attempt, as the jobs list shows it.
      const listed = (await s.api('GET', `/repos/alice/app/actions/runs/${runId}/jobs`, { token: alice.token }))
        .json as { name: string; id: number; attempt: number }[];
      assert.deepEqual(
        listed.map((job) => job.id),
        [buildJobId, neverJobId],
      );
      assert.equal(listed[0]?.attempt, 1, 'the build job ran once');
      assert.deepEqual(
        entries.map((entry) => entry.name),
        listed.map(
          (job) => `${job.name}-${job.id}-attempt-${job.attempt}.${job.id === neverJobId ? 'MISSING' : 'log'}`,
        ),
      );
      assert.ok(entries[0]?.data.equals(Buffer.from(expectedText(LOG_LINES), 'utf8')));
      assert.equal(entries[1]?.data.toString(), 'job has not been executed yet\n');

      const unknown = await raw('/repos/alice/app/actions/runs/999999/logs', { token: alice.token });
      assert.deepEqual([unknown.status, message(unknown)], [404, 'run with id 999999: resource does not exist']);
    });

    test('anonymous callers read jobs and logs of a public repository; on a private one they get what the runs routes answer', async () => {
      assert.equal((await raw(`/repos/alice/app/actions/runs/${runId}/jobs`)).status, 200);
      assert.equal((await raw(`/repos/alice/app/actions/jobs/${buildJobId}`)).status, 200);
      assert.equal((await raw(`/repos/alice/app/actions/jobs/${buildJobId}/logs`)).status, 200);
      assert.equal((await raw(`/repos/alice/app/actions/runs/${runId}/logs`)).status, 200);
      for (const token of [undefined, bob.token]) {
        const runs = await raw('/repos/alice/vault/actions/runs/1', { token });
        for (const path of [
          '/repos/alice/vault/actions/runs/1/jobs',
          '/repos/alice/vault/actions/jobs/1',
          '/repos/alice/vault/actions/jobs/1/logs',
          '/repos/alice/vault/actions/runs/1/logs',
        ]) {
          const res = await raw(path, { token });
          assert.deepEqual(
            [res.status, res.body.toString()],
            [runs.status, runs.body.toString()],
            `${path} as ${token === undefined ? 'anonymous' : 'bob'}`,
          );
        }
      }
    });
  });
}
