import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse as parseYaml } from 'yaml';
import { evaluateRunTitle, expandJobs } from './expand-jobs.ts';
import type { ExpandedJob } from './expand-jobs.ts';
import type { ExpansionContext } from './planning-scope.ts';
import { parseWorkflow } from './parse.ts';

const CONTEXT: ExpansionContext = {
  github: {
    event_name: 'push',
    ref: 'refs/heads/main',
    ref_name: 'main',
    actor: 'alice',
    repository: 'org/repo',
    event: { head_commit: { id: 'abc' } },
  },
  vars: { RUNNER: 'docker', OSES: '["linux","bsd"]' },
  inputs: {},
};

function expand(content: string, context: ExpansionContext = CONTEXT): { jobs: ExpandedJob[]; errors: string[] } {
  const parsed = parseWorkflow('ci.yml', content);
  assert.deepEqual(parsed.errors, [], 'the test workflow itself must be valid');
  return expandJobs(parsed, context);
}

interface Payload {
  /** Top-level keys in order. */
  keys: string[];
  /** The one job, as plain data. */
  job: Record<string, unknown>;
}

/** The payload must be a valid workflow of exactly this job. */
function readPayload(job: ExpandedJob): Payload {
  const reparsed = parseWorkflow('payload.yml', job.workflowPayload);
  assert.deepEqual(reparsed.errors, [], job.workflowPayload);
  assert.deepEqual(
    reparsed.jobs.map((j) => j.id),
    [job.jobId],
  );
  const workflow = parseYaml(job.workflowPayload) as { jobs: Record<string, Record<string, unknown>> };
  return { keys: Object.keys(workflow), job: workflow.jobs[job.jobId] ?? {} };
}

function matrixOf(payload: Payload): unknown {
  return (payload.job.strategy as { matrix?: unknown } | undefined)?.matrix;
}

test('a simple workflow: one job, named by its id, header kept in the payload, needs erased', () => {
  const { jobs, errors } = expand(`name: CI
run-name: CI for \${{ github.ref_name }}
on: [push]
env: {GLOBAL: '1'}
defaults: {run: {shell: bash}}
permissions: {contents: read}
concurrency: ci-\${{ github.ref }}
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: make
        env: {PY: 3.10}
  test:
    needs: build
    if: \${{ always() }}
    runs-on: [self-hosted, linux]
    steps: [{run: make test}]
`);
  assert.deepEqual(errors, []);
  assert.deepEqual(
    jobs.map(({ jobId, name, needs, runsOn, hasIf }) => ({ jobId, name, needs, runsOn, hasIf })),
    [
      { jobId: 'build', name: 'build', needs: [], runsOn: ['ubuntu-latest'], hasIf: false },
      { jobId: 'test', name: 'test', needs: ['build'], runsOn: ['self-hosted', 'linux'], hasIf: true },
    ],
  );
  const [build, testJob] = jobs as [ExpandedJob, ExpandedJob];
  const payload = readPayload(build);
  assert.deepEqual(payload.keys, ['name', 'run-name', 'on', 'env', 'defaults', 'permissions', 'concurrency', 'jobs']);
  assert.deepEqual(payload.job, {
    name: 'build',
    'runs-on': 'ubuntu-latest',
    steps: [{ run: 'make', env: { PY: 3.1 } }],
  });
  // Written as in the file: a runner reading 3.10 as 3.1 is the author's YAML, not ours.
  assert.match(build.workflowPayload, /PY: 3\.10/);

  const testPayload = readPayload(testJob).job;
  assert.equal(testPayload.needs, undefined);
  assert.equal(testPayload.if, '${{ always() }}');
  assert.deepEqual(testPayload['runs-on'], ['self-hosted', 'linux']);
});

