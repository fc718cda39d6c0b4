import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseWorkflow } from './parse.ts';

const STEPS = 'steps: [{run: echo}]';

test('a simple workflow: name, run-name, events, jobs', () => {
  const parsed = parseWorkflow(
    'ci.yml',
    `name: CI
run-name: Build \${{ github.ref_name }}
on: push
jobs:
  build:
    runs-on: ubuntu-latest
    ${STEPS}
`,
  );
  assert.deepEqual(parsed.errors, []);
  assert.equal(parsed.name, 'CI');
  assert.equal(parsed.runName, 'Build ${{ github.ref_name }}');
  assert.deepEqual(parsed.events, { push: {} });
  assert.deepEqual(parsed.jobs, [{ id: 'build', needs: [], hasIf: false }]);
  assert.ok(parsed.source);
});

test('name and run-name are absent when the file has none', () => {
  const parsed = parseWorkflow('ci.yml', `on: push\njobs:\n  a:\n    runs-on: x\n    ${STEPS}\n`);
  assert.equal(parsed.name, undefined);
  assert.equal(parsed.runName, undefined);
});

test('on: as a string, a list and a map', () => {
  const job = `jobs:\n  a:\n    runs-on: x\n    ${STEPS}\n`;
  assert.deepEqual(parseWorkflow('a.yml', `on: pull_request\n${job}`).events, { pull_request: {} });
  assert.deepEqual(parseWorkflow('b.yml', `on: [push, issues]\n${job}`).events, { push: {}, issues: {} });
  assert.deepEqual(
    parseWorkflow('c.yml', `on:\n  issues:\n    types: [opened]\n  schedule:\n    - cron: '0 3 * * *'\n${job}`).events,
    { issues: { types: ['opened'] }, schedule: [{ cron: '0 3 * * *' }] },
  );
});

test('push filters and workflow_dispatch inputs are normalised by the converter', () => {
  const parsed = parseWorkflow(
    'ci.yml',
    `on:
  push:
    branches: [main, 'release/**']
    tags-ignore: v0.*
    paths: [src/**]
  workflow_dispatch:
    inputs:
      target:
        description: Where to
        required: true
      verbose:
        type: boolean
        default: true
      level:
        type: choice
        options: [low, high]
        default: low
jobs:
  a:
    runs-on: x
    ${STEPS}
`,
  );
  assert.deepEqual(parsed.errors, []);
  assert.deepEqual(parsed.events.push, {
    branches: ['main', 'release/**'],
    'tags-ignore': ['v0.*'],
    paths: ['src/**'],
  });
  assert.deepEqual(parsed.events.workflow_dispatch?.inputs, {
    target: { type: 'string', description: 'Where to', required: true },
    verbose: { type: 'boolean', default: true },
    level: { type: 'choice', options: ['low', 'high'], default: 'low' },
  });
});

test('jobs keep file order, needs as a string or a list, and whether they declare if', () => {
  const parsed = parseWorkflow(
    'ci.yml',
    `on: push
jobs:
  zeta:
    runs-on: x
    ${STEPS}
  alpha:
    needs: zeta
    if: always()
    runs-on: x
    ${STEPS}
  mid:
    needs: [zeta, alpha]
    if: \${{ github.event_name == 'push' }}
    runs-on: x
    ${STEPS}
  reuse:
    uses: ./.forgejo/workflows/other.yml
`,
  );
  assert.deepEqual(parsed.errors, []);
  assert.deepEqual(parsed.jobs, [
    { id: 'zeta', needs: [], hasIf: false },
    { id: 'alpha', needs: ['zeta'], hasIf: true },
    { id: 'mid', needs: ['zeta', 'alpha'], hasIf: true },
    { id: 'reuse', needs: [], hasIf: false },
  ]);
});

test('invalid YAML is an error with its position, never an exception', () => {
  const parsed = parseWorkflow('bad.yml', `on: push\njobs:\n  a:\n    runs-on: x\n  b: [oops\n`);
  assert.equal(parsed.errors.length > 0, true);
  assert.match(parsed.errors[0] ?? '', /^bad\.yml: .*line \d+, column \d+/);
  assert.deepEqual(parsed.events, {});
  assert.deepEqual(parsed.jobs, []);
  assert.equal(parsed.source, undefined);
});

test('schema errors name the line and column', () => {
  const parsed = parseWorkflow('ci.yml', `on: push\njobs:\n  a:\n    runs-on: x\n    stepz: [{run: echo}]\n`);
  assert.ok(
    parsed.errors.some((error) => /ci\.yml \(Line: 5, Col: 5\): Unexpected value 'stepz'/.test(error)),
    parsed.errors.join('\n'),
  );
  assert.equal(parsed.source, undefined);
});

test('needs of an unknown job and dependency cycles are errors', () => {
  const unknown = parseWorkflow(
    'ci.yml',
    `on: push\njobs:\n  a:\n    runs-on: x\n    ${STEPS}\n  b:\n    needs: [a, x]\n    runs-on: x\n    ${STEPS}\n`,
  );
  assert.ok(
    unknown.errors.some((error) => error.includes("Job 'b' depends on unknown job 'x'")),
    unknown.errors.join('\n'),
  );

  const cycle = parseWorkflow(
    'ci.yml',
    `on: push\njobs:\n  a:\n    runs-on: x\n    ${STEPS}\n  b:\n    needs: c\n    runs-on: x\n    ${STEPS}\n  c:\n    needs: b\n    runs-on: x\n    ${STEPS}\n`,
  );
  assert.ok(
    cycle.errors.some((error) => error.includes('cycle')),
    cycle.errors.join('\n'),
  );
  // The events are still known, for a caller that reports the broken workflow on its trigger.
  assert.deepEqual(cycle.events, { push: {} });
});

