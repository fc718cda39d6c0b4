// A payload's facts: the step names and workflow name a parse gives, the same
// from the memo as parsed anew, and a memo that stays within its bounds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { expandJobs } from './expand-jobs.ts';
import { parseWorkflow } from './parse.ts';
import { parsePayloadFacts, PayloadFactsMemo } from './payload-facts.ts';

function payloads(workflow: string): string[] {
  const parsed = parseWorkflow('ci.yml', workflow);
  assert.deepEqual(parsed.errors, [], 'the test workflow itself must be valid');
  return expandJobs(parsed, { github: { workflow: 'ci.yml' }, vars: {}, inputs: {} }).jobs.map(
    (job) => job.workflowPayload,
  );
}

test('the steps are named as jobparser names them, and the workflow by its name:', () => {
  const [payload] = payloads(`name: Build all
on: push
jobs:
  build:
    runs-on: docker
    steps:
      - name: Check out
        uses: actions/checkout@v4
      - uses: actions/setup-node@v4
      - run: npm test
      - id: only-id
        run: ''
`);
  const facts = parsePayloadFacts(payload as string);
  assert.deepEqual(facts.stepNames, ['Check out', 'actions/setup-node@v4', 'npm test', 'only-id']);
  assert.equal(facts.workflowName, 'Build all');
});

test('a payload without a name: or that does not parse has no workflow name; one that does not parse no steps', () => {
  const [unnamed] = payloads('on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: echo\n');
  assert.equal(parsePayloadFacts(unnamed as string).workflowName, null);
  assert.deepEqual(parsePayloadFacts(unnamed as string).stepNames, ['echo']);
  const broken = parsePayloadFacts('name: [unclosed\njobs: {');
  assert.equal(broken.workflowName, null);
  assert.deepEqual(broken.stepNames, []);
  assert.deepEqual(parsePayloadFacts('just a string').stepNames, []);
});

test('the memo answers what a parse answers, once per payload', () => {
  const memo = new PayloadFactsMemo();
  const legs = payloads(`name: Matrix
on: push
jobs:
  leg:
    runs-on: x
    strategy:
      matrix:
        n: [1, 2, 3]
    steps:
      - run: echo \${{ matrix.n }}
`);
  assert.equal(legs.length, 3);
  for (const payload of legs) assert.deepEqual(memo.of(payload), parsePayloadFacts(payload));
  // A copy of the text (as a database read gives) finds the same facts.
  const first = legs[0] as string;
  assert.equal(memo.of(first.split('').join('')), memo.of(first));
  assert.equal(memo.held.entries, 3);
  assert.ok(Object.isFrozen(memo.of(first).stepNames), 'callers share the names, so they cannot change them');
});

test('the memo keeps at most its entries and its characters', () => {
  const byEntries = new PayloadFactsMemo(2, 1_000);
  const texts = ['name: a\n', 'name: b\n', 'name: c\n'];
  for (const text of texts) byEntries.of(text);
  assert.deepEqual(byEntries.held, { entries: 2, chars: 16 });

  const byChars = new PayloadFactsMemo(100, 20);
  for (const text of texts) byChars.of(text);
  assert.deepEqual(byChars.held, { entries: 2, chars: 16 });
  const long = `name: ${'x'.repeat(30)}\n`;
  assert.equal(byChars.of(long).workflowName, 'x'.repeat(30), 'a payload over the bound is still answered');
  assert.deepEqual(byChars.held, { entries: 2, chars: 16 }, 'but not kept');
});