test('matrix: product, exclude and include, legs in jobparser order, names with their values', () => {
  const { jobs, errors } = expand(`on: push
jobs:
  build:
    strategy:
      fail-fast: false
      matrix:
        os: [ubuntu, debian]
        node: [18, 20]
        exclude:
          - {os: debian, node: 18}
        include:
          - {os: ubuntu, experimental: true}
          - {os: windows, node: 22}
    runs-on: \${{ matrix.os }}
    steps: [{run: echo}]
`);
  assert.deepEqual(errors, []);
  // Labels list the values by sorted key (experimental, node, os) and the legs are sorted by label.
  assert.deepEqual(
    jobs.map((job) => [job.name, job.runsOn]),
    [
      ['build (20, debian)', ['debian']],
      ['build (22, windows)', ['windows']],
      ['build (true, 18, ubuntu)', ['ubuntu']],
      ['build (true, 20, ubuntu)', ['ubuntu']],
    ],
  );
  const strategy = readPayload(jobs[2] as ExpandedJob).job.strategy;
  assert.deepEqual(strategy, { 'fail-fast': false, matrix: { os: ['ubuntu'], node: [18], experimental: [true] } });
});

test('matrix names: literal names get the values, objects and lists print as Go does', () => {
  const { jobs } = expand(`on: push
jobs:
  lint:
    name: Lint
    strategy:
      matrix:
        cfg: [{b: [x, y], a: 1}]
        ratio: [0.5, 0.00001]
        none: [null]
    runs-on: x
    steps: [{run: echo}]
`);
  assert.deepEqual(
    jobs.map((job) => job.name),
    ['Lint (map[a:1 b:[x y]], <nil>, 0.5)', 'Lint (map[a:1 b:[x y]], <nil>, 1e-05)'],
  );
  for (const job of jobs) readPayload(job);
});

test('a name with an expression is interpolated with matrix, github, vars and inputs', () => {
  const { jobs } = expand(
    `on:
  workflow_dispatch:
    inputs:
      dry: {type: boolean}
      target: {}
jobs:
  deploy:
    name: Deploy \${{ matrix.site }} to \${{ inputs.target }} on \${{ github.ref_name }} via \${{ vars.RUNNER }} \${{ inputs.dry && '(dry)' || '(live)' }}
    strategy:
      matrix:
        site: [a]
    runs-on: x
    steps: [{run: echo}]
`,
    { ...CONTEXT, inputs: { dry: 'false', target: 'prod' } },
  );
  // 'false' as a string would be truthy: a boolean input must arrive in expressions as false.
  assert.deepEqual(
    jobs.map((job) => job.name),
    ['Deploy a to prod on main via docker (live)'],
  );
  assert.equal(readPayload(jobs[0] as ExpandedJob).job.name, 'Deploy a to prod on main via docker (live)');
});

test('matrix values may be expressions over vars, github and inputs', () => {
  const { jobs, errors } = expand(`on: push
jobs:
  build:
    strategy:
      matrix:
        os: \${{ fromJSON(vars.OSES) }}
        branch: ['\${{ github.ref_name }}', stable]
    runs-on: \${{ matrix.os }}
    steps: [{run: echo}]
`);
  assert.deepEqual(errors, []);
  assert.deepEqual(
    jobs.map((job) => job.name),
    ['build (main, bsd)', 'build (main, linux)', 'build (stable, bsd)', 'build (stable, linux)'],
  );
  assert.deepEqual(matrixOf(readPayload(jobs[0] as ExpandedJob)), { os: ['bsd'], branch: ['main'] });
});

test('a matrix that needs outputs of other jobs is an error for that job only', () => {
  const { jobs, errors } = expand(`on: push
jobs:
  setup:
    runs-on: x
    outputs: {list: '\${{ steps.s.outputs.list }}'}
    steps: [{id: s, run: echo}]
  build:
    needs: setup
    strategy:
      matrix:
        v: \${{ fromJSON(needs.setup.outputs.list) }}
    runs-on: x
    steps: [{run: echo}]
`);
  assert.deepEqual(
    jobs.map((job) => job.jobId),
    ['setup'],
  );
  assert.deepEqual(errors, [
    'job "build": strategy.matrix reads needs outputs, which are not known when the run is created',
  ]);
});

