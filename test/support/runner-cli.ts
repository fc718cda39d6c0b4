// `gantry web` and `gantry runner daemon` as separate processes, the way a
// user runs them: a test server (for fixtures) and a `gantry web` child on
// the same database, a runner registered with `gantry runner register`
// against the child, and its daemon started as a child process that polls
// the child. Workflows are pushed with git and dispatched through the API;
// runs, jobs and logs are read back through the API.
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import assert from 'node:assert/strict';
import { createCurrentUserRepo, dispatchWorkflow, repoGetRunnerRegistrationToken } from '@llamaduck/forgejo-ts';
import { freePort } from './free-port.ts';
import { GantryChild } from './gantry-child.ts';
import { GANTRY } from './gantry-process.ts';
import { startTestServer } from './server.ts';
import type { TestDialect, TestServer, TestUser } from './server.ts';
import { createWorkDir, remoteUrl } from './workdir.ts';
import type { WorkDir } from './workdir.ts';

const run = promisify(execFile);

export interface JobJson {
  id: number;
  handle: string;
  run_id: number;
  name: string;
  status: string;
  task_id: number;
}

/** A run as Forgejo's API shows it: `status` is the Forgejo status name (success, failure, running…). */
export interface RunJson {
  id: number;
  status: string;
}

const DONE = new Set(['success', 'failure', 'cancelled', 'skipped']);

/** A `gantry runner daemon` child process. */
export class RunnerDaemonChild {
  output = '';
  private exit: Promise<number | null>;

