// Secrets and variables go with their scope: deleted in the transaction that
// deletes the repository or the account (no foreign keys: owner_id/repo_id use
// 0 for "none", which no foreign key could express).
import type { Queryable } from '../../models/database.ts';
import { deleteScopedValuesOfScope } from '../../models/scoped-values.ts';
import type { DomainEvent } from '../events.ts';
import { accountScope, repoScope } from './scope.ts';

export async function deleteActionsDataOnScopeDeletion(tx: Queryable, event: DomainEvent): Promise<void> {
  const scope = event.type === 'repository.deleted' ? repoScope(event.repo) : event.type === 'account.deleted' ? accountScope(event.account) : null;
  if (!scope) return;
  await deleteScopedValuesOfScope(tx, 'secret', scope);
  await deleteScopedValuesOfScope(tx, 'action_variable', scope);
}