test('matrix mistakes are errors, not exceptions', () => {
  const unknownExclude = expand(`on: push
jobs:
  a:
    strategy: {matrix: {os: [x], exclude: [{arch: y}]}}
    runs-on: x
    steps: [{run: echo}]
`);
  assert.deepEqual(unknownExclude.errors, [
    'job "a": matrix exclude key "arch" does not match any key within the matrix',
  ]);

  const notAList = expand(`on: push
jobs:
  a:
    strategy: {matrix: {os: '\${{ vars.RUNNER }}'}}
    runs-on: x
    steps: [{run: echo}]
`);
  assert.deepEqual(notAList.errors, ['job "a": matrix key "os" must be a list']);

  const axes = Array.from({ length: 3 }, (_, i) => `        k${i}: [${Array.from({ length: 7 }, (_, j) => j)}]`).join(
    '\n',
  );
  const tooBig = expand(
    `on: push\njobs:\n  a:\n    strategy:\n      matrix:\n${axes}\n    runs-on: x\n    steps: [{run: echo}]\n`,
  );
  assert.deepEqual(tooBig.errors, ['job "a": matrix has 343 combinations, more than 256']);
});

test('include-only matrices and fully excluded matrices', () => {
  const { jobs } = expand(`on: push
jobs:
  only:
    strategy:
      matrix:
        include: [{site: b}, {site: a, extra: 1}]
    runs-on: x
    steps: [{run: echo}]
  none:
    strategy:
      matrix:
        os: [x]
        exclude: [{os: x}]
    runs-on: x
    steps: [{run: echo}]
`);
  assert.deepEqual(
    jobs.map((job) => job.name),
    ['only (1, a)', 'only (b)', 'none'],
  );
  assert.equal(readPayload(jobs[2] as ExpandedJob).job.strategy, undefined);
});

test('runs-on: expressions with matrix and vars, lists, and the group form', () => {
  const { jobs, errors } = expand(`on: push
jobs:
  a:
    strategy: {matrix: {arch: [arm64]}}
    runs-on: ['\${{ vars.RUNNER }}', '\${{ matrix.arch }}', '\${{ vars.MISSING }}']
    steps: [{run: echo}]
  b:
    runs-on: {group: big, labels: [gpu]}
    steps: [{run: echo}]
  c:
    runs-on: \${{ fromJSON('["one","two"]') }}
    steps: [{run: echo}]
`);
  assert.deepEqual(errors, []);
  // act's FlattenRunsOnNode: labels, then the group; an unset variable leaves no empty label.
  assert.deepEqual(
    jobs.map((job) => job.runsOn),
    [
      ['docker', 'arm64'],
      ['gpu', 'big'],
      ['one', 'two'],
    ],
  );
  assert.deepEqual(readPayload(jobs[1] as ExpandedJob).job['runs-on'], ['gpu', 'big']);
});

test('runs-on that names no label, or needs outputs, is an error', () => {
  const { jobs, errors } = expand(`on: push
jobs:
  a:
    runs-on: \${{ vars.MISSING }}
    steps: [{run: echo}]
  b:
    needs: a
    runs-on: \${{ needs.a.outputs.label }}
    steps: [{run: echo}]
`);
  assert.deepEqual(jobs, []);
  assert.deepEqual(errors, [
    'job "a": runs-on evaluates to no runner label',
    'job "b": runs-on reads needs outputs, which are not known when the run is created',
  ]);
});

test('a job that calls a reusable workflow keeps its uses and has no labels', () => {
  const { jobs, errors } = expand(`on: push
jobs:
  call:
    uses: ./.forgejo/workflows/deploy.yml
    with: {env: prod}
    secrets: inherit
`);
  assert.deepEqual(errors, []);
  assert.deepEqual(
    jobs.map((job) => [job.jobId, job.name, job.runsOn]),
    [['call', 'call', []]],
  );
  assert.deepEqual(readPayload(jobs[0] as ExpandedJob).job, {
    name: 'call',
    uses: './.forgejo/workflows/deploy.yml',
    with: { env: 'prod' },
    secrets: 'inherit',
  });
});