test('empty files, scalars, several documents and missing sections are errors', () => {
  for (const content of [
    '',
    'just text',
    'on: push\n---\non: push\n',
    'on: push\n',
    'jobs:\n  a:\n    runs-on: x\n    steps: [{run: echo}]\n',
  ]) {
    const parsed = parseWorkflow('w.yml', content);
    assert.equal(parsed.errors.length > 0, true, JSON.stringify(content));
    assert.equal(parsed.source, undefined);
  }
});

test('duplicate job ids are errors', () => {
  const parsed = parseWorkflow(
    'ci.yml',
    `on: push\njobs:\n  a:\n    runs-on: x\n    ${STEPS}\n  a:\n    runs-on: y\n    ${STEPS}\n`,
  );
  assert.ok(
    parsed.errors.some((error) => error.includes("'a' is already defined")),
    parsed.errors.join('\n'),
  );
});

test('aliases are accepted, an alias bomb is refused quickly', () => {
  const anchored = parseWorkflow(
    'ci.yml',
    `on: push\nenv: &shared {A: '1'}\njobs:\n  a:\n    runs-on: x\n    env: *shared\n    ${STEPS}\n`,
  );
  assert.deepEqual(anchored.errors, []);

  let bomb = 'on: push\nx0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n';
  for (let level = 1; level < 9; level++)
    bomb += `x${level}: &a${level} [${Array(10)
      .fill(`*a${level - 1}`)
      .join(', ')}]\n`;
  bomb += `jobs:\n  a:\n    runs-on: x\n    env: {A: *a8}\n    ${STEPS}\n`;
  const started = Date.now();
  const parsed = parseWorkflow('bomb.yml', bomb);
  assert.ok(Date.now() - started < 5000);
  assert.deepEqual(parsed.errors, ['bomb.yml: more than 200000 YAML nodes once aliases are expanded']);
});

test('a filter pattern over the limits makes the workflow invalid (its on: is dropped); malformed but small patterns do not', () => {
  const long = 'a'.repeat(1001);
  const stars = '*a'.repeat(65);
  const parsed = parseWorkflow(
    'ci.yml',
    `on:\n  push:\n    branches: [main, '${long}']\n    paths-ignore: ['!${stars}']\njobs:\n  a:\n    runs-on: x\n    ${STEPS}\n`,
  );
  assert.deepEqual(parsed.errors, [
    'ci.yml: on.push.branches[1]: pattern longer than 1000 characters',
    'ci.yml: on.push.paths-ignore[0]: pattern more than 64 wildcards (*, ? and +)',
  ]);
  assert.deepEqual(parsed.events, {});
  assert.equal(parsed.source, undefined);

  const fine = parseWorkflow(
    'ci.yml',
    `on:\n  push:\n    branches: ['x[', '${'*a'.repeat(32)}']\njobs:\n  a:\n    runs-on: x\n    ${STEPS}\n`,
  );
  assert.deepEqual(fine.errors, []);
});

test('aliases of long text are refused before the workflow parser sees them: 1,000 copies of 10 KB', () => {
  const lines = [
    'on: push',
    'env:',
    `  X: &text "${'x'.repeat(10_000)}"`,
    'jobs:',
    '  a:',
    '    runs-on: x',
    '    steps:',
  ];
  for (let i = 0; i < 1000; i += 1) lines.push('      - run: *text');
  const started = Date.now();
  const parsed = parseWorkflow('text.yml', `${lines.join('\n')}\n`);
  // The workflow parser took 5 s over the 10 MB this stands for (10,000 copies: 5 minutes).
  assert.ok(Date.now() - started < 2000, `${Date.now() - started} ms`);
  assert.deepEqual(parsed.errors, ['text.yml: more than 4194304 characters of YAML text once aliases are expanded']);
});

test('many aliases cost what the same file written out costs: 3,000 aliases of one word', () => {
  const lines = ['on: push', 'env:', '  WORD: &word hello', 'jobs:', '  a:', '    runs-on: x', '    env:'];
  for (let i = 0; i < 3000; i += 1) lines.push(`      V${i}: *word`);
  lines.push(`    ${STEPS}`);
  const started = Date.now();
  const parsed = parseWorkflow('many.yml', `${lines.join('\n')}\n`);
  // The workflow parser looks each alias up by walking the whole document: this took it 20 s.
  assert.ok(Date.now() - started < 8000, `${Date.now() - started} ms`);
  assert.deepEqual(parsed.errors, []);
});

test('errors of a workflow with aliases name no line: the parser read the file written out without them', () => {
  const parsed = parseWorkflow(
    'ci.yml',
    `on: push\nx-steps: &steps [{run: echo}]\njobs:\n  a:\n    runs-on: x\n    steps: *steps\n`,
  );
  assert.deepEqual(parsed.errors, ["ci.yml: Unexpected value 'x-steps'"]);
});
