// PostgreSQL prepared statements at the driver: the pool handed to Kysely
// names the statements it runs often, so the server parses them once per
// connection and, after a few runs, reuses their plan (pg sends a named
// statement's Parse only the first time on a connection). Kysely compiles
// every query to the same text each time, with the values as parameters, so
// one text is one statement.
//
// Bounded, because the server keeps a connection's named statements until the
// connection closes, and so does pg's memory of them:
// - a text is named only from its NAME_AFTER-th run, counted over the texts
//   seen lately (a bounded least-recently-used map), so a text run once or
//   twice (an IN list of some length) is never prepared;
// - a connection prepares at most `maxPerConnection` statements; past that it
//   runs new texts unnamed and is closed when released, the pool opening a
//   fresh one.
//
// What could break, and why it does not:
// - A named statement that fails, or is first sent inside a transaction that
//   then fails or rolls back: the server keeps a statement it parsed (named
//   statements are not transactional), and pg records it only once the server
//   said it parsed it, so the next run either reuses it or parses it again.
// - Schema changes under a prepared statement (another process migrating
//   while this one serves): PostgreSQL re-plans it, but refuses to run one
//   whose result columns changed ("cached plan must not change result type",
//   e.g. `select *` after ADD COLUMN). Then every connection of this pool
//   stops naming (each is closed when released, fresh ones prepare again), and
//   the failed query is run again unnamed when it was not inside a
//   transaction; inside one the transaction fails, with an error
//   `isRetryableError` lets the claim and run-control retries run again.
// - A pooler between Gantry and PostgreSQL in transaction mode may run the
//   next statement on another server connection: pgbouncer 1.21+ keeps named
//   statements working there (`max_prepared_statements`); with an older one,
//   turn this off (GANTRY_DATABASE_PREPARED_STATEMENTS=0).
//
// Cost of a crash: none; this is per-connection state of the driver.
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { PostgresPool, PostgresPoolClient } from 'kysely';
import { wantsArrayRows } from './array-rows.ts';

/** GANTRY_DATABASE_PREPARED_STATEMENTS's default: statements a connection prepares at most. */
export const DEFAULT_PREPARED_PER_CONNECTION = 200;
/** A text is named from its NAME_AFTER-th run. */
export const NAME_AFTER = 3;
/** How many texts are counted (least recently run dropped first). */
const TRACKED_TEXTS = 2000;

/** PostgreSQL's error when a prepared statement's result columns changed under it. */
export function isChangedResultType(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, routine } = error as { code?: unknown; routine?: unknown };
  // The routine, not the message, which the server may translate.
  return code === '0A000' && routine === 'RevalidateCachedQuery';
}

/** What every connection of one pool shares: which texts run often, and their names. */
class StatementNames {
  /** Runs counted per text; a name once it has run NAME_AFTER times. Map order: least recently run first. */
  private readonly texts = new Map<string, { runs: number; name: string | null }>();
  /** Moves on when a schema change broke the prepared statements: older connections stop naming. */
  generation = 0;

  constructor(readonly maxPerConnection: number) {}

  /** The text's statement name, or null while it has not run often enough. */
  nameFor(text: string): string | null {
    let entry = this.texts.get(text);
    if (entry === undefined) {
      entry = { runs: 0, name: null };
      if (this.texts.size >= TRACKED_TEXTS) this.texts.delete(this.texts.keys().next().value as string);
    } else {
      this.texts.delete(text);
    }
    this.texts.set(text, entry);
    if (entry.name !== null) return entry.name;
    entry.runs += 1;
    if (entry.runs < NAME_AFTER) return null;
    // 160 bits: two texts of one name would make pg refuse the second.
    entry.name = `g_${createHash('sha1').update(text).digest('base64url')}`;
    return entry.name;
  }
}

/** A pooled connection as Kysely uses it, naming the statements that run often. */
class PreparingClient {
  /** The names this connection has sent (prepared, or refused by the server). */
  private readonly prepared = new Set<string>();
  private inTransaction = false;
  /** Close the connection when released instead of pooling it again. */
  private retire = false;
  private generation: number;

  constructor(
    readonly client: pg.PoolClient,
    private readonly names: StatementNames,
  ) {
    this.generation = names.generation;
  }

  async query(text: string, values: readonly unknown[]): Promise<pg.QueryResult> {
    // Transaction control is never named: nothing to plan, and a savepoint's text varies with its name.
    const name = this.isTransactionControl(text) ? null : this.nameOf(text);
    if (name === null) return this.run({ text, values: values as unknown[] });
    try {
      return await this.run({ name, text, values: values as unknown[] });
    } catch (error) {
      if (!isChangedResultType(error)) throw error;
      // Every connection's statements may be stale: none names any more until replaced.
      if (this.generation === this.names.generation) this.names.generation += 1;
      this.retire = true;
      if (this.inTransaction) throw error;
      return this.run({ text, values: values as unknown[] });
    }
  }

  /** A statement marked for array rows (array-rows.ts) reads its rows as arrays of values. */
  private run(config: pg.QueryConfig): Promise<pg.QueryResult> {
    if (wantsArrayRows(config.text)) return this.client.query({ ...config, rowMode: 'array' });
    return this.client.query(config);
  }

  release(): void {
    if (this.inTransaction) this.retire = true; // Kysely releases after commit or rollback; anything else is odd.
    if (this.retire || this.generation !== this.names.generation) this.client.release(true);
    else this.client.release();
  }

  private nameOf(text: string): string | null {
    if (this.names.maxPerConnection === 0 || this.retire || this.generation !== this.names.generation) return null;
    const name = this.names.nameFor(text);
    if (name === null || this.prepared.has(name)) return name;
    if (this.prepared.size >= this.names.maxPerConnection) {
      this.retire = true;
      return null;
    }
    this.prepared.add(name);
    return name;
  }

  /** Kysely's transaction statements, as it writes them (postgres-driver.js), followed into inTransaction. */
  private isTransactionControl(text: string): boolean {
    if (text === 'begin' || text.startsWith('start transaction')) this.inTransaction = true;
    else if (text === 'commit' || text === 'rollback') this.inTransaction = false;
    else return text.startsWith('savepoint ') || text.startsWith('rollback to ') || text.startsWith('release ');
    return true;
  }
}

/**
 * The pool for Kysely's PostgresDialect: `pool`'s connections, naming the
 * statements that run often, at most `maxPerConnection` each (0: none).
 */
export function preparingPool(pool: pg.Pool, maxPerConnection: number): PostgresPool {
  const names = new StatementNames(maxPerConnection);
  // One wrapper per pg client: Kysely keeps its own per-connection state by client object.
  const wrappers = new WeakMap<pg.PoolClient, PreparingClient>();
  return {
    async connect(): Promise<PostgresPoolClient> {
      const client = await pool.connect();
      let wrapper = wrappers.get(client);
      if (wrapper === undefined) {
        wrapper = new PreparingClient(client, names);
        wrappers.set(client, wrapper);
      }
      return wrapper as unknown as PostgresPoolClient;
    },
    end: () => pool.end(),
  };
}
