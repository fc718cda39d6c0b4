// The bounds on one run (issue 13 item 7: a 20 KB workflow expanded to 5,120
// jobs and 103 MB of payloads in one transaction) and the messages that
// name them. Each message names its setting, because whoever reads it (the
// author in pre_execution_error, the caller of a dispatch in a 400) can only
// fix the workflow or ask an administrator to raise that setting.
//
// Guarantees, with the checks in workflow-catalog.ts and expandJobs:
// - a workflow file larger than maxWorkflowBytes is never read whole (cat-file
//   reads its size first and skips its content);
// - no more than maxJobsPerRun jobs are written for one run, and their legs
//   are counted before any payload is built;
// - the payloads of one run's jobs never total more than maxRunPayloadBytes,
//   and a job's payloads are weighed before they are rendered.
// Forgejo has no such bounds: a deliberate departure (README). The per-job
// limit of 256 matrix combinations (expand-jobs.ts) is GitHub's.
import type { LimitExceeded } from '../../modules/workflows/expand-jobs.ts';

export interface RunLimits {
  /** GANTRY_ACTIONS_MAX_WORKFLOW_SIZE */
  maxWorkflowBytes: number;
  /** GANTRY_ACTIONS_MAX_JOBS_PER_RUN */
  maxJobsPerRun: number;
  /** GANTRY_ACTIONS_MAX_RUN_PAYLOAD_SIZE */
  maxRunPayloadBytes: number;
}

/** `name` is the workflow's path relative to its directory, as parse errors give it. */
export function workflowTooLargeMessage(name: string, size: number, max: number): string {
  return `${name}: the file is ${size} bytes, more than the ${max} allowed (GANTRY_ACTIONS_MAX_WORKFLOW_SIZE)`;
}

export function runTooLargeMessage(name: string, exceeded: LimitExceeded): string {
  return exceeded.limit === 'jobs'
    ? `${name}: the workflow expands to more than ${exceeded.max} jobs, the most one run may have (GANTRY_ACTIONS_MAX_JOBS_PER_RUN)`
    : `${name}: the jobs of the workflow would carry more than ${exceeded.max} bytes of workflow payload, the most one run may have (GANTRY_ACTIONS_MAX_RUN_PAYLOAD_SIZE)`;
}
