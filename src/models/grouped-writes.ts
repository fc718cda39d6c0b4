// Write transactions of the runner protocol's hot path (claims, task
// reports), committed together on SQLite. SQLite runs the process's
// transactions one at a time on its one connection, and a commit writes
// every page the transaction dirtied to the WAL; a fleet of runners claiming
// and reporting at once committed the same few pages (the job table's, its
// indexes', the task table's) once per job. Here a unit of work waits for
// the end of the event loop's current phase (setImmediate): the units
// submitted meanwhile (every request read in that phase: better-sqlite3
// answers synchronously, so a transaction started at once would run whole
// before the next request is even read) then run together in one
// transaction, which takes the database's write lock with its first
// statement, and commit once.
//
// A unit needs undoing alone only when it throws after it wrote: then the
// group is rolled back and run again with a savepoint around each unit.
// Otherwise (the usual case: a unit throws, if at all, before its first
// write, on a task that is not the runner's or a request it refuses) the
// units run without savepoints: a savepoint and its release were two
// statements per unit, and each page a unit changed was copied to the
// savepoint's sub-journal first. Whether a unit wrote is read from SQLite's
// count of rows changed on the connection (total_changes(), which a
// statement that failed and was undone does not move).
//
// Guarantees:
// - Each unit of work is atomic and isolated from the others as it would be
//   in a transaction of its own: it runs alone (the connection does nothing
//   else meanwhile), and one that throws has left nothing (it wrote nothing,
//   or the group runs again with a savepoint each and it is rolled back to
//   its own) while the others of the group go on; its caller sees its error.
// - A unit may run twice (the group ran again): its work must start from
//   what it reads in the transaction, as any transaction that is retried.
// - Nothing is reported before the group's commit: every caller's promise
//   settles after it. If the commit (or the transaction) fails, every unit
//   of the group fails with that error, none of them applied.
// - A crash before the commit loses the whole group, as it would have lost
//   each of its transactions: none was acknowledged.
// - Work that must wait for the commit (DomainEvents' after-commit handlers)
//   runs per unit once its promise settles: after the group's commit, and
//   never for a unit rolled back (DomainEvents.groupedTransaction).
// On PostgreSQL, whose connections write in parallel, each unit is a
// transaction of its own, as before.
import { sql } from 'kysely';
import { compiledStatement } from './compiled-statements.ts';
import { isPostgres } from './database.ts';
import type { Db, Queryable, Tx } from './database.ts';
import { beginGroup, directConnectionOf, endGroup } from './sqlite-direct-reads.ts';
import type { DirectConnection } from './sqlite-direct-reads.ts';

const SAVEPOINT = compiledStatement(() => sql`savepoint grouped_write`);
const RELEASE = compiledStatement(() => sql`release savepoint grouped_write`);
const ROLLBACK = compiledStatement(() => sql`rollback to savepoint grouped_write`);
/** A write that changes nothing: it takes the database's write lock (task-reports.ts's takeWriteLock). */
const WRITE_LOCK = compiledStatement(() => sql`update action_task set id = id where 0`);

/** The transactions of groups of two units or more, which hold the write lock from their first statement. */
const lockedGroups = new WeakSet<object>();

/** Whether `tx` is a group's transaction, holding SQLite's write lock already (takeWriteLock need not take it). */
export function holdsWriteLock(tx: Queryable): boolean {
  return lockedGroups.has(tx);
}

/** Thrown out of a group's transaction to roll it back: a unit failed after it wrote. */
class UndoAlone extends Error {}

/** At most this many units share a commit, so a long queue still commits (and answers) in steps. */
const MAX_GROUP = 64;

interface Unit {
  work: (tx: Tx) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

export class GroupedWrites {
  private readonly queue: Unit[] = [];
  private draining = false;
  private scheduled = false;
  /** changesCounter's reader, once made. */
  private changes: (() => number) | null | undefined;

  /** Whether run() starts its work in a later turn of the event loop, after pending I/O events (SQLite). */
  readonly deferred: boolean;

  constructor(private readonly db: Db) {
    this.deferred = !isPostgres(db);
  }

