// What a run is planned with: the contexts known before any job runs (github,
// vars, inputs), and the expression scope built from them. Both the jobs'
// expansion (expand-jobs.ts) and the run's and jobs' concurrency
// (concurrency.ts, job-concurrency.ts) evaluate in this scope, so it lives
// apart from either.

import { ExpressionScope } from './expressions.ts';
import type { ParsedWorkflow } from './parse.ts';

export interface ExpansionContext {
  /** github context: event_name, ref, ref_name, sha, repository, actor, event (payload), … */
  github: Record<string, unknown>;
  vars: Record<string, string>;
  /** Dispatch inputs as strings; inputs declared `type: boolean` are read as booleans. */
  inputs: Record<string, string>;
}

/** github, vars and inputs; inputs declared `type: boolean` read as true/false (Forgejo does). */
export function planningScope(parsed: ParsedWorkflow, ctx: ExpansionContext): ExpressionScope {
  return ExpressionScope.of({ github: ctx.github, vars: ctx.vars, inputs: typedInputs(parsed, ctx) });
}

/** The `inputs` context: dispatch inputs as strings, those declared `type: boolean` as booleans. */
export function typedInputs(parsed: ParsedWorkflow, ctx: ExpansionContext): Record<string, unknown> {
  const declared = parsed.events.workflow_dispatch?.inputs ?? {};
  const inputs: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(ctx.inputs)) {
    const isBoolean = String(declared[key]?.type) === 'boolean' && (value === 'true' || value === 'false');
    // An own data property, so that an input named `__proto__` stays an input.
    Object.defineProperty(inputs, key, {
      value: isBoolean ? value === 'true' : value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return inputs;
}
