// `gantry runner daemon` runs `run:` steps on the host, as a user sees it:
// `gantry web` and the daemon are separate processes, workflows are pushed
// with git and dispatched, and what the jobs did is read back from the run,
// its jobs and their logs through the API.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { updateRepoSecret } from '@llamaduck/forgejo-ts';
import { startRunnerFixture } from '../support/runner-cli.ts';
import type { RunnerDaemonChild, RunnerFixture } from '../support/runner-cli.ts';
import { testDialects } from '../support/server.ts';

const API_KEY = 'k3y-s3cr3t-0451';
const MULTI_LINE = 'first-line-9931\nsecond-line-7720';

const WORKFLOWS: Record<string, string> = {
  'chain.yml': `on: workflow_dispatch
jobs:
  build:
    runs-on: cli-runner
    outputs:
      artifact: \${{ steps.pack.outputs.artifact }}
    steps:
      - id: pack
        run: echo "artifact=app-$((6*7)).tgz" >> "$GITHUB_OUTPUT"
  deploy:
    needs: build
    runs-on: cli-runner
    steps:
      - run: echo "deploying \${{ needs.build.outputs.artifact }} after \${{ needs.build.result }}"
`,
  'matrix.yml': `on: workflow_dispatch
jobs:
  taste:
    runs-on: cli-runner
    strategy:
      matrix:
        flavour: [vanilla, chocolate]
    steps:
      - run: echo "flavour \${{ matrix.flavour }} is $FLAVOUR"
        env:
          FLAVOUR: \${{ matrix.flavour }}
`,
  'secrets.yml': `on: workflow_dispatch
jobs:
  mask:
    runs-on: cli-runner
    steps:
      - run: |
          echo "plain \${{ secrets.API_KEY }}"
          printf '%s\\n' "$MULTI"
          echo "::add-mask::dyn-$((1000+234))-value"
          echo "dynamic dyn-1234-value"
          echo "token \${{ github.token }}"
        env:
          MULTI: \${{ secrets.MULTI_LINE }}
`,
  'env.yml': `on: workflow_dispatch
env:
  LEVEL: workflow
  WF_ONLY: wf
defaults:
  run:
    shell: bash
jobs:
  env:
    runs-on: cli-runner
    env:
      LEVEL: job
    defaults:
      run:
        working-directory: sub
    steps:
      - working-directory: .
        run: |
          mkdir -p sub bin
          printf '#!/bin/sh\\necho mytool says hi\\n' > bin/mytool
          chmod +x bin/mytool
          echo "$PWD/bin" >> "$GITHUB_PATH"
          echo "GREETING=hello from step one" >> "$GITHUB_ENV"
          {
            echo 'STORY<<EOF'
            echo 'once upon'
            echo 'a time'
            echo 'EOF'
          } >> "$GITHUB_ENV"
      - run: |
          echo "greeting: $GREETING"
          echo "story: $(echo "$STORY" | tr '\\n' ' ')"
          mytool
          echo "cwd: $(basename "$PWD")"
          echo "levels: $LEVEL $WF_ONLY $STEP_ONLY"
          echo "ci=$CI actions=$GITHUB_ACTIONS forgejo=$FORGEJO_ACTIONS repo=$GITHUB_REPOSITORY gitea=$GITEA_REPOSITORY os=$RUNNER_OS"
        env:
          LEVEL: step
          STEP_ONLY: s
      - shell: sh
        run: echo "sh says $((2+3))"
      - shell: python
        run: print("python says", 6*7)
      - shell: node {0}
        run: console.log('node says', 7*6)
`,
  'failure.yml': `on: workflow_dispatch
jobs:
  fail:
    runs-on: cli-runner
    steps:
      - run: exit 3
        continue-on-error: true
      - run: echo "continued past a tolerated failure"
      - run: |
          echo "about to fail"
          false
      - run: echo "must never run"
      - if: always()
        run: echo "always runs"
      - if: failure()
        run: echo "failure noticed"
      - if: success()
        run: echo "success step must not run"
`,
  'hashfiles.yml': `on: workflow_dispatch
jobs:
  key:
    runs-on: cli-runner
    steps:
      - run: |
          mkdir -p a b/c
          echo one > a/package-lock.json
          echo two > b/c/package-lock.json
          echo other > b/c/other.json
      - run: |
          echo "key=\${{ hashFiles('**/package-lock.json') }}"
          echo "want=$(cat a/package-lock.json b/c/package-lock.json | sha256sum | cut -d' ' -f1)"
          echo "excluded=\${{ hashFiles('**/*.json', '!b/**') }}"
          echo "want-excluded=$(cat a/package-lock.json | sha256sum | cut -d' ' -f1)"
          echo "none=[\${{ hashFiles('**/*.nothing') }}]"
`,
  'timeout.yml': `on: workflow_dispatch
jobs:
  slow:
    runs-on: cli-runner
    steps:
      - run: sleep 30
        timeout-minutes: 0.02
      - if: always()
        run: echo "after the timeout"
`,
};

