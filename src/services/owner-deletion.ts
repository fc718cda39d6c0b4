// What happens when a repository or an account is deleted, in one place: the
// rows it owned go in the transaction that deletes it (models/owned-rows.ts),
// and the files outside the database that only those rows pointed at (task
// logs, artifacts) go once that transaction has committed. A repository's git directory
// is removed by RepoService itself, right after the same commit.
import { deleteRowsOwnedByAccount, deleteRowsOwnedByRepository } from '../models/owned-rows.ts';
import type { Queryable } from '../models/database.ts';
import type { DomainEvent, DomainEvents } from './events.ts';

export interface OwnedFiles {
  /** Removes the task logs of a repository (idempotent). */
  removeRepositoryLogs(repoId: number): Promise<void>;
  /** Removes the artifact files of a repository (idempotent). */
  removeRepositoryArtifacts(repoId: number): Promise<void>;
}

export function subscribeOwnerDeletion(events: DomainEvents, files: OwnedFiles): void {
  events.subscribe(async (tx: Queryable, event: DomainEvent) => {
    if (event.type === 'repository.deleted') await deleteRowsOwnedByRepository(tx, event.repo.id);
    else if (event.type === 'account.deleted') await deleteRowsOwnedByAccount(tx, event.account.id);
  });
  events.afterCommit(async (event) => {
    if (event.type === 'repository.deleted') {
      await files.removeRepositoryLogs(event.repo.id);
      await files.removeRepositoryArtifacts(event.repo.id);
    }
  });
}
