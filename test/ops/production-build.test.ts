// The production build (`npm run build`, what `npm start` runs): a bundle in
// dist/ that plain node runs, with the console's files beside it. What a
// bundle can break and the sources cannot: files found beside a module (the
// console's assets and templates, package.json), the JSON that
// @actions/workflow-parser imports (a pushed workflow becomes a run only if
// it parses), the native SQLite driver and pg (external modules), the
// `gantry runner` subcommands, and stack traces naming src/ lines (the
// source map). Each check talks to `node dist/gantry.mjs` processes only.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../support/free-port.ts';
import { GantryChild } from '../support/gantry-child.ts';
import { buildGantry } from '../support/production-build.ts';
import { RunnerDaemonChild } from '../support/runner-cli.ts';
import type { JobJson, RunJson } from '../support/runner-cli.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';
import type { WorkDir } from '../support/workdir.ts';

const run = promisify(execFile);
const WEB_SOURCES = path.resolve('src/http/web');
const PACKAGE_VERSION = (JSON.parse(await fs.readFile('package.json', 'utf8')) as { version: string }).version;

// Expressions, a matrix and needs: the parser's schema (its JSON) decides all three.
const WORKFLOW = `name: Built
on: push
jobs:
  legs:
    runs-on: build-test
    strategy:
      matrix:
        n: [1, 2]
    steps:
      - run: echo "leg \${{ matrix.n }} of \${{ github.repository }}"
  last:
    needs: legs
    runs-on: build-test
    steps:
      - run: echo all legs done
`;