test('aliases are written out in the payload', () => {
  const { jobs } = expand(`on: push
jobs:
  a:
    runs-on: x
    steps: &steps [{run: echo shared}]
  b:
    runs-on: y
    steps: *steps
`);
  assert.equal(jobs.length, 2);
  assert.deepEqual(readPayload(jobs[1] as ExpandedJob).job.steps, [{ run: 'echo shared' }]);
  assert.doesNotMatch(jobs[0]?.workflowPayload ?? '', /&steps/);
  assert.doesNotMatch(jobs[1]?.workflowPayload ?? '', /\*steps/);
});

test('names are cut to 255 bytes on a character boundary, with an ellipsis', () => {
  const { jobs } = expand(
    `on: push\njobs:\n  a:\n    name: ${'é'.repeat(200)}\n    runs-on: x\n    steps: [{run: echo}]\n`,
  );
  const name = jobs[0]?.name ?? '';
  assert.equal(Buffer.byteLength(name) <= 255, true);
  assert.equal(name, `${'é'.repeat(126)}…`);
});

test('an invalid workflow expands to its errors and no jobs', () => {
  const parsed = parseWorkflow(
    'ci.yml',
    'on: push\njobs:\n  b:\n    needs: x\n    runs-on: y\n    steps: [{run: echo}]\n',
  );
  const { jobs, errors } = expandJobs(parsed, CONTEXT);
  assert.deepEqual(jobs, []);
  assert.deepEqual(errors, parsed.errors);
  assert.equal(errors.length > 0, true);
});

test('the same parsed workflow expands again with another context', () => {
  const parsed = parseWorkflow(
    'ci.yml',
    `on: push\njobs:\n  a:\n    runs-on: \${{ vars.RUNNER }}\n    steps: [{run: echo}]\n`,
  );
  const first = expandJobs(parsed, CONTEXT);
  const second = expandJobs(parsed, { ...CONTEXT, vars: { RUNNER: 'other' } });
  assert.deepEqual(first.jobs[0]?.runsOn, ['docker']);
  assert.deepEqual(second.jobs[0]?.runsOn, ['other']);
  assert.match(second.jobs[0]?.workflowPayload ?? '', /runs-on: "other"/);
});

test('run title: run-name evaluated, undefined when absent or failing', () => {
  const withTitle = parseWorkflow(
    'ci.yml',
    `run-name: Deploy \${{ inputs.target }} by @\${{ github.actor }}\non:\n  workflow_dispatch:\n    inputs: {target: {}}\njobs:\n  a:\n    runs-on: x\n    steps: [{run: echo}]\n`,
  );
  assert.equal(evaluateRunTitle(withTitle, { ...CONTEXT, inputs: { target: 'prod' } }), 'Deploy prod by @alice');

  const without = parseWorkflow('ci.yml', 'on: push\njobs:\n  a:\n    runs-on: x\n    steps: [{run: echo}]\n');
  assert.equal(evaluateRunTitle(without, CONTEXT), undefined);

  const failing = parseWorkflow(
    'ci.yml',
    `run-name: \${{ fromJSON('not json') }}\non: push\njobs:\n  a:\n    runs-on: x\n    steps: [{run: echo}]\n`,
  );
  assert.deepEqual(failing.errors, []);
  assert.equal(evaluateRunTitle(failing, CONTEXT), undefined);
});

// --- limits ---------------------------------------------------------------------------------

/** `count` jobs, each a matrix of `legs` legs (legs = 2^k), each leg's steps about `stepBytes` long. */
function matrixWorkflow(count: number, legs: number, stepBytes = 10): string {
  const axes = Math.log2(legs);
  const lines = ['on: push', 'jobs:'];
  for (let i = 0; i < count; i += 1) {
    lines.push(`  j${i}:`, '    runs-on: x', '    strategy:', '      matrix:');
    for (let a = 0; a < axes; a += 1) lines.push(`        a${a}: [0, 1]`);
    lines.push(`    steps: [{run: echo ${'s'.repeat(stepBytes)}}]`);
  }
  return `${lines.join('\n')}\n`;
}

