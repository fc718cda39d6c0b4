// `if:` conditions and status functions as the runner evaluates them
// (GitHub's "Evaluate expressions in workflows and actions"; act
// act/runner/expression.go EvalBool): the condition may be written with or
// without `${{ }}`; one that calls no status function is read as
// `success() && (condition)`; an empty condition is `success()`.
import { data } from '@actions/expressions';
import type { FunctionDefinition } from '@actions/expressions/funcs/info';
import type { ExpressionScope } from '../modules/workflows/expressions.ts';

export type JobStatus = 'success' | 'failure' | 'cancelled';

/**
 * success(), failure(), always() and cancelled() over a live job status. A
 * composite action's steps see their own status through `status` too.
 */
export function statusFunctions(status: () => JobStatus): FunctionDefinition[] {
  const fn = (name: string, value: () => boolean): FunctionDefinition => ({
    name,
    minArgs: 0,
    maxArgs: 0,
    call: () => new data.BooleanData(value()),
  });
  return [
    fn('success', () => status() === 'success'),
    fn('failure', () => status() === 'failure'),
    fn('always', () => true),
    fn('cancelled', () => status() === 'cancelled'),
  ];
}

const STATUS_CALL = /\b(success|failure|always|cancelled)\s*\(/i;

/** The expression source of an `if:` value, without `${{ }}` and with the implied success(). */
export function conditionSource(condition: unknown): string {
  if (condition === undefined || condition === null) return 'success()';
  if (typeof condition === 'boolean' || typeof condition === 'number') return String(condition);
  let text = String(condition).trim();
  if (text === '') return 'success()';
  const wrapped = /^\$\{\{([\s\S]*)\}\}$/.exec(text);
  if (wrapped !== null && !wrapped[1]?.includes('}}')) text = (wrapped[1] ?? '').trim();
  return STATUS_CALL.test(text) ? text : `success() && (${text})`;
}

/** Truthiness of an expression value (GitHub's coercion to boolean). */
export function truthy(value: unknown): boolean {
  if (value === null || value === undefined || value === false || value === '') return false;
  if (typeof value === 'number') return value !== 0 && !Number.isNaN(value);
  return true;
}

export function evaluateCondition(scope: ExpressionScope, condition: unknown): boolean {
  return truthy(scope.evaluate(`\${{ ${conditionSource(condition)} }}`));
}
