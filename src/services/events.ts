// Domain events recorded inside the transaction of the change that causes them.
// Subscribers (the webhook outboxes, the deletion of owned rows) write their
// rows in that same transaction, so an event is durable exactly when the
// change is. Work that must not run before the commit (removing files the
// deleted rows pointed at) subscribes with `afterCommit` and sees the events
// of transactions opened with `DomainEvents.transaction` (or `groupedTransaction`).
import type { ActionRun, ActionRunJob, DeletedTaskLog } from '../models/action-runs.ts';
import type { Db, Queryable, Tx } from '../models/database.ts';
import type { GroupedWrites } from '../models/grouped-writes.ts';
import type { Repository } from '../models/repos.ts';
import type { User } from '../models/users.ts';
import type { PushCommitLogReader, PushedRef } from './push-payloads.ts';

export type DomainEvent =
  | { type: 'repository.created'; repo: Repository; owner: User; doer: User }
  | { type: 'repository.deleted'; repo: Repository; owner: User; doer: User }
  | { type: 'account.deleted'; account: User }
  /** Refs a `git push` changed; an all-zero oid on one side means created or deleted. */
  | {
      type: 'repository.pushed';
      repo: Repository;
      owner: User;
      pusher: User;
      updates: readonly PushedRef[];
      commitLog: PushCommitLogReader;
    }
  | {
      type: 'actions.run.created';
      repo: Repository;
      owner: User;
      run: ActionRun;
      jobs: readonly ActionRunJob[];
      triggerUser: User;
    }
  /**
   * Jobs of one run whose status changed (claimed, released, finished,
   * unblocked, skipped, cancelled), as they now are; `runJobIds` reads all
   * the run's jobs in order (a job's position names its page), in the
   * transaction of the change (so by a `subscribe` handler, never after the
   * commit): only a subscriber that writes something per
   * job needs them, and a claim should not read a large matrix for none.
   */
  | {
      type: 'actions.jobs.changed';
      run: ActionRun;
      jobs: readonly ActionRunJob[];
      runJobIds: () => Promise<readonly number[]>;
      /**
       * True when the statement that changed the jobs also found that neither
       * the run's repository nor its owner has an active webhook: the webhook
       * outbox then needs no lookup of its own. A hook made active after that
       * statement is one made after the event, as it would be a moment later.
       */
      noActiveHooks?: boolean;
    }
  /** A run's aggregate status changed; `run` is the run as it now is, `previous` as it was. */
  | {
      type: 'actions.run.status-changed';
      run: ActionRun;
      previous: ActionRun;
      /**
       * As actions.jobs.changed's: the statement that changed the jobs moving
       * the run found no active webhook of its repository or owner.
       */
      noActiveHooks?: boolean;
    }
  /** Jobs to cancel after the commit: a newer job of their job-level group replaces them (or cancels in progress). */
  | { type: 'actions.jobs.superseded'; jobIds: readonly number[] }
  /** A finished run and its rows were deleted; `tasks` names the log files to remove after the commit. */
  | { type: 'actions.run.deleted'; run: ActionRun; tasks: readonly DeletedTaskLog[] };

export type DomainEventHandler = (tx: Tx, event: DomainEvent) => Promise<void>;
export type AfterCommitHandler = (event: DomainEvent) => Promise<void>;

export class DomainEvents {
  private readonly handlers: DomainEventHandler[] = [];
  private readonly afterCommitHandlers: AfterCommitHandler[] = [];
  /** Events recorded so far by each open `transaction()`, keyed by its transaction object. */
  private readonly pending = new WeakMap<Queryable, DomainEvent[]>();

  /**
   * @param onAfterCommitError an after-commit handler that fails cannot undo
   *   the committed change, so its error is reported here and the others still run.
   */
  constructor(private readonly onAfterCommitError: (error: unknown, event: DomainEvent) => void = () => {}) {}

  /** Runs inside the transaction of the change (its writes commit or roll back with it). */
  subscribe(handler: DomainEventHandler): void {
    this.handlers.push(handler);
  }

  /** Runs after the transaction that recorded the event committed (never when it rolled back). */
  afterCommit(handler: AfterCommitHandler): void {
    this.afterCommitHandlers.push(handler);
  }

  async record(tx: Tx, event: DomainEvent): Promise<void> {
    for (const handler of this.handlers) await handler(tx, event);
    this.pending.get(tx)?.push(event);
  }

  /** A transaction whose recorded events reach the after-commit handlers once it commits. */
  async transaction<T>(db: Db, work: (tx: Tx) => Promise<T>): Promise<T> {
    const recorded: DomainEvent[] = [];
    const result = await db.transaction().execute((tx) => this.recording(tx, recorded, work));
    await this.afterCommitOf(recorded);
    return result;
  }

  /**
   * transaction, as a unit of grouped writes (grouped-writes.ts): its events
   * reach the after-commit handlers once the group committed, and are dropped
   * with the unit when it is rolled back to its savepoint (its promise then
   * rejects) or the group fails. The units of a group run one at a time, so
   * the shared transaction records into one unit's list at a time. A unit
   * that runs again (its group was rolled back and run again) starts its
   * list anew.
   */
  async groupedTransaction<T>(writes: GroupedWrites, work: (tx: Tx) => Promise<T>): Promise<T> {
    const recorded: DomainEvent[] = [];
    const result = await writes.run((tx) => {
      recorded.length = 0;
      return this.recording(tx, recorded, work);
    });
    await this.afterCommitOf(recorded);
    return result;
  }

  private async recording<T>(tx: Tx, recorded: DomainEvent[], work: (tx: Tx) => Promise<T>): Promise<T> {
    this.pending.set(tx, recorded);
    try {
      return await work(tx);
    } finally {
      this.pending.delete(tx);
    }
  }

  private async afterCommitOf(recorded: readonly DomainEvent[]): Promise<void> {
    for (const event of recorded) {
      for (const handler of this.afterCommitHandlers) {
        try {
          await handler(event);
        } catch (error) {
          this.onAfterCommitError(error, event);
        }
      }
    }
  }
}
