// A run row for tests that insert runs straight into the database
// (insertRunWithJobs) rather than pushing a workflow: a waiting push run on
// main, triggered by the repository's owner, with an empty event.
import { ActionStatus } from '../../src/modules/actions-status.ts';
import type { NewRun } from '../../src/models/action-runs.ts';

export function waitingPushRun(fields: { repoId: number; ownerId: number; title: string }): NewRun {
  return {
    ...fields,
    workflowId: 'ci.yml',
    workflowDirectory: '.forgejo/workflows',
    triggerUserId: fields.ownerId,
    ref: 'refs/heads/main',
    commitSha: 'c'.repeat(40),
    event: 'push',
    eventPayload: '{}',
    triggerEvent: 'push',
    status: ActionStatus.waiting,
  };
}
