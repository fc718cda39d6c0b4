// Gantry driven by emulations of the two runners people point at it
// (test/support/forgejo-runner-v12.ts, test/support/act-runner.ts): their
// connect-go transport, call sequence and reporter, with messages encoded from
// the protocol's published field numbers rather than Gantry's generated code.
// Each runs a two-job workflow whose second job reads the first one's outputs,
// end to end, through two Gantry processes on one database (a test server and
// a `gantry web` child on the same SQLite file or PostgreSQL database and data
// folder; each procedure's calls alternate between them, as behind a round
// robin proxy); forgejo-runner also as an autoscaler starts it (`job
// --handle`, FetchSingleTask), and with a FetchTask answer lost on the way,
// retried with its request key at the other process.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCurrentUserRepo, dispatchWorkflow, repoGetRunnerRegistrationToken } from '@llamaduck/forgejo-ts';
import { lockRun } from '../../src/models/action-runs.ts';
import { closeUnfinishedSteps, finishJobOfTask, finishTask } from '../../src/models/task-reports.ts';
import { ActionStatus } from '../../src/modules/actions-status.ts';
import { createActRunner } from '../support/act-runner.ts';
import { EmulatedRunner } from '../support/forgejo-runner-v12.ts';
import type { EmulatedRunnerOptions } from '../support/forgejo-runner-v12.ts';
import type { GantryChild } from '../support/gantry-child.ts';
import { startSecondProcess } from '../support/second-process.ts';
import { Result } from '../support/runner-wire.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

/**
 * Two jobs: `build` sets outputs, `deploy` needs them (ids and labels per
 * runner). Build's script carries a 20,000-byte comment, so its task's answer
 * is over 16 KiB: the runners read it gzip-compressed (deploy's, a few KiB,
 * comes plain).
 */
function pipeline(label: string): string {
  return `on: workflow_dispatch
jobs:
  build:
    runs-on: ${label}
    outputs:
      artifact: \${{ steps.pack.outputs.artifact }}
      digest: \${{ steps.pack.outputs.digest }}
    steps:
      - name: Compile
        run: |
          # ${'c'.repeat(20_000)}
          echo compiling
          echo linking
      - id: pack
        run: |
          echo "artifact=app-1.2.3.tgz" >> "$GITHUB_OUTPUT"
          echo "digest=sha256:0f3c" >> "$GITHUB_OUTPUT"
          echo packed
  deploy:
    needs: build
    runs-on: ${label}
    steps:
      - run: echo deploying \${{ needs.build.outputs.artifact }} \${{ needs.build.outputs.digest }}
`;
}

function singleJob(label: string): string {
  return `on: workflow_dispatch
jobs:
  only:
    runs-on: ${label}
    steps:
      - run: echo alone
`;
}

/** One job that sets one output. */
function withOutput(label: string): string {
  return `on: workflow_dispatch
jobs:
  only:
    runs-on: ${label}
    outputs:
      artifact: \${{ steps.pack.outputs.artifact }}
    steps:
      - id: pack
        run: echo "artifact=late.tgz" >> "$GITHUB_OUTPUT"
`;
}

const WORKFLOWS: Record<string, string> = {
  'late.yml': withOutput('emu-late'),
  'nul.yml': withOutput('emu-nul'),
  'forgejo.yml': pipeline('emu-forgejo'),
  'act.yml': pipeline('emu-act'),
  'handle.yml': singleJob('emu-handle'),
  'key.yml': singleJob('emu-key'),
};

interface RunJson {
  id: number;
  status: string;
}

interface JobRow {
  id: number;
  job_id: string;
  status: number;
  task_id: number;
  handle: string;
}

/** Fast settings for the timers that only make the real runners slow (the sequence stays the same). */
const QUICK: Partial<EmulatedRunnerOptions> = { stepMs: 150, closeRetryDelayMs: 100 };

