import { test } from 'node:test';
import assert from 'node:assert/strict';
import { expandJobs } from './expand-jobs.ts';
import { ExpressionFailure } from './expressions.ts';
import { evaluateJobConcurrency, storedJobConcurrency } from './job-concurrency.ts';
import type { StoredJobConcurrency } from './job-concurrency.ts';
import { parseWorkflow } from './parse.ts';

const CONTEXT = { github: { workflow: 'CI', ref_name: 'Main' }, vars: { STAGE: 'Prod' }, inputs: { env: 'EU' } };

function legs(jobs: string) {
  const parsed = parseWorkflow('ci.yml', `on: workflow_dispatch\njobs:\n${jobs}`);
  assert.deepEqual(parsed.errors, [], 'the test workflow itself must be valid');
  return expandJobs(parsed, CONTEXT).jobs;
}

function stored(group: string, cancel?: boolean | string): StoredJobConcurrency {
  return {
    group,
    ...(cancel !== undefined ? { cancel } : {}),
    matrix: { os: 'Linux' },
    strategy: { 'job-index': 0, 'job-total': 1 },
    ...CONTEXT,
  };
}

test('a job keeps its block as written, with its own matrix leg; a job without one has none', () => {
  const jobs = legs(
    '  a:\n    runs-on: x\n    strategy:\n      matrix:\n        os: [linux, mac]\n' +
      "    concurrency:\n      group: g-${{ matrix.os }}\n      cancel-in-progress: ${{ vars.STAGE == 'prod' }}\n" +
      '    steps:\n      - run: echo\n' +
      '  b:\n    runs-on: x\n    concurrency: plain\n    steps:\n      - run: echo\n' +
      '  c:\n    runs-on: x\n    steps:\n      - run: echo\n',
  );
  assert.deepEqual(
    jobs.map((job) => job.concurrency),
    [
      {
        group: 'g-${{ matrix.os }}',
        cancel: "${{ vars.STAGE == 'prod' }}",
        matrix: { os: 'linux' },
        strategy: { 'job-index': 0, 'job-total': 2 },
      },
      {
        group: 'g-${{ matrix.os }}',
        cancel: "${{ vars.STAGE == 'prod' }}",
        matrix: { os: 'mac' },
        strategy: { 'job-index': 1, 'job-total': 2 },
      },
      { group: 'plain', matrix: {}, strategy: { 'job-index': 0, 'job-total': 1 } },
      undefined,
    ],
  );
});

test('the group reads github, vars, inputs, matrix, needs and the event, lowercased', () => {
  const needs = { build: { result: 'success', outputs: { target: 'Blue' } } };
  assert.deepEqual(
    evaluateJobConcurrency(
      stored(
        '${{ github.workflow }}-${{ vars.STAGE }}-${{ inputs.env }}-${{ matrix.os }}-${{ needs.build.outputs.target }}-${{ github.event.n }}',
      ),
      { n: 'X' },
      needs,
    ),
    { group: 'ci-prod-eu-linux-blue-x', cancelInProgress: false },
  );
  assert.deepEqual(evaluateJobConcurrency(stored('g', true), {}, {}), { group: 'g', cancelInProgress: true });
  assert.deepEqual(evaluateJobConcurrency(stored('g', "${{ vars.STAGE == 'prod' }}"), {}, {}), {
    group: 'g',
    cancelInProgress: true,
  });
  assert.deepEqual(evaluateJobConcurrency(stored(''), {}, {}), { group: '', cancelInProgress: false });
});

test('a group or cancel flag that does not evaluate throws ExpressionFailure', () => {
  assert.throws(() => evaluateJobConcurrency(stored("${{ fromJSON('{') }}"), {}, {}), ExpressionFailure);
  assert.throws(() => evaluateJobConcurrency(stored('${{ secrets.X }}'), {}, {}), ExpressionFailure);
  assert.throws(() => evaluateJobConcurrency(stored('g', 'maybe'), {}, {}), ExpressionFailure);
});

test('a stored block keeps only the run contexts it reads', () => {
  const leg = { group: 'g-${{ vars.STAGE }}', cancel: '${{ inputs.env == 1 }}', matrix: {}, strategy: {} };
  assert.deepEqual(storedJobConcurrency(leg, CONTEXT), {
    ...leg,
    github: {},
    vars: CONTEXT.vars,
    inputs: CONTEXT.inputs,
  });
  assert.deepEqual(storedJobConcurrency({ ...leg, group: 'plain', cancel: true }, CONTEXT), {
    ...leg,
    group: 'plain',
    cancel: true,
    github: {},
    vars: {},
    inputs: {},
  });
});