  constructor(readonly child: ChildProcess) {
    const keep = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString()).slice(-50_000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    this.exit = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  /** Resolves once the daemon printed `text`. */
  async waitFor(text: string, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.output.includes(text)) {
      if (this.child.exitCode !== null) throw new Error(`the runner daemon exited:\n${this.output}`);
      if (Date.now() > deadline) throw new Error(`the runner daemon never printed "${text}":\n${this.output}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  exited(): Promise<number | null> {
    return this.exit;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGKILL');
    await this.exit;
  }
}

export interface RunnerFixture {
  s: TestServer;
  web: GantryChild;
  alice: TestUser;
  work: WorkDir;
  /** Scratch folder of the test (runner files, work folders, marker files). */
  dir: string;
  registrationToken: string;
  /** Runs `gantry runner <args>` to completion. */
  cli(args: string[], env?: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }>;
  /** Registers a runner with `labels` with `gantry runner register`; returns its runner file. */
  register(name: string, labels: string): Promise<string>;
  /** Registers a runner with `labels` and starts its daemon. */
  startDaemon(
    name: string,
    labels: string,
    options?: { capacity?: number; env?: Record<string, string> },
  ): Promise<RunnerDaemonChild>;
  /** Commits and pushes `files` on main. */
  push(files: Record<string, string>): Promise<void>;
  dispatch(workflow: string, inputs?: Record<string, string>): Promise<number>;
  waitForRun(runId: number, timeoutMs?: number): Promise<RunJson>;
  jobsOf(runId: number): Promise<JobJson[]>;
  logOf(jobId: number): Promise<string>;
  /** The conclusions of the job's steps (Gitea's ActionWorkflowJob). */
  stepsOf(jobId: number): Promise<string[]>;
  stop(): Promise<void>;
}

export interface RunnerFixtureOptions {
  /** More environment for the `gantry web` child. */
  webEnv?: Record<string, string>;
}

export async function startRunnerFixture(
  dialect: TestDialect,
  options: RunnerFixtureOptions = {},
): Promise<RunnerFixture> {
  const s = await startTestServer(dialect);
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-runner-cli-'));
  const daemons: RunnerDaemonChild[] = [];
  let web: GantryChild | null = null;
  let work: WorkDir | null = null;
  try {
    const alice = await s.createUser('alice');
    assert.equal(
      (await createCurrentUserRepo({ client: alice.client, body: { name: 'app', private: true } })).status,
      201,
    );
    work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
    const tokenRes = await repoGetRunnerRegistrationToken({
      client: alice.client,
      path: { owner: 'alice', repo: 'app' },
    });
    assert.equal(tokenRes.status, 200);
    const registrationToken = (tokenRes.data as { token: string }).token;
    const port = await freePort();
    web = new GantryChild(`http://127.0.0.1:${port}`, {
      ...process.env,
      GANTRY_DATA_DIR: s.dataDir,
      GANTRY_HTTP_ADDR: '127.0.0.1',
      GANTRY_HTTP_PORT: String(port),
      GANTRY_ROOT_URL: s.rootUrl,
      GANTRY_LOG_LEVEL: 'warn',
      ...(dialect === 'postgres' ? { GANTRY_DATABASE_URL: s.server.deps.config.databaseUrl ?? '' } : {}),
      ...options.webEnv,
    });
    await web.start();
    const webUrl = web.url;
    const workDir = work;

    const cli: RunnerFixture['cli'] = async (args, env = {}) => {
      try {
        const { stdout, stderr } = await run(process.execPath, [GANTRY, 'runner', ...args], {
          cwd: dir,
          env: { ...process.env, ...env },
        });
        return { code: 0, stdout, stderr };
      } catch (error) {
        const failure = error as { code?: number; stdout?: string; stderr?: string };
        return { code: failure.code ?? 1, stdout: failure.stdout ?? '', stderr: failure.stderr ?? '' };
      }
    };

    const fixture: RunnerFixture = {
      s,
      web,
      alice,
      work,
      dir,
      registrationToken,
      cli,
      async register(name, labels) {
        const runnerFile = path.join(dir, `${name}.runner`);
        const registered = await cli([
          'register',
          '--no-interactive',
          '--instance',
          webUrl,
          '--token',
          registrationToken,
          '--name',
          name,
          '--labels',
          labels,
          '--runner-file',
          runnerFile,
        ]);
        assert.equal(registered.code, 0, registered.stderr);
        return runnerFile;
      },
      async startDaemon(name, labels, options = {}) {
        const runnerFile = await fixture.register(name, labels);
        const child = spawn(
          process.execPath,
          [
            GANTRY,
            'runner',
            'daemon',
            '--runner-file',
            runnerFile,
            '--capacity',
            String(options.capacity ?? 4),
            '--workdir',
            path.join(dir, `${name}-work`),
          ],
          { cwd: dir, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] },
        );
        const daemon = new RunnerDaemonChild(child);
        daemons.push(daemon);
        await daemon.waitFor('declared');
        return daemon;
      },
      async push(files) {
        await workDir.commit(files, 'Add workflows');
        const pushed = await workDir.push('main');
        assert.equal(pushed.code, 0, pushed.stderr);
      },
      async dispatch(workflow, inputs = {}) {
        const res = await dispatchWorkflow({
          client: alice.client,
          path: { owner: 'alice', repo: 'app', workflowfilename: workflow },
          body: { ref: 'main', inputs, return_run_info: true },
        });
        assert.equal(res.status, 201, JSON.stringify(res.error));
        return (res.data as { id: number }).id;
      },
      async waitForRun(runId, timeoutMs = 60_000) {
        const deadline = Date.now() + timeoutMs;
        for (;;) {
          const res = await s.api('GET', `/repos/alice/app/actions/runs/${runId}`, { token: alice.token });
          assert.equal(res.status, 200, res.text);
          const runJson = res.json as RunJson;
          if (DONE.has(runJson.status)) return runJson;
          if (Date.now() > deadline)
            throw new Error(
              `run ${runId} is still ${runJson.status}:\n${daemons.map((d) => d.output).join('\n---\n')}`,
            );
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      },
      async jobsOf(runId) {
        const res = await s.api('GET', `/repos/alice/app/actions/runs/${runId}/jobs`, { token: alice.token });
        assert.equal(res.status, 200, res.text);
        return res.json as JobJson[];
      },
      async logOf(jobId) {
        const res = await fetch(`${s.apiUrl}/repos/alice/app/actions/jobs/${jobId}/logs`, {
          headers: { authorization: `token ${alice.token}` },
        });
        assert.equal(res.status, 200);
        return res.text();
      },
      async stepsOf(jobId) {
        const res = await s.api('GET', `/repos/alice/app/actions/jobs/${jobId}`, { token: alice.token });
        assert.equal(res.status, 200, res.text);
        return (res.json as { steps: { conclusion?: string }[] }).steps.map((step) => step.conclusion ?? '');
      },
      async stop() {
        for (const daemon of daemons) await daemon.stop();
        await web?.stop();
        await workDir.remove();
        await s.stop();
        await fs.rm(dir, { recursive: true, force: true });
      },
    };
    return fixture;
  } catch (error) {
    for (const daemon of daemons) await daemon.stop();
    await web?.stop();
    await work?.remove();
    await s.stop();
    throw error;
  }
}
