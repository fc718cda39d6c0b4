// Everything a repository or an account owns, deleted with it. The schema has
// no foreign keys (owner_id/repo_id use 0 for "none", which a foreign key
// cannot express), so this file is the one list of "what goes when its owner
// goes": a table that names a repository, a user or an organization as its
// owner must appear here, and test/orphans.test.ts fails for a table it does
// not know. Run inside the transaction that deletes the owner's row; files
// (git directories, task logs, artifacts) are removed after that transaction commits.
//
// Rows that merely *mention* a deleted account (a run's trigger user, a task's
// runner, a delivery's payload) are history and stay, as in Forgejo, which
// shows them as the ghost user.
import type { Queryable } from './database.ts';

/** What a repository owns: its members, Actions data, runs with their tasks, runners, workflow states, schedules and hooks. */
export async function deleteRowsOwnedByRepository(tx: Queryable, repoId: number): Promise<void> {
  await tx.deleteFrom('collaboration').where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('team_repo').where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('secret').where('owner_id', '=', 0).where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('action_variable').where('owner_id', '=', 0).where('repo_id', '=', repoId).execute();
  await deleteRunsOfRepository(tx, repoId);
  await tx.deleteFrom('action_runner').where('owner_id', '=', 0).where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('action_runner_token').where('owner_id', '=', 0).where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('action_tasks_version').where('owner_id', '=', 0).where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('action_workflow_state').where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('action_schedule').where('repo_id', '=', repoId).execute();
  await deleteWebhooksOfScope(tx, 0, repoId);
}

/**
 * What a user or an organization owns besides repositories (an account with
 * repositories cannot be deleted): teams and memberships, Actions data,
 * runners, hooks, access tokens.
 */
export async function deleteRowsOwnedByAccount(tx: Queryable, accountId: number): Promise<void> {
  await tx.deleteFrom('team_repo').where('org_id', '=', accountId).execute();
  await tx.deleteFrom('team_user').where('org_id', '=', accountId).execute();
  await tx.deleteFrom('team').where('org_id', '=', accountId).execute();
  // Both sides of a membership: an organization's members, a user's memberships.
  await tx
    .deleteFrom('org_user')
    .where((eb) => eb.or([eb('org_id', '=', accountId), eb('uid', '=', accountId)]))
    .execute();
  await tx.deleteFrom('team_user').where('uid', '=', accountId).execute();
  await tx.deleteFrom('collaboration').where('user_id', '=', accountId).execute();
  await tx.deleteFrom('access_token').where('uid', '=', accountId).execute();
  await tx.deleteFrom('web_session').where('user_id', '=', accountId).execute();
  await tx.deleteFrom('secret').where('owner_id', '=', accountId).where('repo_id', '=', 0).execute();
  await tx.deleteFrom('action_variable').where('owner_id', '=', accountId).where('repo_id', '=', 0).execute();
  await tx.deleteFrom('action_runner').where('owner_id', '=', accountId).where('repo_id', '=', 0).execute();
  await tx.deleteFrom('action_runner_token').where('owner_id', '=', accountId).where('repo_id', '=', 0).execute();
  await tx.deleteFrom('action_tasks_version').where('owner_id', '=', accountId).where('repo_id', '=', 0).execute();
  await deleteWebhooksOfScope(tx, accountId, 0);
}

/** Runs, their jobs and tasks (with steps and outputs), the run counters, the commit statuses and the artifacts of a repository. */
async function deleteRunsOfRepository(tx: Queryable, repoId: number): Promise<void> {
  const tasksOfRepo = tx.selectFrom('action_task').select('id').where('repo_id', '=', repoId);
  await tx.deleteFrom('action_task_output').where('task_id', 'in', tasksOfRepo).execute();
  await tx.deleteFrom('action_task_step').where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('action_task').where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('action_run_job').where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('action_run').where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('action_run_count').where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('action_run_index').where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('commit_status').where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('commit_status_index').where('repo_id', '=', repoId).execute();
  await tx.deleteFrom('action_artifact').where('repo_id', '=', repoId).execute();
}

/**
 * The hooks of one scope with their deliveries and attempts. Deliveries of an
 * organization's hooks about one of its repositories belong to the hook, not
 * the repository: they stay until the hook goes (the repository's own
 * `repository deleted` delivery is among them).
 */
async function deleteWebhooksOfScope(tx: Queryable, ownerId: number, repoId: number): Promise<void> {
  const hooks = tx.selectFrom('webhook').select('id').where('owner_id', '=', ownerId).where('repo_id', '=', repoId);
  const deliveries = tx.selectFrom('hook_task').select('id').where('hook_id', 'in', hooks);
  await tx.deleteFrom('hook_task_attempt').where('task_id', 'in', deliveries).execute();
  await tx.deleteFrom('hook_task').where('hook_id', 'in', hooks).execute();
  await tx.deleteFrom('webhook').where('owner_id', '=', ownerId).where('repo_id', '=', repoId).execute();
}