for (const dialect of testDialects()) {
  describe(`the production build [${dialect}]`, () => {
    let s: TestServer;
    let web: GantryChild;
    let alice: TestUser;
    let work: WorkDir;
    let runnerDir: string;
    let entry: string;
    let daemon: RunnerDaemonChild | null = null;

    const get = (url: string, token?: string) =>
      fetch(`${web.url}${url}`, { headers: token ? { authorization: `token ${token}` } : {} });

    before(async () => {
      entry = await buildGantry();
      // The test server only makes the user and its token; every request below goes to the build.
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      runnerDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-build-runner-'));
      const port = await freePort();
      web = new GantryChild(
        `http://127.0.0.1:${port}`,
        {
          ...process.env,
          GANTRY_DATA_DIR: s.dataDir,
          GANTRY_HTTP_ADDR: '127.0.0.1',
          GANTRY_HTTP_PORT: String(port),
          GANTRY_ROOT_URL: `http://127.0.0.1:${port}/`,
          GANTRY_LOG_LEVEL: 'warn',
          ...(dialect === 'postgres' ? { GANTRY_DATABASE_URL: s.server.deps.config.databaseUrl ?? '' } : {}),
        },
        [],
        entry,
      );
      await web.start();
      work = await createWorkDir(remoteUrl(web.url, 'alice', 'app', { user: 'alice', password: alice.token }));
    });

    after(async () => {
      await daemon?.stop();
      await web?.stop();
      await work?.remove();
      await s?.stop();
      if (runnerDir) await fs.rm(runnerDir, { recursive: true, force: true });
    });

    test('the API answers, with the version of package.json', async () => {
      const version = await get('/api/v1/version');
      assert.equal(version.status, 200);
      assert.deepEqual(await version.json(), { version: `15.0.3+gantry-${PACKAGE_VERSION}` });
      const created = await fetch(`${web.url}/api/v1/user/repos`, {
        method: 'POST',
        headers: { authorization: `token ${alice.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'app', default_branch: 'main' }),
      });
      assert.equal(created.status, 201, await created.text());
    });

    test('a pushed workflow is parsed into a run, which `gantry runner` from the build runs', async () => {
      await work.commit({ '.forgejo/workflows/built.yml': WORKFLOW }, 'Add a workflow');
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
      const runs = await get('/api/v1/repos/alice/app/actions/runs', alice.token);
      const listed = (await runs.json()) as { workflow_runs: RunJson[] };
      assert.equal(listed.workflow_runs.length, 1, 'the push created one run');
      const runId = listed.workflow_runs[0]?.id;
      const jobsOf = async () =>
        (await (await get(`/api/v1/repos/alice/app/actions/runs/${runId}/jobs`, alice.token)).json()) as JobJson[];
      assert.deepEqual((await jobsOf()).map((j) => j.name).sort(), ['last', 'legs (1)', 'legs (2)']);

      const tokenRes = await get('/api/v1/repos/alice/app/actions/runners/registration-token', alice.token);
      const { token } = (await tokenRes.json()) as { token: string };
      const runnerFile = path.join(runnerDir, '.runner');
      const registered = await run(
        process.execPath,
        [entry, 'runner', 'register', '--no-interactive', '--instance', web.url, '--token', token].concat([
          '--name',
          'built',
          '--labels',
          'build-test',
          '--runner-file',
          runnerFile,
        ]),
        { cwd: runnerDir },
      );
      assert.match(registered.stdout + registered.stderr, /built/);
      daemon = new RunnerDaemonChild(
        spawn(
          process.execPath,
          [entry, 'runner', 'daemon', '--runner-file', runnerFile, '--workdir', path.join(runnerDir, 'work')],
          { cwd: runnerDir, stdio: ['ignore', 'pipe', 'pipe'] },
        ),
      );
      await daemon.waitFor('declared');
      const deadline = Date.now() + 60_000;
      let status = '';
      while (Date.now() < deadline) {
        status = ((await (await get(`/api/v1/repos/alice/app/actions/runs/${runId}`, alice.token)).json()) as RunJson)
          .status;
        if (status !== 'waiting' && status !== 'running') break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      assert.equal(status, 'success', daemon.output);
      const leg = (await jobsOf()).find((j) => j.name === 'legs (2)');
      const log = await (await get(`/api/v1/repos/alice/app/actions/jobs/${leg?.id}/logs`, alice.token)).text();
      assert.match(log, /leg 2 of alice\/app/);
    });

    test("a console page renders from the build's templates, with its CSS and script", async () => {
      const page = await get('/alice/app/actions/runs/1');
      assert.equal(page.status, 200);
      const html = await page.text();
      assert.match(html, /<link rel="stylesheet" href="\/assets\/app\.css">/);
      assert.match(html, /<script src="\/assets\/run-log\.js"><\/script>/);
      for (const [name, type] of [
        ['app.css', 'text/css'],
        ['run-log.js', 'text/javascript'],
      ] as const) {
        const asset = await get(`/assets/${name}`);
        assert.equal(asset.status, 200, name);
        assert.match(asset.headers.get('content-type') ?? '', new RegExp(`^${type}`));
        assert.equal(await asset.text(), await fs.readFile(path.join(WEB_SOURCES, 'assets', name), 'utf8'));
      }
    });
  });
}

describe('the production build', () => {
  test('a crash prints a stack trace naming the src/ lines (the source map)', async () => {
    const entry = await buildGantry();
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-build-crash-'));
    try {
      // Nothing listens on port 1: migrating fails, and the error reaches the top unhandled.
      const failed = await run(process.execPath, [entry, 'web'], {
        env: { ...process.env, GANTRY_DATA_DIR: dataDir, GANTRY_DATABASE_URL: 'postgres://gantry@127.0.0.1:1/none' },
      }).then(
        () => assert.fail('gantry web started without its database'),
        (error: { code?: number; stderr?: string }) => error,
      );
      assert.equal(failed.code, 1);
      assert.match(failed.stderr ?? '', /at async createDeps \(\S*\/src\/deps\.ts:\d+:\d+\)/);
      assert.doesNotMatch(failed.stderr ?? '', /dist\/gantry-main\.mjs/);
    } finally {
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });
});
