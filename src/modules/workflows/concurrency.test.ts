import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConcurrencyMode, defaultConcurrencyGroup, evaluateRunConcurrency } from './concurrency.ts';
import type { ConcurrencyRun } from './concurrency.ts';
import type { ExpansionContext } from './planning-scope.ts';
import { ExpressionFailure } from './expressions.ts';
import { parseWorkflow } from './parse.ts';

const CONTEXT: ExpansionContext = {
  github: { event_name: 'push', ref: 'refs/heads/Main', ref_name: 'Main', workflow: 'CI' },
  vars: { STAGE: 'Prod' },
  inputs: { target: 'Staging', fast: 'true' },
};

const PUSH: ConcurrencyRun = { ref: 'refs/heads/Main', workflowId: 'ci.yml', triggerEvent: 'push', event: 'push' };
const DISPATCH: ConcurrencyRun = { ...PUSH, triggerEvent: 'workflow_dispatch', event: 'workflow_dispatch' };

const JOBS = 'jobs:\n  a:\n    runs-on: x\n    steps:\n      - run: echo\n';

function evaluate(block: string, run: ConcurrencyRun = PUSH, on = 'on: [push, workflow_dispatch]\n') {
  const parsed = parseWorkflow('ci.yml', `${on}${block}${JOBS}`);
  assert.deepEqual(parsed.errors, [], 'the test workflow itself must be valid');
  return evaluateRunConcurrency(parsed, CONTEXT, run);
}

test("Forgejo's modes table", () => {
  const auto = defaultConcurrencyGroup(PUSH);
  assert.equal(auto, 'refs/heads/main_ci.yml_push__auto', 'the default group, lowercased');
  // cancel-in-progress absent: push (and pull_request_sync) auto-cancel, anything else is unlimited.
  assert.deepEqual(evaluate(''), { group: auto, mode: ConcurrencyMode.cancelInProgress });
  assert.deepEqual(evaluate('', DISPATCH), {
    group: 'refs/heads/main_ci.yml_workflow_dispatch__auto',
    mode: ConcurrencyMode.unlimited,
  });
  assert.deepEqual(evaluate('concurrency: deploy\n', DISPATCH), { group: 'deploy', mode: ConcurrencyMode.unlimited });
  assert.deepEqual(evaluate('concurrency: deploy\n'), { group: 'deploy', mode: ConcurrencyMode.cancelInProgress });
  // true: cancel in progress, whatever the event.
  assert.deepEqual(evaluate('concurrency:\n  group: deploy\n  cancel-in-progress: true\n', DISPATCH), {
    group: 'deploy',
    mode: ConcurrencyMode.cancelInProgress,
  });
  // false: queue behind with a group, unlimited without.
  assert.deepEqual(evaluate('concurrency:\n  group: deploy\n  cancel-in-progress: false\n'), {
    group: 'deploy',
    mode: ConcurrencyMode.queueBehind,
  });
  // A group that comes out empty is no group.
  assert.deepEqual(evaluate('concurrency:\n  group: ${{ inputs.missing }}\n  cancel-in-progress: false\n'), {
    group: auto,
    mode: ConcurrencyMode.unlimited,
  });
});

test('the group is evaluated with github, vars and inputs, and lowercased', () => {
  assert.equal(
    evaluate('concurrency: ${{ github.workflow }}-${{ github.ref_name }}-${{ vars.STAGE }}-${{ inputs.target }}\n')
      .group,
    'ci-main-prod-staging',
  );
});

test('cancel-in-progress may be an expression; one that is not a boolean is an error', () => {
  const block = (value: string) => `concurrency:\n  group: g\n  cancel-in-progress: ${value}\n`;
  assert.equal(evaluate(block("${{ github.ref_name == 'Main' }}")).mode, ConcurrencyMode.cancelInProgress);
  assert.equal(evaluate(block("${{ github.ref_name != 'Main' }}")).mode, ConcurrencyMode.queueBehind);
  assert.equal(evaluate(block('${{ inputs.fast }}')).mode, ConcurrencyMode.cancelInProgress);
  assert.throws(() => evaluate(block('${{ inputs.target }}')), ExpressionFailure);
  assert.throws(() => evaluate("concurrency: ${{ fromJSON('{') }}\n"), ExpressionFailure);
});
