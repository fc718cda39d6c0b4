// What runners report (UpdateTask, UpdateLog), log storage and housekeeping,
// at the service level on every database: fixtures are built through the
// models, time is a fake clock, and the Connect layer (tested elsewhere) only
// maps protobuf to these plain values.
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { ActionStatus } from '../../src/modules/actions-status.ts';
import type { Clock } from '../../src/modules/clock.ts';
import { AppError } from '../../src/modules/errors.ts';
import { insertRunWithJobs } from '../../src/models/action-runs.ts';
import type { ActionRunJob } from '../../src/models/action-runs.ts';
import type { Db } from '../../src/models/database.ts';
import { findRunnerById, insertRunner } from '../../src/models/runners.ts';
import type { Runner } from '../../src/models/runners.ts';
import { ActionsHousekeeping } from '../../src/services/actions/housekeeping.ts';
import { RunProgress } from '../../src/services/actions/run-progress.ts';
import { DomainEvents } from '../../src/services/events.ts';
import type { DomainEvent } from '../../src/services/events.ts';
import { formatLogLine, formatLogTime, MAX_LOG_LINE_BYTES } from '../../src/services/actions/task-logs.ts';
import type { LogRow } from '../../src/services/actions/task-logs.ts';
import { TaskReportService } from '../../src/services/actions/task-reports.ts';
import type { StepReport } from '../../src/services/actions/task-reports.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer } from '../support/server.ts';

const T0 = 1_700_000_000;
const REPO_ID = 7;
const OWNER_ID = 3;

interface FakeClock extends Clock {
  now: number;
  advance(seconds: number): void;
}

function fakeClock(start = T0): FakeClock {
  const clock = {
    now: start,
    nowSec: () => clock.now,
    nowMs: () => clock.now * 1000,
    advance: (seconds: number) => {
      clock.now += seconds;
    },
  };
  return clock;
}

function isKind(kind: string): (error: unknown) => boolean {
  return (error) => {
    assert.ok(error instanceof AppError, `expected an AppError, got ${String(error)}`);
    assert.equal(error.kind, kind);
    return true;
  };
}

interface JobSpec {
  jobId: string;
  needs?: string[];
  hasIf?: boolean;
}

/** Builds runs, runners and tasks through the models, as FetchTask would leave them. */
class Fixtures {
  constructor(
    private readonly db: Db,
    private readonly clock: FakeClock,
    private readonly progress: RunProgress,
  ) {}

  async runner(ephemeral = false): Promise<Runner> {
    const uuid = randomUUID();
    return insertRunner(
      this.db,
      {
        uuid,
        name: `runner-${uuid.slice(0, 8)}`,
        scope: { ownerId: 0, repoId: 0 },
        ephemeral,
        tokenHash: createHash('sha256').update(uuid).digest('hex'),
        tokenLastEight: uuid.slice(-8),
      },
      this.clock.nowSec(),
    );
  }

  /** A run whose jobs without needs wait and the others are blocked (dispatched, unless `event` says). */
  async run(jobs: JobSpec[], event = 'workflow_dispatch'): Promise<{ runId: number; jobs: Map<string, ActionRunJob> }> {
    const created = await this.db.transaction().execute((tx) =>
      insertRunWithJobs(
        tx,
        {
          repoId: REPO_ID,
          ownerId: OWNER_ID,
          title: 'ci',
          workflowId: 'ci.yml',
          workflowDirectory: '.forgejo/workflows',
          triggerUserId: 1,
          ref: 'refs/heads/main',
          commitSha: 'a'.repeat(40),
          event,
          eventPayload: '{}',
          triggerEvent: event,
          status: ActionStatus.waiting,
        },
        jobs.map((job) => ({
          name: job.jobId,
          jobId: job.jobId,
          handle: randomUUID(),
          needs: job.needs ?? [],
          runsOn: ['docker'],
          hasIf: job.hasIf ?? false,
          workflowPayload: `jobs: {${job.jobId}: {}}`,
          status: (job.needs ?? []).length > 0 ? ActionStatus.blocked : ActionStatus.waiting,
        })),
        this.clock.nowSec(),
      ),
    );
    return { runId: created.run.id, jobs: new Map(created.jobs.map((job) => [job.jobId, job])) };
  }

