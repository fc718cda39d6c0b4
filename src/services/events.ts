// Domain events recorded inside the transaction of the change that causes them.
// Subscribers (the webhook outbox, later) write their rows in that same
// transaction, so an event is durable exactly when the change is.
import type { ActionRun, ActionRunJob } from '../models/action-runs.ts';
import type { Queryable } from '../models/database.ts';
import type { Repository } from '../models/repos.ts';
import type { User } from '../models/users.ts';
import type { PushCommitLogReader } from './push-payloads.ts';

export type DomainEvent =
  | { type: 'repository.created'; repo: Repository; owner: User; doer: User }
  | { type: 'repository.deleted'; repo: Repository; owner: User; doer: User }
  | { type: 'account.deleted'; account: User }
  /** Refs a `git push` changed; an all-zero oid on one side means created or deleted. */
  | { type: 'repository.pushed'; repo: Repository; owner: User; pusher: User; updates: readonly PushedRef[]; commitLog: PushCommitLogReader }
  | { type: 'actions.run.created'; repo: Repository; owner: User; run: ActionRun; jobs: readonly ActionRunJob[]; triggerUser: User }
  /**
   * Jobs of one run whose status changed (claimed, released, finished,
   * unblocked, skipped, cancelled), as they now are; `runJobIds` lists all
   * the run's jobs in order (a job's position names its page).
   */
  | { type: 'actions.jobs.changed'; run: ActionRun; jobs: readonly ActionRunJob[]; runJobIds: readonly number[] }
  /** A run's aggregate status changed; `run` is the run as it now is, `previous` as it was. */
  | { type: 'actions.run.status-changed'; run: ActionRun; previous: ActionRun };

export interface PushedRef {
  ref: string;
  oldOid: string;
  newOid: string;
}

export type DomainEventHandler = (tx: Queryable, event: DomainEvent) => Promise<void>;

export class DomainEvents {
  private readonly handlers: DomainEventHandler[] = [];

  subscribe(handler: DomainEventHandler): void {
    this.handlers.push(handler);
  }

  async record(tx: Queryable, event: DomainEvent): Promise<void> {
    for (const handler of this.handlers) await handler(tx, event);
  }
}
