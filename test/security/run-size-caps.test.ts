// No workflow can make a run of unbounded size (issue 13 item 7): a workflow
// file over GANTRY_ACTIONS_MAX_WORKFLOW_SIZE, one that expands to more jobs
// than GANTRY_ACTIONS_MAX_JOBS_PER_RUN, or whose jobs would carry more than
// GANTRY_ACTIONS_MAX_RUN_PAYLOAD_SIZE of workflow payload, gives a push one
// failed run whose pre_execution_error names the cap and its setting, quickly
// and without jobs; a dispatch of it answers 400 with that message and
// creates nothing.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createCurrentUserRepo, dispatchWorkflow } from '@llamaduck/forgejo-ts';
import { insertRunWithJobs } from '../../src/models/action-runs.ts';
import { ActionStatus } from '../../src/modules/actions-status.ts';
import { answer } from '../support/actions.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

const MAX_WORKFLOW_SIZE = 16 * 1024;
const MAX_RUN_PAYLOAD_SIZE = 256 * 1024;
// A push that plans (or refuses) a run must not take long. Measured on two
// busy cores: refused, 0.5-0.8 s; planned and written without the caps, the
// 5,120 jobs below took 2 s (PostgreSQL) to 4.5 s (SQLite). The margin is for
// a loaded machine.
const QUICK_MS = 5000;

/** The issue's workflow: 20 jobs of a 4 × 8 × 8 matrix, 5,120 jobs from a 4 KB file. */
function manyJobs(trigger: string): string {
  const lines = [`on: [${trigger}]`, 'jobs:'];
  for (let i = 0; i < 20; i += 1) {
    lines.push(
      `  job${i}:`,
      '    runs-on: ${{ matrix.os }}',
      '    strategy:',
      '      matrix:',
      '        os: [a, b, c, d]',
      '        x: [1, 2, 3, 4, 5, 6, 7, 8]',
      '        y: [1, 2, 3, 4, 5, 6, 7, 8]',
      '    steps:',
      '      - run: echo ${{ matrix.x }} ${{ matrix.y }}',
    );
  }
  return `${lines.join('\n')}\n`;
}

/** A valid workflow of one small job, padded with steps past the size cap. */
function bigFile(trigger: string): string {
  const lines = [`on: [${trigger}]`, 'jobs:', '  big:', '    runs-on: ubuntu-latest', '    steps:'];
  for (let i = 0; lines.join('\n').length <= MAX_WORKFLOW_SIZE + 1024; i += 1)
    lines.push(`      - run: echo step number ${i} of a long job`);
  return `${lines.join('\n')}\n`;
}

/** 64 legs of a job whose steps are about 8 KB: well under the jobs cap, over the payload cap. */
function heavyPayloads(trigger: string): string {
  const steps = Array.from(
    { length: 100 },
    (_, i) => `      - run: echo this step is in every leg ${i} ${'x'.repeat(40)}`,
  );
  return `${[`on: [${trigger}]`, 'jobs:', '  heavy:', '    runs-on: ubuntu-latest', '    strategy:', '      matrix:', '        a: [1, 2, 3, 4, 5, 6, 7, 8]', '        b: [1, 2, 3, 4, 5, 6, 7, 8]', '    steps:', ...steps].join('\n')}\n`;
}

interface RunJson {
  id: number;
  workflow_id: string;
  status: string;
  pre_execution_error?: string;
}

