// Forgejo's Actions status vocabulary (models/actions/status.go), shared by
// runs, jobs, tasks and steps: the numbers are stored, the names are the wire.

export const ActionStatus = {
  unknown: 0,
  success: 1,
  failure: 2,
  cancelled: 3,
  skipped: 4,
  waiting: 5,
  running: 6,
  blocked: 7,
} as const;

export type ActionStatusName = keyof typeof ActionStatus;
export type ActionStatusValue = (typeof ActionStatus)[ActionStatusName];

const NAMES: readonly ActionStatusName[] = [
  'unknown',
  'success',
  'failure',
  'cancelled',
  'skipped',
  'waiting',
  'running',
  'blocked',
];

/** The wire name of a stored status; values outside the enum read as `unknown`. */
export function statusName(value: number): ActionStatusName {
  return NAMES[value] ?? 'unknown';
}

/** Exactly the eight lowercase names (case-sensitive), as StatusFromString. */
export function parseStatusName(name: string): ActionStatusValue | null {
  return Object.hasOwn(ActionStatus, name) ? ActionStatus[name as ActionStatusName] : null;
}

export function isDone(status: ActionStatusValue): boolean {
  return (
    status === ActionStatus.success ||
    status === ActionStatus.failure ||
    status === ActionStatus.cancelled ||
    status === ActionStatus.skipped
  );
}

/**
 * The status a job shows (API, runs list, run status): a job held behind an
 * older run of its concurrency group is stored `blocked`, so no runner can
 * claim it, and shows `waiting`, as Forgejo's queued runs do.
 */
export function shownJobStatus(job: { status: ActionStatusValue; concurrencyHeld: boolean }): ActionStatusValue {
  return job.status === ActionStatus.blocked && job.concurrencyHeld ? ActionStatus.waiting : job.status;
}

/**
 * A run's status from its jobs' statuses, first rule that matches
 * (Forgejo's AggregateJobStatus): all skipped → skipped; all success or
 * skipped → success; then any cancelled, running, waiting, failure, blocked.
 */
export function aggregateJobStatus(statuses: readonly ActionStatusValue[]): ActionStatusValue {
  if (statuses.length === 0) return ActionStatus.unknown;
  const has = (s: ActionStatusValue): boolean => statuses.includes(s);
  if (statuses.every((s) => s === ActionStatus.skipped)) return ActionStatus.skipped;
  if (statuses.every((s) => s === ActionStatus.success || s === ActionStatus.skipped)) return ActionStatus.success;
  if (has(ActionStatus.cancelled)) return ActionStatus.cancelled;
  if (has(ActionStatus.running)) return ActionStatus.running;
  if (has(ActionStatus.waiting)) return ActionStatus.waiting;
  if (has(ActionStatus.failure)) return ActionStatus.failure;
  if (has(ActionStatus.blocked)) return ActionStatus.blocked;
  return ActionStatus.unknown;
}