for (const dialect of testDialects()) {
  describe(`runner emulations end to end [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let work: WorkDir;
    let registrationToken: string;
    /** The second Gantry process. */
    let second: GantryChild;

    const db = () => s.server.deps.database.db;

    const dispatch = async (file: string): Promise<number> => {
      const res = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'app', workflowfilename: file },
        body: { ref: 'main', inputs: {}, return_run_info: true },
      });
      assert.equal(res.status, 201, JSON.stringify(res.error));
      return (res.data as { id: number }).id;
    };

    const runStatus = async (runId: number): Promise<string> => {
      const res = await s.api('GET', `/repos/alice/app/actions/runs/${runId}`, { token: alice.token });
      assert.equal(res.status, 200, res.text);
      return (res.json as RunJson).status;
    };

    const jobsOf = (runId: number): Promise<JobRow[]> =>
      db()
        .selectFrom('action_run_job')
        .select(['id', 'job_id', 'status', 'task_id', 'handle'])
        .where('run_id', '=', runId)
        .orderBy('id')
        .execute();

    const outputsOf = async (taskId: number): Promise<Record<string, string>> => {
      const rows = await db()
        .selectFrom('action_task_output')
        .select(['output_key', 'output_value'])
        .where('task_id', '=', taskId)
        .execute();
      return Object.fromEntries(rows.map((row) => [row.output_key, row.output_value]));
    };

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      assert.equal(
        (await createCurrentUserRepo({ client: alice.client, body: { name: 'app', private: true } })).status,
        201,
      );
      work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      await work.commit(
        Object.fromEntries(Object.entries(WORKFLOWS).map(([file, text]) => [`.forgejo/workflows/${file}`, text])),
        'Add workflows',
      );
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      const res = await repoGetRunnerRegistrationToken({ client: alice.client, path: { owner: 'alice', repo: 'app' } });
      assert.equal(res.status, 200);
      registrationToken = (res.data as { token: string }).token;
      second = await startSecondProcess(s);
    });

    after(async () => {
      await second?.stop();
      await work.remove();
      await s.stop();
    });

    /** Runs pipeline(label) with `runner` (capacity 2) and checks what the user and the runner see. */
    async function runPipeline(file: string, runner: EmulatedRunner): Promise<void> {
      await runner.register(registrationToken);
      const runId = await dispatch(file);
      const daemon = runner.daemon();
      try {
        const records = await runner.waitForTasks(2, 60_000);
        const [build, deploy] = records;
        assert.ok(build && deploy);
        assert.equal(Object.keys(build.task.needs).length, 0);
        // The dependant got the outputs through Task.needs, encoded as the runner reads them.
        assert.deepEqual(deploy.task.needs, {
          build: { outputs: { artifact: 'app-1.2.3.tgz', digest: 'sha256:0f3c' }, result: Result.success },
        });
        for (const record of records) {
          assert.equal(record.remoteResult, Result.success, `${runner.flavour.name}: the server agrees on the result`);
          assert.equal(
            record.closeAttempts,
            1,
            `${runner.flavour.name}: the closing report is done at its first attempt`,
          );
          assert.deepEqual(record.unacknowledgedOutputs, []);
        }
        assert.equal(await runStatus(runId), 'success');
        const jobs = await jobsOf(runId);
        assert.deepEqual(
          jobs.map((job) => [job.job_id, job.status]),
          [
            ['build', 1],
            ['deploy', 1],
          ],
        );
        assert.deepEqual(await outputsOf(build.task.id), { artifact: 'app-1.2.3.tgz', digest: 'sha256:0f3c' });
        // The stored log holds every line the runner had acknowledged, archived after no_more.
        for (const record of records) {
          const task = await db()
            .selectFrom('action_task')
            .select(['log_length', 'log_in_storage'])
            .where('id', '=', record.task.id)
            .executeTakeFirstOrThrow();
          assert.equal(task.log_length, record.logAck);
          assert.equal(task.log_in_storage, 1);
        }
        const lines: string[] = [];
        for await (const line of s.server.deps.services.taskReports.readLog(deploy.task.id)) lines.push(line);
        assert.ok(
          lines.some((line) => line.endsWith('deploying app-1.2.3.tgz sha256:0f3c')),
          lines.join('\n'),
        );
        // The row sent with no_more is the last one stored (act_runner's is empty).
        assert.match(lines.at(-1) ?? '', runner.flavour.name === 'act_runner' ? /^\S+ $/ : /^\S+ Job succeeded$/);
      } finally {
        runner.stop();
        await daemon;
      }
      // What the transport did, as the real client does it.
      const fetches = runner.calls.filter((c) => c.procedure === 'FetchTask');
      assert.ok(fetches.length >= 2);
      assert.ok(fetches.every((c) => c.timeoutMs === 5000));
      assert.ok(
        fetches.some((c) => c.encoding === 'gzip'),
        'a task over 16 KiB (build) comes gzip-compressed',
      );
      assert.equal(new Set(runner.calls.map((c) => new URL(c.url).port)).size, 2, 'both processes served the runner');
      assert.deepEqual(
        runner.calls.slice(0, 3).map((c) => c.procedure),
        ['Ping', 'Register', 'Declare'],
      );
    }

    test('forgejo-runner v12 (daemon, capacity 2) runs a two-job workflow whose second job uses the outputs of the first', async () => {
      const runner = new EmulatedRunner({
        ...QUICK,
        urls: [s.url, second.url],
        name: 'emu-forgejo',
        labels: ['emu-forgejo:docker://node:20-bookworm'],
        capacity: 2,
      });
      await runPipeline('forgejo.yml', runner);
      assert.ok(
        runner.calls.filter((c) => c.procedure === 'FetchTask').every((c) => c.requestKey !== undefined),
        'forgejo-runner 2026 sends a request key',
      );
    });

    test('act_runner runs the same workflow: capabilities declared, outputs sent before the result, an empty last row with no_more', async () => {
      const runner = createActRunner({
        ...QUICK,
        urls: [s.url, second.url],
        name: 'emu-act',
        labels: ['emu-act:host'],
        capacity: 2,
      });
      await runPipeline('act.yml', runner);
    });

    /** What Forgejo's StopTask does to a running job (Gantry has no cancel endpoint yet). */
    const cancelServerSide = async (taskId: number): Promise<void> => {
      const task = await db()
        .selectFrom('action_task')
        .select(['id', 'job_id'])
        .where('id', '=', taskId)
        .executeTakeFirstOrThrow();
      const job = await db()
        .selectFrom('action_run_job')
        .select(['id', 'run_id'])
        .where('id', '=', task.job_id)
        .executeTakeFirstOrThrow();
      const at = Math.floor(Date.now() / 1000);
      await db()
        .transaction()
        .execute(async (tx) => {
          await lockRun(tx, job.run_id);
          assert.ok(await finishTask(tx, task.id, ActionStatus.cancelled, at));
          await closeUnfinishedSteps(tx, task.id, ActionStatus.cancelled, at);
          assert.ok(await finishJobOfTask(tx, job.id, task.id, ActionStatus.cancelled, at));
          await s.server.deps.services.taskReports.runProgress.settle(tx, job.run_id, [job.id]);
        });
    };

    /** Runs `file` (one job with one output) with one forgejo-runner until its reporter closes. */
    async function runOne(file: string, label: string, onJobEnd: EmulatedRunnerOptions['onJobEnd']) {
      const runId = await dispatch(file);
      const runner = new EmulatedRunner({
        ...QUICK,
        urls: [s.url],
        name: label,
        labels: [label],
        fetchIntervalMs: 200,
        onJobEnd,
      });
      await runner.register(registrationToken);
      const daemon = runner.daemon();
      try {
        const [record] = await runner.waitForTasks(1, 30_000);
        assert.ok(record);
        return { runId, record };
      } finally {
        runner.stop();
        await daemon;
      }
    }

    test('a report after the end (the job was cancelled as its last step ended) still stores the outputs, and the runner is done at once', async () => {
      const { runId, record } = await runOne('late.yml', 'emu-late', (task) => cancelServerSide(task.id));
      assert.equal(record.localResult, Result.success);
      assert.equal(record.remoteResult, Result.cancelled, 'the server keeps its own result');
      assert.deepEqual(record.unacknowledgedOutputs, []);
      assert.equal(record.closeAttempts, 1, 'no retries holding a capacity slot');
      assert.deepEqual(await outputsOf(record.task.id), { artifact: 'late.tgz' });
      assert.equal((await jobsOf(runId))[0]?.status, ActionStatus.cancelled);
      assert.equal(await runStatus(runId), 'cancelled');
    });

    test('outputs carrying NUL are stored with U+FFFD in its place and acknowledged under the key the runner sent', async () => {
      const { runId, record } = await runOne('nul.yml', 'emu-nul', (_task, outputs) => {
        outputs.blob = 'a\u0000b';
        outputs['k\u0000ey'] = 'v';
      });
      assert.equal(record.remoteResult, Result.success);
      assert.deepEqual(record.unacknowledgedOutputs, []);
      assert.equal(record.closeAttempts, 1);
      assert.deepEqual(await outputsOf(record.task.id), { artifact: 'late.tgz', blob: 'a\uFFFDb', 'k\uFFFDey': 'v' });
      assert.equal(await runStatus(runId), 'success');
    });

    test('a FetchTask answer lost on the way: the retry with the same request key reaches the other Gantry process and gets the same task', async () => {
      const runId = await dispatch('key.yml');
      // The first FetchTask goes to the test server, which claims the job, and its
      // answer is lost; the retry goes (round robin) to the child process.
      const runner = new EmulatedRunner({
        ...QUICK,
        urls: [s.url, second.url],
        name: 'emu-key',
        labels: ['emu-key'],
        fetchIntervalMs: 200,
        loseAnswer: (procedure, attempt) => procedure === 'FetchTask' && attempt === 1,
      });
      await runner.register(registrationToken);
      const daemon = runner.daemon();
      try {
        const [record] = await runner.waitForTasks(1, 20_000);
        assert.ok(record);
        assert.equal(record.remoteResult, Result.success);
        assert.equal(record.closeAttempts, 1);
      } finally {
        runner.stop();
        await daemon;
      }
      const [lost, retry] = runner.calls.filter((c) => c.procedure === 'FetchTask');
      assert.ok(lost && retry);
      assert.equal(retry.requestKey, lost.requestKey, 'the retry carries the same key');
      assert.notEqual(new URL(retry.url).port, new URL(lost.url).port, 'and reached the other process');
      const [job] = await jobsOf(runId);
      assert.equal(job?.status, ActionStatus.success);
      const tasks = await db()
        .selectFrom('action_task')
        .select('id')
        .where('job_id', '=', job?.id ?? 0)
        .execute();
      assert.deepEqual(
        tasks.map((t) => t.id),
        [runner.records[0]?.task.id],
        'one claim, handed out twice',
      );
      assert.equal(await runStatus(runId), 'success');
    });

    test('forgejo-runner job --handle (what autoscalers start): FetchSingleTask answers the job in actions-proto v0.7.0 numbering', async () => {
      const runId = await dispatch('handle.yml');
      const [job] = await jobsOf(runId);
      assert.ok(job && job.handle !== '');
      const runner = new EmulatedRunner({
        ...QUICK,
        urls: [s.url],
        name: 'emu-handle',
        labels: ['emu-handle'],
        ephemeral: true,
        fetchIntervalMs: 200,
      });
      await runner.register(registrationToken);
      const record = await runner.runSingle(job.handle, 10_000);
      assert.equal(record.task.workflowPayload.includes('only:'), true);
      assert.equal(record.remoteResult, Result.success);
      assert.equal(record.closeAttempts, 1);
      assert.equal(await runStatus(runId), 'success');
    });
  });
}
