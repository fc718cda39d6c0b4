// Which blocked jobs of a run may go once the jobs they need are done
// (Forgejo's job emitter, services/actions/job_emitter.go).
import { ActionStatus, isDone } from './actions-status.ts';
import type { ActionStatusValue } from './actions-status.ts';

export interface JobState {
  id: number;
  /** The YAML key; every matrix leg of a job shares it. */
  jobId: string;
  needs: readonly string[];
  /** The job has an `if:`, which the runner evaluates (it may want to run after a failure). */
  hasIf: boolean;
  status: ActionStatusValue;
}

/**
 * The new status of every blocked job whose needs are all done: `waiting`
 * when they all succeeded or the job has an `if:`, `skipped` otherwise.
 * Skipped and cancelled needs count as unsuccessful. Repeats until nothing
 * changes, so a skip cascades down a chain of needs.
 */
export function unblockedJobs(jobs: readonly JobState[]): Map<number, ActionStatusValue> {
  const status = new Map(jobs.map((job) => [job.id, job.status]));
  const byJobId = new Map<string, JobState[]>();
  for (const job of jobs) byJobId.set(job.jobId, [...(byJobId.get(job.jobId) ?? []), job]);
  const changes = new Map<number, ActionStatusValue>();
  let changed = true;
  while (changed) {
    changed = false;
    for (const job of jobs) {
      if (status.get(job.id) !== ActionStatus.blocked) continue;
      const needed = job.needs.flatMap((need) => byJobId.get(need) ?? []);
      const states = needed.map((n) => status.get(n.id) ?? ActionStatus.unknown);
      if (!states.every(isDone)) continue;
      const allSucceeded = states.every((s) => s === ActionStatus.success);
      const next = allSucceeded || job.hasIf ? ActionStatus.waiting : ActionStatus.skipped;
      status.set(job.id, next);
      changes.set(job.id, next);
      changed = true;
    }
  }
  return changes;
}
