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
// transaction, each in a savepoint of its own, and commit once.
//
// Guarantees:
// - Each unit of work is atomic and isolated from the others as it would be
//   in a transaction of its own: it runs alone (the connection does nothing
//   else meanwhile), and one that throws is rolled back to its savepoint
//   (its caller sees its error) while the others of the group go on.
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
import type { Db, Tx } from './database.ts';

const SAVEPOINT = compiledStatement(() => sql`savepoint grouped_write`);
const RELEASE = compiledStatement(() => sql`release savepoint grouped_write`);
const ROLLBACK = compiledStatement(() => sql`rollback to savepoint grouped_write`);

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
      if (this.draining || this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        void this.drain();
      });
    });
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.queue.length > 0) {
        const group = this.queue.splice(0, MAX_GROUP);
        let outcomes: Outcome[];
        try {
          outcomes = await this.db.transaction().execute((tx) => runGroup(tx, group));
        } catch (error) {
          for (const unit of group) unit.reject(error);
          continue;
        }
        group.forEach((unit, i) => {
          const outcome = outcomes[i] as Outcome;
          if (outcome.ok) unit.resolve(outcome.value);
          else unit.reject(outcome.error);
        });
      }
    } finally {
      this.draining = false;
    }
  }
}

async function runGroup(tx: Tx, group: readonly Unit[]): Promise<Outcome[]> {
  // Alone: no savepoint, the transaction is the unit's.
  if (group.length === 1) return [{ ok: true, value: await (group[0] as Unit).work(tx) }];
  const outcomes: Outcome[] = [];
  for (const unit of group) {
    await SAVEPOINT.execute(tx, []);
    try {
      const value = await unit.work(tx);
      await RELEASE.execute(tx, []);
      outcomes.push({ ok: true, value });
    } catch (error) {
      await ROLLBACK.execute(tx, []);
      await RELEASE.execute(tx, []);
      outcomes.push({ ok: false, error });
    }
  }
  return outcomes;
}