function payloadBytes(jobs: readonly ExpandedJob[]): number {
  return jobs.reduce((sum, job) => sum + Buffer.byteLength(job.workflowPayload), 0);
}

test('maxJobs: matrix legs are counted across jobs; exactly the limit is allowed, one more is not', () => {
  const parsed = parseWorkflow('ci.yml', matrixWorkflow(3, 8));
  const fits = expandJobs(parsed, CONTEXT, { maxJobs: 24, maxPayloadBytes: Infinity });
  assert.deepEqual([fits.jobs.length, fits.errors, fits.exceeded], [24, [], undefined]);
  const over = expandJobs(parsed, CONTEXT, { maxJobs: 23, maxPayloadBytes: Infinity });
  assert.deepEqual(over, { jobs: [], errors: [], exceeded: { limit: 'jobs', max: 23 } });
});

test("maxJobs stops before payloads are built: the issue's 20 jobs of 256 legs are refused at once", () => {
  const parsed = parseWorkflow('ci.yml', matrixWorkflow(20, 256));
  assert.deepEqual(parsed.errors, []);
  const started = performance.now();
  const { exceeded } = expandJobs(parsed, CONTEXT, { maxJobs: 256, maxPayloadBytes: Infinity });
  const elapsed = performance.now() - started;
  assert.deepEqual(exceeded, { limit: 'jobs', max: 256 });
  // Two jobs' legs are listed (about 20 ms), not 5,120 payloads written (about 2.7 s).
  assert.ok(elapsed < 500, `${elapsed} ms`);
});

test('maxPayloadBytes: the payloads of all jobs are counted in UTF-8 bytes; exactly the limit is allowed', () => {
  const parsed = parseWorkflow('ci.yml', matrixWorkflow(2, 4).replace(/echo s+/g, 'echo ünïcödé'));
  const all = expandJobs(parsed, CONTEXT);
  const total = payloadBytes(all.jobs);
  assert.equal(all.jobs.length, 8);
  assert.deepEqual(expandJobs(parsed, CONTEXT, { maxJobs: 8, maxPayloadBytes: total }).jobs.length, 8);
  assert.deepEqual(expandJobs(parsed, CONTEXT, { maxJobs: 8, maxPayloadBytes: total - 1 }), {
    jobs: [],
    errors: [],
    exceeded: { limit: 'payload-bytes', max: total - 1 },
  });
});

test('maxPayloadBytes is weighed before a job is rendered: 256 legs of a 100 KB job are refused without writing 25 MB', () => {
  const parsed = parseWorkflow('ci.yml', matrixWorkflow(1, 256, 100_000));
  assert.deepEqual(parsed.errors, []);
  const started = performance.now();
  const { exceeded } = expandJobs(parsed, CONTEXT, { maxJobs: 256, maxPayloadBytes: 1024 * 1024 });
  const elapsed = performance.now() - started;
  assert.deepEqual(exceeded, { limit: 'payload-bytes', max: 1024 * 1024 });
  assert.ok(elapsed < 200, `${elapsed} ms`);
});

test('a run over a limit keeps the errors found so far: the run fails for both reasons', () => {
  const bad = `on: push\njobs:\n  bad:\n    runs-on: x\n    strategy: {matrix: "\${{ fromJSON('[1]') }}"}\n    steps: [{run: echo}]\n`;
  const parsed = parseWorkflow('ci.yml', bad + (matrixWorkflow(1, 8).split('jobs:\n')[1] ?? ''));
  assert.deepEqual(parsed.errors, []);
  const error = 'job "bad": strategy.matrix must be a mapping';
  assert.deepEqual(expandJobs(parsed, CONTEXT, { maxJobs: 4, maxPayloadBytes: Infinity }), {
    jobs: [],
    errors: [error],
    exceeded: { limit: 'jobs', max: 4 },
  });
  const planned = expandJobs(parsed, CONTEXT, { maxJobs: 8, maxPayloadBytes: Infinity });
  assert.deepEqual([planned.jobs.length, planned.errors, planned.exceeded], [8, [error], undefined]);
});