for (const dialect of testDialects()) {
  describe(`run size caps [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let work: WorkDir;

    const runsOf = async (workflowId: string): Promise<RunJson[]> => {
      const res = await s.api('GET', `/repos/alice/app/actions/runs?workflow_id=${encodeURIComponent(workflowId)}`, {
        token: alice.token,
      });
      assert.equal(res.status, 200, res.text);
      return (res.json as { workflow_runs: RunJson[] }).workflow_runs;
    };

    const jobCount = async (runId: number): Promise<number> =>
      (await s.server.deps.database.db.selectFrom('action_run_job').select('id').where('run_id', '=', runId).execute())
        .length;

    /** Pushes one workflow file; returns how long `git push` took. */
    const pushWorkflow = async (file: string, content: string): Promise<number> => {
      await work.commit({ [`.forgejo/workflows/${file}`]: content }, `Add ${file}`);
      const started = Date.now();
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      return Date.now() - started;
    };

    /** The push gave exactly one run of the file: failed, no jobs, the reason matching `reason`. */
    const assertOneFailedRun = async (file: string, reason: RegExp): Promise<void> => {
      const runs = await runsOf(file);
      assert.equal(runs.length, 1, JSON.stringify(runs));
      const [run] = runs as [RunJson];
      assert.equal(run.status, 'failure');
      assert.match(run.pre_execution_error ?? '', reason);
      assert.equal(await jobCount(run.id), 0, 'no job of a refused run is stored');
    };

    const dispatch = (file: string) =>
      dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'app', workflowfilename: file },
        body: { ref: 'main', inputs: {}, return_run_info: true },
      });

    /** A dispatch answers 400 with `reason` and creates no run. */
    const assertDispatchRefused = async (file: string, reason: RegExp): Promise<void> => {
      const before = (await runsOf(file)).length;
      const res = await answer(dispatch(file));
      assert.equal(res.status, 400, JSON.stringify(res.data));
      assert.match((res.error as { message: string }).message, reason);
      assert.equal((await runsOf(file)).length, before, 'no run is created');
    };

    before(async () => {
      s = await startTestServer(dialect, {
        GANTRY_ACTIONS_MAX_WORKFLOW_SIZE: String(MAX_WORKFLOW_SIZE),
        GANTRY_ACTIONS_MAX_RUN_PAYLOAD_SIZE: String(MAX_RUN_PAYLOAD_SIZE),
      });
      alice = await s.createUser('alice');
      assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name: 'app' } })).status, 201);
      work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
    });

    after(async () => {
      await work?.remove();
      await s?.stop();
    });

    test('a 4 KB workflow that expands to 5,120 jobs: the push ends quickly with one failed run naming GANTRY_ACTIONS_MAX_JOBS_PER_RUN', async () => {
      const elapsed = await pushWorkflow('many.yml', manyJobs('push'));
      await assertOneFailedRun('many.yml', /more than 256 jobs.*GANTRY_ACTIONS_MAX_JOBS_PER_RUN/);
      assert.ok(elapsed < QUICK_MS, `the push took ${elapsed} ms`);
    });

    test('a workflow file over GANTRY_ACTIONS_MAX_WORKFLOW_SIZE: one failed run that names the setting', async () => {
      const content = bigFile('push');
      await pushWorkflow('big.yml', content);
      await assertOneFailedRun(
        'big.yml',
        new RegExp(`big\\.yml.*${content.length} bytes.*${MAX_WORKFLOW_SIZE}.*GANTRY_ACTIONS_MAX_WORKFLOW_SIZE`),
      );
    });

    test('jobs carrying more than GANTRY_ACTIONS_MAX_RUN_PAYLOAD_SIZE of payload: one failed run that names the setting', async () => {
      const elapsed = await pushWorkflow('heavy.yml', heavyPayloads('push'));
      await assertOneFailedRun(
        'heavy.yml',
        new RegExp(`more than ${MAX_RUN_PAYLOAD_SIZE} bytes.*GANTRY_ACTIONS_MAX_RUN_PAYLOAD_SIZE`),
      );
      assert.ok(elapsed < QUICK_MS, `the push took ${elapsed} ms`);
    });

    test('dispatching a workflow over any cap answers 400 with the cap and the setting, and creates no run', async () => {
      await work.commit(
        {
          '.forgejo/workflows/many-d.yml': manyJobs('workflow_dispatch'),
          '.forgejo/workflows/big-d.yml': bigFile('workflow_dispatch'),
          '.forgejo/workflows/heavy-d.yml': heavyPayloads('workflow_dispatch'),
        },
        'Add dispatchable workflows over the caps',
      );
      assert.equal((await work.push('main')).code, 0);
      await assertDispatchRefused('many-d.yml', /more than 256 jobs.*GANTRY_ACTIONS_MAX_JOBS_PER_RUN/);
      await assertDispatchRefused('big-d.yml', /big-d\.yml.*GANTRY_ACTIONS_MAX_WORKFLOW_SIZE/);
      await assertDispatchRefused('heavy-d.yml', /GANTRY_ACTIONS_MAX_RUN_PAYLOAD_SIZE/);
    });

    test('a workflow within the caps still runs: 256 jobs are allowed', async () => {
      // The first job of manyJobs alone: its 4 × 8 × 8 matrix is 256 jobs.
      const oneJob = manyJobs('push').split('\n  job1:')[0] ?? '';
      await pushWorkflow('fits.yml', `${oneJob}\n`);
      const [run] = await runsOf('fits.yml');
      assert.ok(run);
      assert.equal(run.status, 'waiting', run.pre_execution_error);
      assert.equal(await jobCount(run.id), 256);
    });

    test('a raised cap still writes: 5,120 jobs of one run (76,800 values) are inserted in slices that both databases accept', async () => {
      const db = s.server.deps.database.db;
      const repo = await db
        .selectFrom('repository')
        .select(['id', 'owner_id'])
        .where('lower_name', '=', 'app')
        .executeTakeFirstOrThrow();
      const jobs = Array.from({ length: 5120 }, (_, i) => ({
        name: `leg ${i}`,
        jobId: 'leg',
        handle: randomUUID(),
        needs: [],
        runsOn: ['x'],
        hasIf: false,
        workflowPayload: `jobs: {leg: {runs-on: x}} # ${i}`,
        status: ActionStatus.waiting,
      }));
      const run = {
        repoId: repo.id,
        ownerId: repo.owner_id,
        title: 'big',
        workflowId: 'big-run.yml',
        workflowDirectory: '.forgejo/workflows',
        triggerUserId: alice.user.id,
        ref: 'refs/heads/main',
        commitSha: '0'.repeat(40),
        event: 'push',
        eventPayload: '{}',
        triggerEvent: 'push',
        status: ActionStatus.waiting,
      };
      const created = await db
        .transaction()
        .execute((tx) => insertRunWithJobs(tx, run, jobs, Math.floor(Date.now() / 1000)));
      assert.equal(created.jobs.length, 5120);
      assert.deepEqual([created.jobs[0]?.name, created.jobs[5119]?.name], ['leg 0', 'leg 5119'], 'in order');
      assert.equal(await jobCount(created.run.id), 5120);
    });
  });
}
