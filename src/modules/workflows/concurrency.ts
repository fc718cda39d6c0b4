// A workflow's top-level `concurrency:` (a string, or `{group, cancel-in-progress}`)
// evaluated into the group and mode a run is stored with, as Forgejo 15 does when it
// creates a run (services/actions/workflows.go ConfigureActionRunConcurrency,
// models/actions/run.go SetConcurrencyGroup / SetDefaultConcurrencyGroup). Only the
// contexts known before the run exists are offered: github, vars and inputs.
import { isMap, isScalar } from 'yaml';
import type { ExpansionContext } from './planning-scope.ts';
import { planningScope } from './planning-scope.ts';
import { ExpressionFailure } from './expressions.ts';
import type { ParsedWorkflow } from './parse.ts';

/** Forgejo's ConcurrencyMode, stored in action_run.concurrency_type (same numbers). */
export const ConcurrencyMode = {
  unlimited: 0,
  queueBehind: 1,
  cancelInProgress: 2,
} as const;

export type ConcurrencyModeValue = (typeof ConcurrencyMode)[keyof typeof ConcurrencyMode];

export interface RunConcurrency {
  /** Lowercased: groups are case-insensitive identifiers (Forgejo's SetConcurrencyGroup). */
  group: string;
  mode: ConcurrencyModeValue;
}

/** What the run is created for: the default group and the legacy auto-cancel read these. */
export interface ConcurrencyRun {
  ref: string;
  /** The workflow file name (the run's workflow_id). */
  workflowId: string;
  /** The `on:` key that matched (the run's trigger_event). */
  triggerEvent: string;
  /** The stored event type (the run's event): push and pull_request_sync auto-cancel. */
  event: string;
}

// Forgejo's HookEventPush and HookEventPullRequestSync: before concurrency groups
// existed, a new run of these cancelled the older ones of its ref and workflow.
const LEGACY_AUTO_CANCEL_EVENTS = new Set(['push', 'pull_request_sync']);

/** Before groups existed Forgejo cancelled runs of the same ref, workflow and trigger: that key, as a group. */
export function defaultConcurrencyGroup(run: ConcurrencyRun): string {
  return `${run.ref}_${run.workflowId}_${run.triggerEvent}__auto`.toLowerCase();
}

/** `cancel-in-progress` as written: a boolean, or an expression that must come out as one. */
export function cancelInProgressOf(raw: unknown, evaluate: (template: string) => unknown): boolean | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw === 'boolean') return raw;
  const value = typeof raw === 'string' ? evaluate(raw) : raw;
  if (typeof value === 'boolean') return value;
  if (value === 'true' || value === 'false') return value === 'true';
  throw new ExpressionFailure(`cancel-in-progress must be a boolean, not '${String(raw)}'`);
}

/**
 * The run's group and mode. Throws ExpressionFailure when an expression in the
 * block cannot be evaluated; the caller records it as the run's error, with
 * Forgejo's prefix. Modes (Forgejo's table): `cancel-in-progress` absent →
 * cancel in progress for push and pull_request_sync runs (the legacy
 * auto-cancel), unlimited otherwise; true → cancel in progress; false → queue
 * behind with a group, unlimited without one. No group → the default group.
 */
export function evaluateRunConcurrency(
  parsed: ParsedWorkflow,
  ctx: ExpansionContext,
  run: ConcurrencyRun,
): RunConcurrency {
  const node: unknown = parsed.source?.root.get('concurrency', true);
  let groupTemplate = '';
  let rawCancel: unknown;
  if (isScalar(node)) {
    groupTemplate = node.value === null || node.value === undefined ? '' : String(node.value);
  } else if (isMap(node)) {
    const block = node.toJSON() as Record<string, unknown>;
    groupTemplate = block.group === undefined || block.group === null ? '' : String(block.group);
    rawCancel = block['cancel-in-progress'];
  }
  const scope = planningScope(parsed, ctx);
  const group = scope.interpolate(groupTemplate).toLowerCase();
  const cancel = cancelInProgressOf(rawCancel, (template) => scope.evaluate(template));
  let mode: ConcurrencyModeValue;
  if (cancel === undefined)
    mode = LEGACY_AUTO_CANCEL_EVENTS.has(run.event) ? ConcurrencyMode.cancelInProgress : ConcurrencyMode.unlimited;
  else if (cancel) mode = ConcurrencyMode.cancelInProgress;
  else mode = group === '' ? ConcurrencyMode.unlimited : ConcurrencyMode.queueBehind;
  return { group: group === '' ? defaultConcurrencyGroup(run) : group, mode };
}
