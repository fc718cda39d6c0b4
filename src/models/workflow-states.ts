// Which workflows of a repository are disabled (table action_workflow_state,
// migration 0009). A row means `disabled_manually`; no row means `active`.
// A disabled workflow is triggered by nothing: push triggers, dispatch and
// rerun all ask isWorkflowDisabled before creating work (Gitea's
// services/actions/notifier_helper.go and workflow.go check the same list).
import type { Queryable } from './database.ts';

/** True when `workflowId` (the run's workflow_id, e.g. `ci.yml`) is disabled in the repository. */
export async function isWorkflowDisabled(db: Queryable, repoId: number, workflowId: string): Promise<boolean> {
  const row = await db
    .selectFrom('action_workflow_state')
    .select('id')
    .where('repo_id', '=', repoId)
    .where('workflow_id', '=', workflowId)
    .executeTakeFirst();
  return row !== undefined;
}

/** The disabled workflow ids of a repository (one query for a whole listing or push). */
export async function listDisabledWorkflows(db: Queryable, repoId: number): Promise<Set<string>> {
  const rows = await db
    .selectFrom('action_workflow_state')
    .select('workflow_id')
    .where('repo_id', '=', repoId)
    .execute();
  return new Set(rows.map((row) => row.workflow_id));
}

/** Disables or enables one workflow, idempotently (Gitea's EnableWorkflow/DisableWorkflow). */
export async function setWorkflowDisabled(
  db: Queryable,
  repoId: number,
  workflowId: string,
  disabled: boolean,
  now: number,
): Promise<void> {
  if (disabled) {
    await db
      .insertInto('action_workflow_state')
      .values({ repo_id: repoId, workflow_id: workflowId, created: now })
      .onConflict((oc) => oc.columns(['repo_id', 'workflow_id']).doNothing())
      .execute();
  } else {
    await db
      .deleteFrom('action_workflow_state')
      .where('repo_id', '=', repoId)
      .where('workflow_id', '=', workflowId)
      .execute();
  }
}
