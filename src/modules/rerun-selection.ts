// Which jobs of a finished run a rerun starts again, and in which status
// (Forgejo: services/actions/rerun.go; Gitea: services/actions/rerun.go
// GetAllRerunJobs for "failed jobs"). Dependants are found through `needs`,
// which name job keys (every matrix leg of a job shares its key), and
// transitively: a job that needs a rerun job is rerun too, so it never runs
// with outputs of an attempt that no longer counts.
import { ActionStatus } from './actions-status.ts';
import type { ActionStatusValue } from './actions-status.ts';

export interface RerunJobState {
  id: number;
  /** The YAML key; every matrix leg of a job shares it. */
  jobId: string;
  needs: readonly string[];
  status: ActionStatusValue;
}

export type RerunSelection =
  /** Every job of the run (Gitea's POST …/runs/{run}/rerun). */
  | { kind: 'all' }
  /** Failed and cancelled jobs and their dependants (…/rerun-failed-jobs). */
  | { kind: 'failed' }
  /** One job and its dependants (…/jobs/{job_id}/rerun). */
  | { kind: 'job'; id: number };

/**
 * The new status of every job to rerun, by job row id; empty when nothing
 * is selected. A job with `needs` starts `blocked` (the job emitter releases
 * it once its needs are done, whether rerun or not); the others `waiting`.
 * The job named by a single-job rerun is always `waiting`: Forgejo reruns it
 * with the needs' stored results even if it has some.
 */
export function rerunStatuses(
  jobs: readonly RerunJobState[],
  selection: RerunSelection,
): Map<number, ActionStatusValue> {
  let seeds: RerunJobState[];
  if (selection.kind === 'all') seeds = [...jobs];
  else if (selection.kind === 'failed')
    seeds = jobs.filter((job) => job.status === ActionStatus.failure || job.status === ActionStatus.cancelled);
  else seeds = jobs.filter((job) => job.id === selection.id);
  const selected = new Set(seeds.map((job) => job.id));
  const keys = new Set(seeds.map((job) => job.jobId));
  let grew = true;
  while (grew) {
    grew = false;
    for (const job of jobs) {
      if (selected.has(job.id) || !job.needs.some((need) => keys.has(need))) continue;
      selected.add(job.id);
      keys.add(job.jobId);
      grew = true;
    }
  }
  const statuses = new Map<number, ActionStatusValue>();
  for (const job of jobs) {
    if (!selected.has(job.id)) continue;
    const target = selection.kind === 'job' && job.id === selection.id;
    statuses.set(job.id, target || job.needs.length === 0 ? ActionStatus.waiting : ActionStatus.blocked);
  }
  return statuses;
}