  /** Runs `work` in a transaction, shared on SQLite with the units submitted meanwhile. */
  run<T>(work: (tx: Tx) => Promise<T>): Promise<T> {
    if (isPostgres(this.db)) return this.db.transaction().execute(work);
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ work, resolve: resolve as (value: unknown) => void, reject });
      if (!this.draining) this.schedule();
    });
  }

  /** Drains the queue at the end of the event loop's current phase (unless a drain is scheduled already). */
  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.drain();
    });
  }

  /**
   * Commits one group (the oldest MAX_GROUP units) and settles its units in
   * order, whose callers write their answers then (settleInOrder). The next
   * group starts a turn of the event loop later, not at once: the requests
   * that arrived meanwhile are read first, and queue behind the units
   * already waiting.
   */
  private async drain(): Promise<void> {
    this.draining = true;
    try {
      const group = this.queue.splice(0, MAX_GROUP);
      let outcomes: Outcome[];
      try {
        outcomes = await this.commit(group);
      } catch (error) {
        for (const unit of group) unit.reject(error);
        return;
      }
      settleInOrder(group, outcomes);
    } finally {
      this.draining = false;
      if (this.queue.length > 0) this.schedule();
    }
  }

  /** Runs the group in one transaction, again with a savepoint per unit when one failed after it wrote. */
  private async commit(group: readonly Unit[]): Promise<Outcome[]> {
    const changes = this.changesCounter();
    if (changes !== null) {
      try {
        return await this.transaction(group, changes);
      } catch (error) {
        if (!(error instanceof UndoAlone)) throw error;
      }
    }
    return this.transaction(group, null);
  }

  /** runGroup in a transaction; its compiled statements run on the connection at once (sqlite-direct-reads.ts). */
  private transaction(group: readonly Unit[], changes: (() => number) | null): Promise<Outcome[]> {
    const connection = this.connection();
    return this.db.transaction().execute(async (tx) => {
      if (connection !== undefined) beginGroup(tx, connection);
      try {
        return await runGroup(tx, group, changes);
      } finally {
        endGroup(tx);
        lockedGroups.delete(tx);
      }
    });
  }

  private connection(): DirectConnection | undefined {
    return directConnectionOf(this.db);
  }

  /** Reads total_changes() on the connection (null when it is not a SQLite connection of database.ts). */
  private changesCounter(): (() => number) | null {
    if (this.changes === undefined) {
      const connection = this.connection();
      const statement = connection?.sqlite.prepare('select total_changes()').pluck();
      this.changes =
        connection === undefined || statement === undefined
          ? null
          : () => {
              // A statement error that rolled the whole transaction back (SQLITE_FULL…) fails the group.
              if (!connection.sqlite.inTransaction) throw new Error('the grouped transaction was rolled back');
              return Number(statement.get());
            };
    }
    return this.changes;
  }
}

/**
 * Settles the units of a committed group one after the other, each once the
 * promise jobs the caller of the one before ran have all run (a tick is run
 * when none is left): a caller that answers without waiting for I/O (a
 * claim builds its task and writes it, a report writes its state) has
 * answered before the next caller resumes. Settled all at once, the callers'
 * work interleaved, one step each in turn, and every answer left at the end
 * of all of it; now they leave in the group's order, the k-th after the work
 * of the k callers before it. A caller that waits for I/O does not hold up
 * the others: the next one is settled as soon as no promise job is left.
 */
function settleInOrder(group: readonly Unit[], outcomes: readonly Outcome[]): void {
  let next = 0;
  const settleNext = (): void => {
    const unit = group[next] as Unit;
    const outcome = outcomes[next] as Outcome;
    next += 1;
    if (outcome.ok) unit.resolve(outcome.value);
    else unit.reject(outcome.error);
    // Queued behind the caller's first promise job; its tick runs once no promise job is left.
    if (next < group.length) queueMicrotask(() => process.nextTick(settleNext));
  };
  if (group.length > 0) settleNext();
}

/**
 * The units one after the other in `tx`. With `changes`, a unit that throws
 * having written nothing fails alone, and one that throws after a write
 * rolls the group back (UndoAlone); without it, each unit runs in a
 * savepoint of its own and is rolled back to it when it throws.
 */
async function runGroup(tx: Tx, group: readonly Unit[], changes: (() => number) | null): Promise<Outcome[]> {
  // Alone: the transaction is the unit's (it takes the write lock as it would alone).
  if (group.length === 1) return [{ ok: true, value: await (group[0] as Unit).work(tx) }];
  await WRITE_LOCK.execute(tx, []);
  lockedGroups.add(tx);
  const outcomes: Outcome[] = [];
  for (const unit of group) {
    if (changes === null) await SAVEPOINT.execute(tx, []);
    const before = changes?.() ?? 0;
    try {
      const value = await unit.work(tx);
      if (changes === null) await RELEASE.execute(tx, []);
      outcomes.push({ ok: true, value });
    } catch (error) {
      if (changes !== null) {
        if (changes() !== before) throw new UndoAlone('a unit failed after it wrote');
      } else {
        await ROLLBACK.execute(tx, []);
        await RELEASE.execute(tx, []);
      }
      outcomes.push({ ok: false, error });
    }
  }
  return outcomes;
}
