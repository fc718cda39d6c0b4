// Runners and the jobs a runner search lists → Forgejo's JSON (Forgejo:
// services/convert ToActionRunner, routers/api/v1/shared/runners.go).
import type { ActionRunJobJson, ActionRunnerJson } from '../api-types/runner-schemas.ts';
import { statusName } from '../modules/actions-status.ts';
import type { ActionRunJob } from '../models/action-runs.ts';
import type { Runner } from '../models/runners.ts';
import type { RunnerStatusName } from './actions/runners.ts';

export function toApiRunner(runner: Runner, status: RunnerStatusName): ActionRunnerJson {
  return {
    id: runner.id,
    uuid: runner.uuid,
    owner_id: runner.ownerId,
    repo_id: runner.repoId,
    name: runner.name,
    status,
    version: runner.version,
    labels: runner.labels === null ? null : [...runner.labels],
    description: runner.description,
    ephemeral: runner.ephemeral,
  };
}

/** Empty `needs`/`runs-on` are null: Forgejo stores a job without them as a nil slice. */
export function toApiRunJob(job: ActionRunJob): ActionRunJobJson {
  return {
    id: job.id,
    attempt: job.attempt,
    handle: job.handle,
    repo_id: job.repoId,
    owner_id: job.ownerId,
    name: job.name,
    needs: job.needs.length > 0 ? [...job.needs] : null,
    runs_on: job.runsOn.length > 0 ? [...job.runsOn] : null,
    task_id: job.taskId,
    status: statusName(job.status),
  };
}
