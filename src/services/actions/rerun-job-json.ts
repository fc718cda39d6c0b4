// The answer of a job rerun, Gitea's ActionWorkflowJob (services/convert/convert.go
// ToActionWorkflowJob). Built by the same function as the workflow_job
// webhook's job object, so the two never disagree; the job JSON converters of
// the jobs API (convert-jobs.ts) may replace it once they exist.
import type { ActionRun, ActionRunJob } from '../../models/action-runs.ts';
import type { Repository } from '../../models/repos.ts';
import type { User } from '../../models/users.ts';
import type { Static } from 'typebox';
import type { RerunWorkflowJob } from '../../api-types/run-control-schemas.ts';
import { workflowJobPayload } from '../webhooks/action-payloads.ts';

export interface RerunJobContext {
  repo: Repository;
  owner: User;
  triggerUser: User;
  /** ROOT_URL with its trailing slash. */
  rootUrl: string;
  nowSec: number;
}

/** `runJobIds`: the run's job ids in order (a job's position names its web page). A rerun job has no task yet: no runner, no steps. */
export function rerunJobJson(ctx: RerunJobContext, run: ActionRun, job: ActionRunJob, runJobIds: readonly number[]): Static<typeof RerunWorkflowJob> {
  const payload = workflowJobPayload(ctx, run, job, Math.max(0, runJobIds.indexOf(job.id)), undefined);
  return payload.workflow_job as Static<typeof RerunWorkflowJob>;
}
