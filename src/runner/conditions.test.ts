import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ExpressionScope } from '../modules/workflows/expressions.ts';
import { conditionSource, evaluateCondition, statusFunctions } from './conditions.ts';
import type { JobStatus } from './conditions.ts';

test('an if: without a status function is read as success() && (condition)', () => {
  assert.equal(conditionSource(undefined), 'success()');
  assert.equal(conditionSource("${{ github.ref == 'x' }}"), "success() && (github.ref == 'x')");
  assert.equal(conditionSource('always()'), 'always()');
  assert.equal(conditionSource('${{ failure() }}'), 'failure()');
});

test('status functions follow the job status', () => {
  let status: JobStatus = 'success';
  const scope = ExpressionScope.of(
    { env: { A: '1' } },
    statusFunctions(() => status),
  );
  assert.equal(evaluateCondition(scope, "env.A == '1'"), true);
  status = 'failure';
  assert.equal(evaluateCondition(scope, "env.A == '1'"), false);
  assert.equal(evaluateCondition(scope, 'failure()'), true);
  assert.equal(evaluateCondition(scope, 'always()'), true);
  status = 'cancelled';
  assert.equal(evaluateCondition(scope, 'cancelled()'), true);
  assert.equal(evaluateCondition(scope, 'failure()'), false);
});
