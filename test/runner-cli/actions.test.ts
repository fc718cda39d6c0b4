// `uses:` steps under `gantry runner daemon`, as a user writes them: the
// repository checked out with actions/checkout (built in: the instance has
// no such repository), a local composite action and a local JavaScript
// action (pre, main and post, inputs and outputs) from that checkout, a
// remote action pushed to the instance as its own repository and used as
// owner/repo@tag, and a Docker action refused with a clear message.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createCurrentUserRepo } from '@llamaduck/forgejo-ts';
import { startRunnerFixture } from '../support/runner-cli.ts';
import type { RunnerFixture } from '../support/runner-cli.ts';
import { testDialects } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';

const COMPOSITE = `name: greet
inputs:
  who:
    default: world
outputs:
  greeting:
    value: \${{ steps.say.outputs.text }}
runs:
  using: composite
  steps:
    - id: say
      shell: bash
      run: |
        echo "text=hello \${{ inputs.who }}" >> "$GITHUB_OUTPUT"
        echo "composite runs from $(basename "$GITHUB_ACTION_PATH")"
`;

const JAVASCRIPT = `name: shout
inputs:
  name:
    required: true
runs:
  using: node20
  pre: pre.js
  main: main.js
  post: post.js
`;

const MAIN_JS = `const fs = require('node:fs');
fs.appendFileSync(process.env.GITHUB_OUTPUT, 'shout=' + process.env.INPUT_NAME.toUpperCase() + '!\\n');
fs.appendFileSync(process.env.GITHUB_STATE, 'started=yes\\n');
console.log('main runs on node ' + process.versions.node.split('.')[0]);
`;

const REMOTE = `name: echo
inputs:
  word:
    default: near
outputs:
  echo:
    value: \${{ steps.e.outputs.echo }}
runs:
  using: composite
  steps:
    - id: e
      shell: bash
      run: echo "echo=\${{ inputs.word }}-away" >> "$GITHUB_OUTPUT"
`;

const WORKFLOW = `on: workflow_dispatch
jobs:
  use:
    runs-on: cli-actions
    steps:
      - uses: actions/checkout@v4
      - id: greet
        uses: ./.forgejo/actions/greet
        with:
          who: gantry
      - id: js
        uses: ./.forgejo/actions/js
        with:
          name: loud
      - id: remote
        uses: alice/remote-action@v1
        with:
          word: far
      - run: |
          echo "composite said \${{ steps.greet.outputs.greeting }}"
          echo "js said \${{ steps.js.outputs.shout }}"
          echo "remote said \${{ steps.remote.outputs.echo }}"
          echo "checked out $(git rev-parse HEAD)"
          cat README.md
      - uses: docker://alpine:3
        continue-on-error: true
`;

const CONTAINER_JOB = `on: workflow_dispatch
jobs:
  boxed:
    runs-on: cli-docker
    steps:
      - run: echo "must not run on the host"
`;

for (const dialect of testDialects()) {
  describe(`uses: actions under gantry runner daemon [${dialect}]`, () => {
    let f: RunnerFixture;
    let pushed: string;

    before(async () => {
      f = await startRunnerFixture(dialect);
      const created = await createCurrentUserRepo({
        client: f.alice.client,
        body: { name: 'remote-action', private: false },
      });
      assert.equal(created.status, 201);
      const remote = await createWorkDir(
        remoteUrl(f.s.url, 'alice', 'remote-action', { user: 'alice', password: f.alice.token }),
      );
      try {
        await remote.commit({ 'action.yml': REMOTE }, 'An action');
        await remote.git(['tag', 'v1']);
        const res = await remote.push('main', 'v1');
        assert.equal(res.code, 0, res.stderr);
      } finally {
        await remote.remove();
      }
      await f.push({
        'README.md': 'the readme of app\n',
        '.forgejo/actions/greet/action.yml': COMPOSITE,
        '.forgejo/actions/js/action.yml': JAVASCRIPT,
        '.forgejo/actions/js/pre.js': "console.log('pre runs');\n",
        '.forgejo/actions/js/main.js': MAIN_JS,
        '.forgejo/actions/js/post.js': "console.log('post sees state ' + process.env.STATE_started);\n",
        '.forgejo/workflows/actions.yml': WORKFLOW,
        '.forgejo/workflows/container.yml': CONTAINER_JOB,
      });
      pushed = await f.work.head();
      await f.startDaemon('actions', 'cli-actions,cli-docker:docker://node:20');
    });

    after(async () => {
      await f?.stop();
    });

    test('checkout, local composite and JavaScript actions, a remote action, and a refused Docker action', async () => {
      const runId = await f.dispatch('actions.yml');
      const run = await f.waitForRun(runId);
      const [job] = await f.jobsOf(runId);
      assert.ok(job);
      const log = await f.logOf(job.id);
      assert.equal(run.status, 'success', log);
      assert.match(log, new RegExp(`checked out ${pushed}`));
      assert.match(log, /the readme of app/);
      assert.match(log, /composite runs from greet/);
      assert.match(log, /composite said hello gantry/);
      assert.match(log, /pre runs/);
      assert.match(log, /main runs on node \d+/);
      assert.match(log, /js said LOUD!/);
      assert.match(log, /post sees state yes/);
      assert.match(log, /remote said far-away/);
      assert.match(log, /Docker actions are not supported: gantry runner runs jobs on the host/);
      assert.deepEqual(await f.stepsOf(job.id), ['success', 'success', 'success', 'success', 'success', 'success']);
      // The post step ran after the job's steps.
      assert.ok(log.indexOf('post sees state yes') > log.indexOf('checked out'), log);
    });

    test('a job whose label asks for docker:// fails and says that containers are not supported', async () => {
      const runId = await f.dispatch('container.yml');
      const run = await f.waitForRun(runId);
      const [job] = await f.jobsOf(runId);
      assert.ok(job);
      const log = await f.logOf(job.id);
      assert.equal(run.status, 'failure', log);
      assert.match(log, /label "cli-docker" asks for docker:\/\/node:20.*container execution is not supported/);
      assert.ok(!log.includes('must not run on the host'), log);
    });
  });
}