for (const dialect of testDialects()) {
  describe(`gantry runner daemon runs run: steps [${dialect}]`, () => {
    let f: RunnerFixture;
    let daemon: RunnerDaemonChild;
    const runs = new Map<string, number>();

    before(async () => {
      f = await startRunnerFixture(dialect);
      for (const [name, data] of [
        ['API_KEY', API_KEY],
        ['MULTI_LINE', MULTI_LINE],
      ] as const) {
        const res = await updateRepoSecret({
          client: f.alice.client,
          path: { owner: 'alice', repo: 'app', secretname: name },
          body: { data },
        });
        assert.ok(res.status === 201 || res.status === 204, String(res.status));
      }
      await f.push(Object.fromEntries(Object.entries(WORKFLOWS).map(([n, t]) => [`.forgejo/workflows/${n}`, t])));
      daemon = await f.startDaemon('steps', 'cli-runner');
      for (const name of Object.keys(WORKFLOWS)) runs.set(name, await f.dispatch(name));
    });

    after(async () => {
      await f?.stop();
    });

    /** The logs of the run's jobs by job name, once the run is complete. */
    async function finished(
      workflow: string,
    ): Promise<{ conclusion: string; logs: Map<string, string>; steps: Map<string, string[]> }> {
      const runId = runs.get(workflow) ?? 0;
      const run = await f.waitForRun(runId);
      const logs = new Map<string, string>();
      const steps = new Map<string, string[]>();
      for (const job of await f.jobsOf(runId)) {
        logs.set(job.name, await f.logOf(job.id));
        steps.set(job.name, await f.stepsOf(job.id));
      }
      return { conclusion: run.status, logs, steps };
    }

    test('a two-job needs chain: the second job reads the outputs and result of the first', async () => {
      const { conclusion, logs } = await finished('chain.yml');
      assert.equal(conclusion, 'success', [...logs.values()].join('\n'));
      assert.match(logs.get('deploy') ?? '', /deploying app-42\.tgz after success/);
    });

    test('a matrix: each leg runs with its own value', async () => {
      const { conclusion, logs } = await finished('matrix.yml');
      assert.equal(conclusion, 'success', [...logs.values()].join('\n'));
      const all = [...logs.values()].join('\n');
      assert.match(all, /flavour vanilla is vanilla/);
      assert.match(all, /flavour chocolate is chocolate/);
      assert.equal(logs.size, 2);
    });

    test('secrets, each line of a multi-line secret, the task token and add-mask values read *** in the log', async () => {
      const { conclusion, logs } = await finished('secrets.yml');
      const log = logs.get('mask') ?? '';
      assert.equal(conclusion, 'success', log);
      for (const hidden of [API_KEY, 'first-line-9931', 'second-line-7720', 'dyn-1234-value', '::add-mask::'])
        assert.ok(!log.includes(hidden), `${hidden} leaked:\n${log}`);
      assert.match(log, /plain \*\*\*/);
      assert.match(log, /dynamic \*\*\*/);
      assert.match(log, /token \*\*\*/);
      assert.equal((log.match(/\*\*\*\n/g) ?? []).length >= 2, true, log);
    });

    test('GITHUB_ENV and GITHUB_PATH carry over to later steps; env levels, defaults.run and shells apply', async () => {
      const { conclusion, logs } = await finished('env.yml');
      const log = logs.get('env') ?? '';
      assert.equal(conclusion, 'success', log);
      assert.match(log, /greeting: hello from step one/);
      assert.match(log, /story: once upon a time/);
      assert.match(log, /mytool says hi/);
      assert.match(log, /cwd: sub/);
      assert.match(log, /levels: step wf s/);
      assert.match(log, /ci=true actions=true forgejo=true repo=alice\/app gitea=alice\/app os=Linux/);
      assert.match(log, /sh says 5/);
      assert.match(log, /python says 42/);
      assert.match(log, /node says 42/);
    });

    test('a failing step skips the next ones while if: always() and if: failure() steps run', async () => {
      const { conclusion, logs, steps } = await finished('failure.yml');
      const log = logs.get('fail') ?? '';
      assert.equal(conclusion, 'failure', log);
      // Each step as reported with UpdateTask: a tolerated failure concludes as success.
      assert.deepEqual(steps.get('fail'), [
        'success',
        'success',
        'failure',
        'skipped',
        'success',
        'success',
        'skipped',
      ]);
      assert.match(log, /continued past a tolerated failure/);
      assert.match(log, /about to fail/);
      assert.match(log, /Process completed with exit code 1/);
      assert.match(log, /always runs/);
      assert.match(log, /failure noticed/);
      assert.ok(!log.includes('must never run'), log);
      assert.ok(!log.includes('success step must not run'), log);
    });

    test('the daemon rides out a server restart: it retries with backoff and runs the next job', async () => {
      await f.waitForRun(runs.get('timeout.yml') ?? 0);
      await f.web.stop();
      await daemon.waitFor('cannot fetch tasks', 30_000);
      await f.web.start();
      const runId = await f.dispatch('chain.yml');
      const run = await f.waitForRun(runId, 90_000);
      assert.equal(run.status, 'success', daemon.output);
    });

    test('hashFiles() hashes the selected workspace files as forgejo-runner does (a cache key), and is empty when none matches', async () => {
      const { conclusion, logs } = await finished('hashfiles.yml');
      const log = logs.get('key') ?? '';
      assert.equal(conclusion, 'success', log);
      const value = (name: string) => new RegExp(`(?<![\\w-])${name}=([0-9a-f]{64})$`, 'm').exec(log)?.[1];
      assert.ok(value('key'), log);
      assert.equal(value('key'), value('want'), log);
      assert.equal(value('excluded'), value('want-excluded'), log);
      assert.notEqual(value('key'), value('excluded'));
      assert.match(log, /none=\[\]/);
    });

    test('a step over its timeout-minutes is killed and fails the job', async () => {
      const { conclusion, logs, steps } = await finished('timeout.yml');
      const log = logs.get('slow') ?? '';
      assert.equal(conclusion, 'failure', log);
      assert.match(log, /exceeded its timeout of 0\.02 minutes/);
      assert.deepEqual(steps.get('slow'), ['failure', 'success']);
    });
  });
}
