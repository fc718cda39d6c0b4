// A job's own `concurrency:` (a string, or `{group, cancel-in-progress}`), as
// Gitea 1.26 reads it (modules/actions/jobparser EvaluateConcurrency, called
// from services/actions/concurrency.go EvaluateJobConcurrencyFillModel): kept
// as written when the run is created, evaluated when the job becomes ready,
// with the contexts a job-level group may read: github, vars, inputs, matrix,
// strategy and needs (results and outputs of the jobs it needs).
import { isMap, isScalar } from 'yaml';
import { cancelInProgressOf } from './concurrency.ts';
import { ExpressionScope, readsContext } from './expressions.ts';

/** The block as written: the group template and `cancel-in-progress` (a boolean or an expression). */
export interface RawJobConcurrency {
  group: string;
  cancel?: boolean | string;
}

/** One matrix leg's block: the raw block with the leg's `matrix` and `strategy` contexts. */
export interface LegConcurrency extends RawJobConcurrency {
  matrix: Record<string, unknown>;
  strategy: Record<string, unknown>;
}

/** What the job's group is evaluated with, stored with the job until it is ready (JSON). */
export interface StoredJobConcurrency extends LegConcurrency {
  /** The run's github context without `event` (read again from the run's payload). */
  github: Record<string, unknown>;
  vars: Record<string, string>;
  inputs: Record<string, unknown>;
}

export interface JobConcurrency {
  /** Lowercased: groups are case-insensitive; '' means the job has no group. */
  group: string;
  cancelInProgress: boolean;
}

/** The `needs` context entry of one needed job. */
export interface NeedContext {
  result: string;
  outputs: Record<string, string>;
}

/**
 * What a leg's block is stored with: of the run's github, vars and inputs only
 * the contexts the block reads (a matrix of many legs must not store every
 * variable in each), the others empty.
 */
export function storedJobConcurrency(
  leg: LegConcurrency,
  run: Pick<StoredJobConcurrency, 'github' | 'vars' | 'inputs'>,
): StoredJobConcurrency {
  const templates = [leg.group, typeof leg.cancel === 'string' ? leg.cancel : ''];
  const reads = (name: string): boolean => templates.some((template) => readsContext(template, name));
  return {
    ...leg,
    github: reads('github') ? run.github : {},
    vars: reads('vars') ? run.vars : {},
    inputs: reads('inputs') ? run.inputs : {},
  };
}

/** The job's `concurrency:` node as written, or undefined when the job has none. */
export function rawJobConcurrency(node: unknown): RawJobConcurrency | undefined {
  if (isScalar(node)) {
    if (node.value === null || node.value === undefined) return undefined;
    return { group: String(node.value) };
  }
  if (!isMap(node)) return undefined;
  const block = node.toJSON() as Record<string, unknown>;
  const group = block.group === undefined || block.group === null ? '' : String(block.group);
  const cancel = block['cancel-in-progress'];
  if (typeof cancel === 'boolean' || typeof cancel === 'string') return { group, cancel };
  return { group };
}

/**
 * The job's group and cancel flag. Throws ExpressionFailure when an
 * expression cannot be evaluated (an unknown context, a need without the
 * output, a `cancel-in-progress` that is not a boolean).
 */
export function evaluateJobConcurrency(
  stored: StoredJobConcurrency,
  event: unknown,
  needs: Record<string, NeedContext>,
): JobConcurrency {
  const scope = ExpressionScope.of({
    github: { ...stored.github, event },
    vars: stored.vars,
    inputs: stored.inputs,
    matrix: stored.matrix,
    strategy: stored.strategy,
    needs,
  });
  const group = scope.interpolate(stored.group).toLowerCase();
  const cancel = cancelInProgressOf(stored.cancel, (template) => scope.evaluate(template)) ?? false;
  return { group, cancelInProgress: cancel };
}
