// Secrets, variables and runs go with their scope: deleted in the transaction that
// deletes the repository or the account (no foreign keys: owner_id/repo_id use
// 0 for "none", which no foreign key could express).
import { deleteRunsOfRepo } from '../../models/action-runs.ts';
import type { Queryable } from '../../models/database.ts';
import { deleteScopedValuesOfScope } from '../../models/scoped-values.ts';
import type { DomainEvent } from '../events.ts';
import { accountScope, repoScope } from './scope.ts';

export async function deleteActionsDataOnScopeDeletion(tx: Queryable, event: DomainEvent): Promise<void> {
  const scope = event.type === 'repository.deleted' ? repoScope(event.repo) : event.type === 'account.deleted' ? accountScope(event.account) : null;
  if (!scope) return;
  await deleteScopedValuesOfScope(tx, 'secret', scope);
  await deleteScopedValuesOfScope(tx, 'action_variable', scope);
  // Runs belong to a repository; an account's repositories are deleted (each
  // with its own event) before the account can be.
  if (event.type === 'repository.deleted') await deleteRunsOfRepo(tx, event.repo.id);
}