  /** Gives a waiting job to `runner`: a running task with `steps` waiting steps. */
  async startTask(job: ActionRunJob, runner: Runner, steps = 3): Promise<number> {
    const now = this.clock.nowSec();
    return this.db.transaction().execute(async (tx) => {
      const task = await tx
        .insertInto('action_task')
        .values({
          job_id: job.id,
          attempt: 1,
          runner_id: runner.id,
          status: ActionStatus.running,
          started: now,
          repo_id: job.repoId,
          owner_id: job.ownerId,
          commit_sha: job.commitSha,
          token_hash: null,
          created: now,
          updated: now,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      await tx
        .updateTable('action_run_job')
        .set({ task_id: task.id, status: ActionStatus.running, started: now, updated: now })
        .where('id', '=', job.id)
        .execute();
      if (steps > 0) {
        await tx
          .insertInto('action_task_step')
          .values(
            Array.from({ length: steps }, (_, index) => ({
              task_id: task.id,
              name: `step ${index}`,
              step_index: index,
              repo_id: job.repoId,
              status: ActionStatus.waiting,
              created: now,
              updated: now,
            })),
          )
          .execute();
      }
      await this.progress.settle(tx, job.runId);
      return task.id;
    });
  }

  task(id: number) {
    return this.db.selectFrom('action_task').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  }

  job(id: number) {
    return this.db.selectFrom('action_run_job').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  }

  runRow(id: number) {
    return this.db.selectFrom('action_run').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  }

  steps(taskId: number) {
    return this.db
      .selectFrom('action_task_step')
      .selectAll()
      .where('task_id', '=', taskId)
      .orderBy('step_index')
      .execute();
  }

  async outputs(taskId: number): Promise<Record<string, string>> {
    const rows = await this.db
      .selectFrom('action_task_output')
      .select(['output_key', 'output_value'])
      .where('task_id', '=', taskId)
      .execute();
    return Object.fromEntries(rows.map((row) => [row.output_key, row.output_value]));
  }

  /** Forgets every run, job and task (housekeeping tests count what they find). */
  async reset(): Promise<void> {
    for (const table of [
      'action_task_output',
      'action_task_step',
      'action_task',
      'action_run_job',
      'action_run',
      'action_run_count',
      'action_run_index',
    ] as const) {
      await this.db.deleteFrom(table).execute();
    }
  }
}

function rowsFrom(start: number, count: number, prefix = 'line'): LogRow[] {
  return Array.from({ length: count }, (_, i) => ({
    time: T0 + (start + i) / 1000,
    content: `${prefix} ${start + i}`,
  }));
}

async function collect(lines: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const line of lines) out.push(line);
  return out;
}

const stored = (rows: LogRow[]): string[] => rows.map((row) => formatLogLine(row).slice(0, -1));

function step(id: number, result: number, options: Partial<StepReport> = {}): StepReport {
  return { id, result, logIndex: 0, logLength: 0, ...options };
}

describe('log line format (Forgejo FormatLog)', () => {
  test('RFC 3339 UTC with seven fractional digits; absent time is the epoch', () => {
    assert.equal(formatLogTime(T0 + 0.5), '2023-11-14T22:13:20.5000000Z');
    assert.equal(formatLogTime(T0), '2023-11-14T22:13:20.0000000Z');
    assert.equal(formatLogTime(T0 + 0.99999999), '2023-11-14T22:13:21.0000000Z');
    assert.equal(formatLogTime(undefined), '1970-01-01T00:00:00.0000000Z');
    assert.equal(formatLogTime(1e20), '1970-01-01T00:00:00.0000000Z');
    assert.equal(formatLogLine({ time: T0, content: 'hello' }), '2023-11-14T22:13:20.0000000Z hello\n');
  });

  test('embedded newlines are escaped, content is cut at 64 KiB on a character boundary', () => {
    assert.equal(formatLogLine({ time: T0, content: 'a\nb\r\n' }), '2023-11-14T22:13:20.0000000Z a\\nb\r\\n\n');
    const long = `${'x'.repeat(MAX_LOG_LINE_BYTES - 1)}é tail`;
    const line = formatLogLine({ time: T0, content: long });
    const content = line.slice('2023-11-14T22:13:20.0000000Z '.length, -1);
    assert.equal(content, 'x'.repeat(MAX_LOG_LINE_BYTES - 1));
    assert.equal(
      formatLogLine({ time: T0, content: 'y'.repeat(MAX_LOG_LINE_BYTES + 10) }).length,
      29 + MAX_LOG_LINE_BYTES + 1,
    );
  });
});

for (const dialect of testDialects()) {
  describe(`task reports: UpdateLog and log storage [${dialect}]`, () => {
    let s: TestServer;
    let db: Db;
    let clock: FakeClock;
    let reports: TaskReportService;
    let fx: Fixtures;

    before(async () => {
      s = await startTestServer(dialect);
      db = s.server.deps.database.db;
      clock = fakeClock();
      reports = new TaskReportService(db, clock, new RunProgress(clock, new DomainEvents()), s.dataDir);
      fx = new Fixtures(db, clock, new RunProgress(clock, new DomainEvents()));
    });
    after(() => s.stop());

    const newTask = async (runner?: Runner): Promise<{ runner: Runner; taskId: number }> => {
      const owner = runner ?? (await fx.runner());
      const { jobs } = await fx.run([{ jobId: 'build' }]);
      return { runner: owner, taskId: await fx.startTask(jobs.get('build')!, owner) };
    };

    test('ack-index protocol: append, lost ack, gap, nothing new, no more, archived', async () => {
      const { runner, taskId } = await newTask();
      const all = rowsFrom(0, 25);
      const log = (index: number, rows: LogRow[], noMore = false) =>
        reports.updateLog(runner, { taskId, index, rows, noMore });

      assert.deepEqual(await log(0, []), { ackIndex: 0 });
      assert.deepEqual(await log(0, all.slice(0, 10)), { ackIndex: 10 });
      // The ack was lost: the runner resends from its last acked index with more rows.
      assert.deepEqual(await log(0, all.slice(0, 15)), { ackIndex: 15 });
      // A gap: lines 15..19 never arrived.
      assert.deepEqual(await log(20, all.slice(20, 22)), { ackIndex: 15 });
      // Only lines already stored.
      assert.deepEqual(await log(5, all.slice(5, 15)), { ackIndex: 15 });
      assert.deepEqual(await log(15, []), { ackIndex: 15 });
      assert.deepEqual(await collect(reports.readLog(taskId)), stored(all.slice(0, 15)));

      const running = await fx.task(taskId);
      assert.equal(running.log_length, 15);
      assert.equal(running.log_in_storage, 0);
      assert.equal(running.log_filename, `${REPO_ID}/${(taskId % 256).toString(16).padStart(2, '0')}/${taskId}.log`);
      assert.equal(running.log_size, stored(all.slice(0, 15)).join('\n').length + 1);

      // The gap in a final call is not archived: the runner still holds those lines.
      assert.deepEqual(await log(20, all.slice(20, 25), true), { ackIndex: 15 });
      assert.equal((await fx.task(taskId)).log_in_storage, 0);

      assert.deepEqual(await log(15, all.slice(15, 25), true), { ackIndex: 25 });
      const archived = await fx.task(taskId);
      assert.equal(archived.log_in_storage, 1);
      assert.equal(archived.log_length, 25);
      assert.equal(archived.log_filename, `${running.log_filename}.gz`);
      const root = path.join(s.dataDir, 'actions_log');
      assert.ok(existsSync(path.join(root, archived.log_filename)));
      assert.ok(!existsSync(path.join(root, running.log_filename)), 'the plain log is removed once archived');

      // New lines after the archive are refused; a repeated final call gets the ack.
      await assert.rejects(log(25, rowsFrom(25, 1)), isKind('conflict'));
      assert.deepEqual(await log(25, [], true), { ackIndex: 25 });
      assert.deepEqual(await log(10, all.slice(10, 25), true), { ackIndex: 25 });
      assert.deepEqual(await collect(reports.readLog(taskId)), stored(all));
      assert.deepEqual(await collect(reports.readLog(taskId, { fromLine: 20, limit: 3 })), stored(all.slice(20, 23)));
    });

    test('only the runner of the task may report; unknown tasks are not found', async () => {
      const { taskId } = await newTask();
      const stranger = await fx.runner();
      await assert.rejects(
        reports.updateLog(stranger, { taskId, index: 0, rows: rowsFrom(0, 1), noMore: false }),
        isKind('forbidden'),
      );
      await assert.rejects(reports.updateTask(stranger, { id: taskId, result: 0, steps: [] }, {}), isKind('forbidden'));
      await assert.rejects(
        reports.updateLog(stranger, { taskId: 987654, index: 0, rows: [], noMore: false }),
        isKind('not_found'),
      );
      await assert.rejects(reports.updateTask(stranger, { id: 987654, result: 0, steps: [] }, {}), isKind('not_found'));
      await assert.rejects(collect(reports.readLog(987654)), isKind('not_found'));
      await assert.rejects(reports.openLog(987654), isKind('not_found'));
      assert.deepEqual(await collect(await reports.openLog(taskId)), []);
      assert.equal((await fx.task(taskId)).log_length, 0);
    });

    test('10,000 lines in batches with resends, then no more: the gzip archive reads back identically', async () => {
      const { runner, taskId } = await newTask();
      const total = 10_000;
      const all: LogRow[] = Array.from({ length: total }, (_, i) => ({
        time: T0 + i * 0.0123456,
        content: i % 997 === 0 ? `multi\nline ${i} ünïcödé ✓` : `line ${i} ${'·'.repeat(i % 40)}`,
      }));
      let acked = 0;
      let batch = 0;
      while (acked < total) {
        batch += 1;
        // Every fifth call the previous ack "was lost": resend from 40 lines back.
        const from = batch % 5 === 0 ? Math.max(0, acked - 40) : acked;
        const rows = all.slice(from, Math.min(total, acked + 337));
        const { ackIndex } = await reports.updateLog(runner, { taskId, index: from, rows, noMore: false });
        assert.equal(ackIndex, from + rows.length);
        acked = ackIndex;
      }
      assert.deepEqual(await reports.updateLog(runner, { taskId, index: total, rows: [], noMore: true }), {
        ackIndex: total,
      });

      const row = await fx.task(taskId);
      assert.equal(row.log_in_storage, 1);
      const expected = stored(all);
      const file = await fs.readFile(path.join(s.dataDir, 'actions_log', row.log_filename));
      assert.deepEqual([...file.subarray(0, 2)], [0x1f, 0x8b], 'gzip');
      assert.ok(file.length < row.log_size / 2, 'compressed');
      const plain = gunzipSync(file).toString('utf8');
      assert.equal(Buffer.byteLength(plain), row.log_size);
      assert.equal(plain, `${expected.join('\n')}\n`);

      assert.deepEqual(await collect(reports.readLog(taskId)), expected);
      assert.deepEqual(await collect(reports.readLog(taskId, { fromLine: 9_990 })), expected.slice(9_990));
      assert.deepEqual(
        await collect(reports.readLog(taskId, { fromLine: 4_321, limit: 5 })),
        expected.slice(4_321, 4_326),
      );
      assert.deepEqual(await collect(reports.readLog(taskId, { limit: 0 })), []);
    });

    test('a log survives a restart; bytes a crash left past the committed size never show', async () => {
      const { runner, taskId } = await newTask();
      const all = rowsFrom(0, 300);
      assert.deepEqual(await reports.updateLog(runner, { taskId, index: 0, rows: all.slice(0, 100), noMore: false }), {
        ackIndex: 100,
      });
      const row = await fx.task(taskId);
      // A crash between the fsync and the database update of a later append.
      await fs.appendFile(
        path.join(s.dataDir, 'actions_log', row.log_filename),
        'garbage that was never acknowledged\npartial',
      );

      const restartedClock = fakeClock(clock.now + 60);
      const restarted = new TaskReportService(
        db,
        restartedClock,
        new RunProgress(restartedClock, new DomainEvents()),
        s.dataDir,
      );
      assert.deepEqual(await collect(restarted.readLog(taskId)), stored(all.slice(0, 100)));
      // The runner never got the last ack and resends from 50.
      assert.deepEqual(
        await restarted.updateLog(runner, { taskId, index: 50, rows: all.slice(50, 200), noMore: false }),
        { ackIndex: 200 },
      );
      assert.deepEqual(await collect(restarted.readLog(taskId)), stored(all.slice(0, 200)));
      assert.deepEqual(
        await restarted.updateLog(runner, { taskId, index: 200, rows: all.slice(200, 201), noMore: false }),
        { ackIndex: 201 },
      );
      assert.deepEqual(await restarted.updateLog(runner, { taskId, index: 201, rows: all.slice(201), noMore: true }), {
        ackIndex: 300,
      });
      assert.deepEqual(await collect(reports.readLog(taskId)), stored(all));
    });

    test('concurrent overlapping appends store every line once', async () => {
      const { runner, taskId } = await newTask();
      const all = rowsFrom(0, 400);
      const answers = await Promise.all([
        reports.updateLog(runner, { taskId, index: 0, rows: all.slice(0, 150), noMore: false }),
        reports.updateLog(runner, { taskId, index: 0, rows: all.slice(0, 200), noMore: false }),
        reports.updateLog(runner, { taskId, index: 0, rows: all.slice(0, 100), noMore: false }),
      ]);
      const acked = Math.max(...answers.map((a) => a.ackIndex));
      assert.deepEqual(await collect(reports.readLog(taskId)), stored(all.slice(0, acked)));
      await reports.updateLog(runner, { taskId, index: acked, rows: all.slice(acked), noMore: false });
      await Promise.all([
        reports.updateLog(runner, { taskId, index: 400, rows: [], noMore: true }),
        reports.updateLog(runner, { taskId, index: 400, rows: [], noMore: true }),
      ]);
      assert.deepEqual(await collect(reports.readLog(taskId)), stored(all));
      assert.equal((await fx.task(taskId)).log_in_storage, 1);
    });

    test('a task that never logged is archived without a file and reads empty', async () => {
      const { runner, taskId } = await newTask();
      assert.deepEqual(await reports.updateLog(runner, { taskId, index: 0, rows: [], noMore: true }), { ackIndex: 0 });
      const row = await fx.task(taskId);
      assert.equal(row.log_in_storage, 1);
      assert.equal(row.log_filename, '');
      assert.deepEqual(await collect(reports.readLog(taskId)), []);
    });
  });

  describe(`task reports: UpdateTask [${dialect}]`, () => {
    let s: TestServer;
    let db: Db;
    let clock: FakeClock;
    let reports: TaskReportService;
    let fx: Fixtures;

    before(async () => {
      s = await startTestServer(dialect);
      db = s.server.deps.database.db;
      clock = fakeClock();
      reports = new TaskReportService(db, clock, new RunProgress(clock, new DomainEvents()), s.dataDir);
      fx = new Fixtures(db, clock, new RunProgress(clock, new DomainEvents()));
    });
    after(() => s.stop());

    const tasksVersion = async (): Promise<number> => {
      const row = await db
        .selectFrom('action_tasks_version')
        .select('version')
        .where('owner_id', '=', 0)
        .where('repo_id', '=', REPO_ID)
        .executeTakeFirst();
      return row === undefined ? 0 : Number(row.version);
    };

    test('heartbeat and step progress, then success unblocks the dependant', async () => {
      const runner = await fx.runner();
      const { runId, jobs } = await fx.run([{ jobId: 'build' }, { jobId: 'test', needs: ['build'] }]);
      const build = jobs.get('build')!;
      const dependant = jobs.get('test')!;
      const taskId = await fx.startTask(build, runner);
      assert.equal((await fx.runRow(runId)).status, ActionStatus.running);

      clock.advance(30);
      const beat = await reports.updateTask(
        runner,
        {
          id: taskId,
          result: 0,
          startedAt: T0,
          steps: [
            step(0, ActionStatus.success, { startedAt: T0, stoppedAt: T0 + 5, logIndex: 0, logLength: 4 }),
            step(1, 0, { startedAt: T0 + 5, logIndex: 4, logLength: 2 }),
            step(9, 1),
          ],
        },
        {},
      );
      assert.deepEqual(beat, { result: 0, sentOutputs: [] });
      const task = await fx.task(taskId);
      assert.equal(task.updated, T0 + 30);
      assert.equal(task.status, ActionStatus.running);
      const steps = await fx.steps(taskId);
      assert.deepEqual(
        steps.map((st) => [st.status, st.log_index, st.log_length, st.started, st.stopped]),
        [
          [ActionStatus.success, 0, 4, T0 + 30, T0 + 30],
          [ActionStatus.running, 4, 2, T0 + 30, 0],
          [ActionStatus.waiting, 0, 0, 0, 0],
        ],
      );

      const versionBefore = await tasksVersion();
      clock.advance(30);
      const done = await reports.updateTask(
        runner,
        {
          id: taskId,
          result: ActionStatus.success,
          steps: [step(1, ActionStatus.success, { logIndex: 4, logLength: 3 })],
        },
        {},
      );
      assert.deepEqual(done, { result: ActionStatus.success, sentOutputs: [] });
      const finished = await fx.task(taskId);
      assert.equal(finished.status, ActionStatus.success);
      assert.equal(finished.stopped, T0 + 60);
      const job = await fx.job(build.id);
      assert.equal(job.status, ActionStatus.success);
      assert.equal(job.stopped, T0 + 60);
      assert.deepEqual(
        (await fx.steps(taskId)).map((st) => [st.status, st.log_length, st.stopped]),
        [
          [ActionStatus.success, 4, T0 + 30],
          [ActionStatus.success, 3, T0 + 60],
          // Never reported: closed with the task's result.
          [ActionStatus.success, 0, T0 + 60],
        ],
      );
      assert.equal((await fx.job(dependant.id)).status, ActionStatus.waiting);
      assert.equal((await fx.runRow(runId)).status, ActionStatus.waiting);
      assert.ok((await tasksVersion()) > versionBefore, 'runners learn of the unblocked job');

      // Done is final: a late report changes no state and gets the stored
      // result, but its outputs are stored and acknowledged (Forgejo stores
      // them regardless), so the runner stops resending them.
      clock.advance(30);
      assert.deepEqual(
        await reports.updateTask(
          runner,
          { id: taskId, result: ActionStatus.failure, steps: [step(2, ActionStatus.failure)] },
          { late: 'x' },
        ),
        {
          result: ActionStatus.success,
          sentOutputs: ['late'],
        },
      );
      assert.deepEqual(await fx.task(taskId), finished);
      assert.deepEqual(await fx.outputs(taskId), { late: 'x' });
      assert.deepEqual(
        (await reports.updateTask(runner, { id: taskId, result: ActionStatus.success, steps: [] }, { late: 'y' }))
          .sentOutputs,
        ['late'],
      );
      assert.deepEqual(await fx.outputs(taskId), { late: 'x' }, 'first write wins');
    });

    test('a failing job skips its dependants and fails the run', async () => {
      const runner = await fx.runner();
      const { runId, jobs } = await fx.run([
        { jobId: 'build' },
        { jobId: 'test', needs: ['build'] },
        { jobId: 'deploy', needs: ['test'] },
        { jobId: 'notify', needs: ['build'], hasIf: true },
      ]);
      const taskId = await fx.startTask(jobs.get('build')!, runner);
      clock.advance(10);
      const answer = await reports.updateTask(
        runner,
        {
          id: taskId,
          result: ActionStatus.failure,
          steps: [step(0, ActionStatus.success), step(1, ActionStatus.failure)],
        },
        {},
      );
      assert.equal(answer.result, ActionStatus.failure);
      assert.equal((await fx.job(jobs.get('build')!.id)).status, ActionStatus.failure);
      assert.equal((await fx.job(jobs.get('test')!.id)).status, ActionStatus.skipped);
      assert.equal((await fx.job(jobs.get('deploy')!.id)).status, ActionStatus.skipped);
      // A job with `if:` waits: the runner evaluates it.
      assert.equal((await fx.job(jobs.get('notify')!.id)).status, ActionStatus.waiting);
      assert.deepEqual(
        (await fx.steps(taskId)).map((st) => st.status),
        [ActionStatus.success, ActionStatus.failure, ActionStatus.failure],
      );
      assert.equal((await fx.runRow(runId)).status, ActionStatus.waiting);
      const notifyTask = await fx.startTask(jobs.get('notify')!, runner);
      await reports.updateTask(runner, { id: notifyTask, result: ActionStatus.success, steps: [] }, {});
      const run = await fx.runRow(runId);
      assert.equal(run.status, ActionStatus.failure);
      assert.equal(run.stopped, clock.now);
    });

    test('outputs: limits, first write wins, sentOutputs lists every stored key', async () => {
      const runner = await fx.runner();
      const { jobs } = await fx.run([{ jobId: 'build' }]);
      const taskId = await fx.startTask(jobs.get('build')!, runner);
      const first = await reports.updateTask(
        runner,
        { id: taskId, result: 0, steps: [] },
        { version: '1.0', ['k'.repeat(256)]: 'too long a key', big: 'v'.repeat(1024 * 1024 + 1) },
      );
      assert.deepEqual(first.sentOutputs, ['version']);
      const second = await reports.updateTask(
        runner,
        { id: taskId, result: 0, steps: [] },
        { version: '2.0', digest: 'sha256:abc', ['k'.repeat(255)]: 'max key' },
      );
      assert.deepEqual(new Set(second.sentOutputs), new Set(['version', 'digest', 'k'.repeat(255)]));
      const final = await reports.updateTask(
        runner,
        { id: taskId, result: ActionStatus.success, steps: [] },
        { last: 'yes', version: '3.0' },
      );
      assert.deepEqual(new Set(final.sentOutputs), new Set(['version', 'digest', 'k'.repeat(255), 'last']));
      assert.deepEqual(await fx.outputs(taskId), {
        version: '1.0',
        digest: 'sha256:abc',
        ['k'.repeat(255)]: 'max key',
        last: 'yes',
      });
    });

    test('a job cancelled server-side answers CANCELLED and closes the task', async () => {
      const runner = await fx.runner();
      const { runId, jobs } = await fx.run([{ jobId: 'build' }, { jobId: 'test', needs: ['build'] }]);
      const build = jobs.get('build')!;
      const taskId = await fx.startTask(build, runner);
      await reports.updateTask(runner, { id: taskId, result: 0, steps: [step(0, 0, { startedAt: T0 })] }, {});
      // What the cancel API does to a job whose task runs (the task learns on its next report).
      await db.transaction().execute(async (tx) => {
        await tx
          .updateTable('action_run_job')
          .set({ status: ActionStatus.cancelled, stopped: clock.now, updated: clock.now })
          .where('id', '=', build.id)
          .execute();
        await new RunProgress(clock, new DomainEvents()).settle(tx, runId);
      });
      clock.advance(5);
      const answer = await reports.updateTask(
        runner,
        { id: taskId, result: 0, steps: [step(0, 0, { startedAt: T0, logLength: 9 })] },
        {},
      );
      assert.equal(answer.result, ActionStatus.cancelled);
      const task = await fx.task(taskId);
      assert.equal(task.status, ActionStatus.cancelled);
      assert.equal(task.stopped, clock.now);
      assert.deepEqual(
        (await fx.steps(taskId)).map((st) => [st.status, st.log_length]),
        [
          [ActionStatus.cancelled, 9],
          [ActionStatus.cancelled, 0],
          [ActionStatus.cancelled, 0],
        ],
      );
      // Even a reported success cannot undo the cancel.
      assert.equal(
        (await reports.updateTask(runner, { id: taskId, result: ActionStatus.success, steps: [] }, {})).result,
        ActionStatus.cancelled,
      );
      assert.equal((await fx.job(build.id)).status, ActionStatus.cancelled);
      assert.equal((await fx.job(jobs.get('test')!.id)).status, ActionStatus.skipped);
      assert.equal((await fx.runRow(runId)).status, ActionStatus.cancelled);
    });

    test('a cancelled job answers CANCELLED even to a reported result', async () => {
      const runner = await fx.runner();
      const { jobs } = await fx.run([{ jobId: 'build' }]);
      const build = jobs.get('build')!;
      const taskId = await fx.startTask(build, runner);
      await db
        .updateTable('action_run_job')
        .set({ status: ActionStatus.cancelled, stopped: clock.now })
        .where('id', '=', build.id)
        .execute();
      const answer = await reports.updateTask(runner, { id: taskId, result: ActionStatus.success, steps: [] }, {});
      assert.equal(answer.result, ActionStatus.cancelled);
      assert.equal((await fx.task(taskId)).status, ActionStatus.cancelled);
      assert.equal((await fx.job(build.id)).status, ActionStatus.cancelled);
    });

    test('an ephemeral runner is deleted when its task finishes; a normal one stays', async () => {
      const ephemeral = await fx.runner(true);
      const normal = await fx.runner(false);
      const { jobs } = await fx.run([{ jobId: 'a' }, { jobId: 'b' }]);
      const ta = await fx.startTask(jobs.get('a')!, ephemeral);
      const tb = await fx.startTask(jobs.get('b')!, normal);
      await reports.updateTask(ephemeral, { id: ta, result: 0, steps: [] }, {});
      assert.notEqual(await findRunnerById(db, ephemeral.id), null, 'a heartbeat keeps it');
      await reports.updateTask(ephemeral, { id: ta, result: ActionStatus.success, steps: [] }, {});
      await reports.updateTask(normal, { id: tb, result: ActionStatus.success, steps: [] }, {});
      assert.equal(await findRunnerById(db, ephemeral.id), null);
      assert.notEqual(await findRunnerById(db, normal.id), null);
    });

    /** A TaskReportService whose run events are kept in `recorded`. */
    const recording = () => {
      const recorded: DomainEvent[] = [];
      const events = new DomainEvents();
      events.subscribe(async (_tx, event) => {
        recorded.push(event);
      });
      return { recorded, service: new TaskReportService(db, clock, new RunProgress(clock, events), s.dataDir) };
    };

    const statusChanges = (recorded: readonly DomainEvent[], runId: number) =>
      recorded.flatMap((event) =>
        event.type === 'actions.run.status-changed' && event.run.id === runId ? [event.run.status] : [],
      );

    // On PostgreSQL a final report that only finishes its task, steps and job
    // is one statement (no transaction), and any other takes the transaction:
    // the run ends once, with its time, however its legs' reports arrive.
    test('legs that leave their run running finish alone; the last one ends the run once', async () => {
      const { recorded, service } = recording();
      const runner = await fx.runner();
      const { runId, jobs } = await fx.run([{ jobId: 'a' }, { jobId: 'b' }, { jobId: 'c' }]);
      const [ta, tb, tc] = [
        await fx.startTask(jobs.get('a')!, runner),
        await fx.startTask(jobs.get('b')!, runner),
        await fx.startTask(jobs.get('c')!, runner),
      ];
      const start = clock.now;
      clock.advance(10);
      await service.updateTask(
        runner,
        { id: ta, result: 0, steps: [step(0, ActionStatus.success, { logLength: 4 }), step(1, 0, { startedAt: T0 })] },
        {},
      );
      clock.advance(10);
      // Steps as forgejo-runner reports them at the end: the log ranges, a
      // result for some; one unknown step; the others are closed with the task.
      const final = [
        step(0, ActionStatus.success, { logLength: 5 }),
        step(1, ActionStatus.failure, { logIndex: 5, logLength: 2 }),
        step(7, ActionStatus.success),
      ];
      assert.deepEqual(await service.updateTask(runner, { id: ta, result: ActionStatus.success, steps: final }, {}), {
        result: ActionStatus.success,
        sentOutputs: [],
      });
      assert.equal((await fx.task(ta)).stopped, clock.now);
      assert.equal((await fx.job(jobs.get('a')!.id)).status, ActionStatus.success);
      assert.deepEqual(
        (await fx.steps(ta)).map((st) => [st.status, st.log_index, st.log_length, st.started, st.stopped, st.updated]),
        [
          [ActionStatus.success, 0, 5, start + 10, start + 10, start + 20],
          [ActionStatus.failure, 5, 2, start + 10, start + 20, start + 20],
          [ActionStatus.success, 0, 0, start + 20, start + 20, start + 20],
        ],
      );
      assert.equal((await fx.runRow(runId)).status, ActionStatus.running);
      // A failed leg: the run still shows running while c runs.
      assert.equal(
        (await service.updateTask(runner, { id: tb, result: ActionStatus.failure, steps: [] }, {})).result,
        ActionStatus.failure,
      );
      assert.equal((await fx.runRow(runId)).status, ActionStatus.running);
      assert.deepEqual(statusChanges(recorded, runId), []);
      clock.advance(5);
      await service.updateTask(runner, { id: tc, result: ActionStatus.success, steps: [step(0, 0)] }, {});
      const run = await fx.runRow(runId);
      assert.equal(run.status, ActionStatus.failure);
      assert.equal(run.stopped, clock.now);
      assert.deepEqual(statusChanges(recorded, runId), [ActionStatus.failure]);
      // A repeated final report changes nothing and answers the stored result.
      assert.equal(
        (await service.updateTask(runner, { id: ta, result: ActionStatus.failure, steps: [] }, {})).result,
        ActionStatus.success,
      );
      assert.deepEqual(statusChanges(recorded, runId), [ActionStatus.failure]);
    });

    test('the last two legs of a run finishing at once end it once', async () => {
      const { recorded, service } = recording();
      const runner = await fx.runner();
      for (let round = 0; round < 8; round += 1) {
        const { runId, jobs } = await fx.run([{ jobId: 'a' }, { jobId: 'b' }]);
        const ta = await fx.startTask(jobs.get('a')!, runner);
        const tb = await fx.startTask(jobs.get('b')!, runner);
        const answers = await Promise.all([
          service.updateTask(runner, { id: ta, result: ActionStatus.success, steps: [] }, {}),
          service.updateTask(runner, { id: tb, result: ActionStatus.success, steps: [] }, {}),
        ]);
        assert.deepEqual(
          answers.map((answer) => answer.result),
          [ActionStatus.success, ActionStatus.success],
        );
        assert.equal((await fx.runRow(runId)).status, ActionStatus.success, `round ${round}`);
        assert.deepEqual(statusChanges(recorded, runId), [ActionStatus.success], `round ${round}`);
      }
    });

    test("with an active webhook every leg's finish is recorded for it, and the run's end once", async () => {
      const { recorded, service } = recording();
      const hook = await db
        .insertInto('webhook')
        .values({
          repo_id: REPO_ID,
          type: 'forgejo',
          url: 'http://127.0.0.1:1/hook',
          content_type: 'json',
          events: '["workflow_job","workflow_run"]',
          is_active: 1,
          created: T0,
          updated: T0,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      try {
        const runner = await fx.runner();
        const { runId, jobs } = await fx.run([{ jobId: 'a' }, { jobId: 'b' }]);
        const ta = await fx.startTask(jobs.get('a')!, runner);
        const tb = await fx.startTask(jobs.get('b')!, runner);
        const finishedJobs = () =>
          recorded.flatMap((event) =>
            event.type === 'actions.jobs.changed' && event.run.id === runId && event.noActiveHooks !== true
              ? event.jobs.map((job) => [job.jobId, job.status])
              : [],
          );
        await service.updateTask(runner, { id: ta, result: ActionStatus.success, steps: [] }, {});
        assert.deepEqual(finishedJobs(), [['a', ActionStatus.success]]);
        assert.deepEqual(statusChanges(recorded, runId), []);
        await service.updateTask(runner, { id: tb, result: ActionStatus.success, steps: [] }, {});
        assert.deepEqual(finishedJobs(), [
          ['a', ActionStatus.success],
          ['b', ActionStatus.success],
        ]);
        assert.deepEqual(statusChanges(recorded, runId), [ActionStatus.success]);
      } finally {
        await db.deleteFrom('webhook').where('id', '=', hook.id).execute();
      }
    });

    test('invalid results are refused', async () => {
      const runner = await fx.runner();
      const { jobs } = await fx.run([{ jobId: 'build' }]);
      const taskId = await fx.startTask(jobs.get('build')!, runner);
      await assert.rejects(reports.updateTask(runner, { id: taskId, result: 6, steps: [] }, {}), isKind('invalid'));
      await assert.rejects(
        reports.updateTask(runner, { id: taskId, result: 0, steps: [step(0, 9)] }, {}),
        isKind('invalid'),
      );
      await assert.rejects(
        reports.updateLog(runner, { taskId, index: -1, rows: [], noMore: false }),
        isKind('invalid'),
      );
      assert.equal((await fx.task(taskId)).status, ActionStatus.running);
    });
  });

  describe(`task reports: housekeeping [${dialect}]`, () => {
    let s: TestServer;
    let db: Db;
    let clock: FakeClock;
    let reports: TaskReportService;
    let fx: Fixtures;

    before(async () => {
      s = await startTestServer(dialect);
      db = s.server.deps.database.db;
      clock = fakeClock();
      reports = new TaskReportService(db, clock, new RunProgress(clock, new DomainEvents()), s.dataDir);
      fx = new Fixtures(db, clock, new RunProgress(clock, new DomainEvents()));
    });
    beforeEach(() => fx.reset());
    after(() => s.stop());

    const housekeeping = (options = {}) =>
      new ActionsHousekeeping(db, clock, reports, { onError: (error) => assert.fail(String(error)), ...options });

    test('a running task silent for 10 minutes fails with its job and steps; its log is archived; dependants skip', async () => {
      const runner = await fx.runner(true);
      const { runId, jobs } = await fx.run([{ jobId: 'build' }, { jobId: 'test', needs: ['build'] }]);
      const taskId = await fx.startTask(jobs.get('build')!, runner);
      await reports.updateTask(
        runner,
        { id: taskId, result: 0, steps: [step(0, ActionStatus.success), step(1, 0, { startedAt: T0 })] },
        {},
      );
      await reports.updateLog(runner, { taskId, index: 0, rows: rowsFrom(0, 50), noMore: false });

      clock.advance(9 * 60);
      assert.deepEqual(await housekeeping().runOnce(), { zombies: 0, abandoned: 0, logsArchived: 0 });
      // A heartbeat moves the deadline.
      await reports.updateTask(runner, { id: taskId, result: 0, steps: [] }, {});
      clock.advance(10 * 60);
      assert.equal((await housekeeping().runOnce()).zombies, 0);
      clock.advance(1);
      assert.deepEqual(await housekeeping().runOnce(), { zombies: 1, abandoned: 0, logsArchived: 1 });

      const task = await fx.task(taskId);
      assert.equal(task.status, ActionStatus.failure);
      assert.equal(task.stopped, clock.now);
      assert.equal(task.log_in_storage, 1);
      assert.deepEqual(
        (await fx.steps(taskId)).map((st) => st.status),
        [ActionStatus.success, ActionStatus.failure, ActionStatus.failure],
      );
      assert.equal((await fx.job(jobs.get('build')!.id)).status, ActionStatus.failure);
      assert.equal((await fx.job(jobs.get('test')!.id)).status, ActionStatus.skipped);
      assert.equal((await fx.runRow(runId)).status, ActionStatus.failure);
      assert.equal(await findRunnerById(db, runner.id), null, 'the ephemeral runner of the task is gone');
      assert.deepEqual(await collect(reports.readLog(taskId)), stored(rowsFrom(0, 50)));
      // The runner comes back: it learns the result, its new lines are refused.
      assert.deepEqual(await housekeeping().runOnce(), { zombies: 0, abandoned: 0, logsArchived: 0 });
      await assert.rejects(
        reports.updateLog(runner, { taskId, index: 50, rows: rowsFrom(50, 1), noMore: false }),
        isKind('conflict'),
      );
    });

    test('waiting and blocked jobs untouched for 24 hours are cancelled and the run settles', async () => {
      const old = await fx.run([{ jobId: 'build' }, { jobId: 'test', needs: ['build'] }]);
      clock.advance(12 * 3600);
      const young = await fx.run([{ jobId: 'build' }]);
      clock.advance(12 * 3600);
      assert.deepEqual(await housekeeping().runOnce(), { zombies: 0, abandoned: 0, logsArchived: 0 });
      clock.advance(1);
      // Both jobs of the old run qualify; cancelling the first skips its dependant before its turn.
      assert.deepEqual(await housekeeping().runOnce(), { zombies: 0, abandoned: 1, logsArchived: 0 });
      assert.equal((await fx.job(old.jobs.get('build')!.id)).status, ActionStatus.cancelled);
      assert.equal((await fx.job(old.jobs.get('test')!.id)).status, ActionStatus.skipped);
      assert.equal((await fx.runRow(old.runId)).status, ActionStatus.cancelled);
      assert.equal((await fx.job(young.jobs.get('build')!.id)).status, ActionStatus.waiting);
      assert.equal((await fx.runRow(young.runId)).status, ActionStatus.waiting);
    });

    test('a finished task whose runner never sent "no more" gets its log archived later', async () => {
      const runner = await fx.runner();
      const { jobs } = await fx.run([{ jobId: 'build' }]);
      const taskId = await fx.startTask(jobs.get('build')!, runner);
      await reports.updateLog(runner, { taskId, index: 0, rows: rowsFrom(0, 20), noMore: false });
      await reports.updateTask(runner, { id: taskId, result: ActionStatus.success, steps: [] }, {});
      clock.advance(5 * 60);
      assert.equal((await housekeeping().runOnce()).logsArchived, 0);
      clock.advance(6 * 60);
      assert.equal((await housekeeping().runOnce()).logsArchived, 1);
      assert.equal((await fx.task(taskId)).log_in_storage, 1);
      assert.deepEqual(await collect(reports.readLog(taskId)), stored(rowsFrom(0, 20)));
    });

    test('passes in parallel (batches of 2) apply every change exactly once', async () => {
      const runner = await fx.runner();
      const abandonedRuns: number[] = [];
      for (let i = 0; i < 4; i += 1) abandonedRuns.push((await fx.run([{ jobId: 'lonely' }])).runId);
      clock.advance(24 * 3600);
      // Created a day later: their blocked jobs are young, only their tasks go silent.
      const zombieTasks: number[] = [];
      const runIds: number[] = [];
      for (let i = 0; i < 3; i += 1) {
        const { runId, jobs } = await fx.run([{ jobId: 'a' }, { jobId: 'b' }, { jobId: 'c', needs: ['a', 'b'] }]);
        runIds.push(runId);
        for (const key of ['a', 'b']) {
          const taskId = await fx.startTask(jobs.get(key)!, runner);
          await reports.updateLog(runner, { taskId, index: 0, rows: rowsFrom(0, 10, key), noMore: false });
          zombieTasks.push(taskId);
        }
      }
      clock.advance(11 * 60);

      const passes = await Promise.all([
        housekeeping({ batchSize: 2 }).runOnce(),
        housekeeping({ batchSize: 2 }).runOnce(),
        housekeeping({ batchSize: 2 }).runOnce(),
      ]);
      const sum = (key: 'zombies' | 'abandoned' | 'logsArchived') => passes.reduce((n, p) => n + p[key], 0);
      assert.equal(sum('zombies'), 6);
      assert.equal(sum('abandoned'), 4);
      assert.equal(sum('logsArchived'), 6);

      for (const taskId of zombieTasks) {
        const task = await fx.task(taskId);
        assert.equal(task.status, ActionStatus.failure);
        assert.equal(task.log_in_storage, 1);
      }
      for (const runId of runIds) {
        const run = await fx.runRow(runId);
        assert.equal(run.status, ActionStatus.failure);
        const statuses = (
          await db.selectFrom('action_run_job').select('status').where('run_id', '=', runId).orderBy('id').execute()
        ).map((j) => j.status);
        assert.deepEqual(statuses, [ActionStatus.failure, ActionStatus.failure, ActionStatus.skipped]);
      }
      for (const runId of abandonedRuns) assert.equal((await fx.runRow(runId)).status, ActionStatus.cancelled);
      // The per-status run counts moved once per run: no count below zero, one entry per run.
      const counts = await db
        .selectFrom('action_run_count')
        .select(['status', 'count'])
        .where('repo_id', '=', REPO_ID)
        .execute();
      assert.ok(
        counts.every((c) => Number(c.count) >= 0),
        JSON.stringify(counts),
      );
      const byStatus = Object.fromEntries(
        counts.filter((c) => Number(c.count) > 0).map((c) => [c.status, Number(c.count)]),
      );
      assert.deepEqual(byStatus, { [ActionStatus.failure]: 3, [ActionStatus.cancelled]: 4 });
      assert.deepEqual(await Promise.all([housekeeping().runOnce(), housekeeping().runOnce()]), [
        { zombies: 0, abandoned: 0, logsArchived: 0 },
        { zombies: 0, abandoned: 0, logsArchived: 0 },
      ]);
    });

    test('start and stop: a timed pass runs, stop waits for it and no pass follows', async () => {
      const runner = await fx.runner();
      const { jobs } = await fx.run([{ jobId: 'build' }]);
      const taskId = await fx.startTask(jobs.get('build')!, runner);
      clock.advance(11 * 60);
      const hk = housekeeping();
      hk.start(10);
      const deadline = Date.now() + 5000;
      while ((await fx.task(taskId)).status === ActionStatus.running && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 10));
      await hk.stop();
      assert.equal((await fx.task(taskId)).status, ActionStatus.failure);
    });
  });
}
