// Statements of the runner protocol's hot path (a claim, its payload, a
// finishing report), built and compiled by Kysely once per shape and dialect
// instead of once per call: building and compiling a query (its expression
// builders, frozen nodes, the compiler's visit) cost about as much of the
// server's CPU per job as SQLite running it.
//
// A statement is defined once, at module level, by a function that builds it
// from argument slots (`arg(i)`) instead of values. The first call of each
// shape (a small key the caller gives for what changes the statement's text,
// such as how many labels an IN list has) builds and compiles it; every call
// then runs that SQL with its own values, in the order the compiler placed
// the slots, through the Queryable it is given: a transaction's connection,
// its savepoints and the SQLite connection's mutex work as for any other
// query; on SQLite a read outside any transaction runs on the connection at
// once, and so does every statement of a group of grouped writes
// (sqlite-direct-reads.ts). Values the builder writes in itself (constants) are kept as
// compiled. The builder must use nothing of a call but its slots and its
// shape: whatever else it read would be frozen into the SQL of every later
// call of that shape.
//
// Bounded: each statement keeps at most MAX_SHAPES compiled forms, and
// forgets them all when a new one would exceed that.
import { PostgresAdapter } from 'kysely';
import type { CompiledQuery, QueryResult, RootOperationNode } from 'kysely';
import { ARRAY_ROWS_MARK } from './array-rows.ts';
import type { Queryable } from './database.ts';
import { readDirectly, runInGroup } from './sqlite-direct-reads.ts';

const MAX_SHAPES = 64;

/** A query builder or a raw `sql` template: anything that compiles against the database. */
export interface Buildable<Row> {
  compile(db: Queryable): CompiledQuery<Row>;
}

/** Stands for the call's argument `index` while a statement is built. */
class Slot {
  constructor(readonly index: number) {}
}

/** Typed as the value it stands for, so the builder type-checks as with real values. */
export type ArgSlot = <T>(index: number) => T;

const arg: ArgSlot = <T>(index: number) => new Slot(index) as unknown as T;

interface Compiled {
  sql: string;
  query: RootOperationNode;
  /** The compiled parameters, constants as compiled and slots as null. */
  constants: readonly unknown[];
  /** For each parameter: the argument it takes, or -1 for a constant. */
  slots: readonly number[];
}

export class CompiledStatement<Row> {
  private readonly compiled = new Map<string, Compiled>();

  constructor(
    private readonly build: (db: Queryable, arg: ArgSlot, shape: string) => Buildable<Row>,
    /** Rows come back as arrays of values (array-rows.ts), in the order of the SELECT's columns. */
    private readonly rowsAsArrays = false,
  ) {}

  /** Runs the statement with `args` (argument i fills slot i) in the form built for `shape`. */
  execute(db: Queryable, args: readonly unknown[], shape = ''): Promise<QueryResult<Row>> {
    const key = db.getExecutor().adapter instanceof PostgresAdapter ? `p${shape}` : `s${shape}`;
    let compiled = this.compiled.get(key);
    if (compiled === undefined) {
      compiled = this.compile(db, shape);
      if (this.compiled.size >= MAX_SHAPES) this.compiled.clear();
      this.compiled.set(key, compiled);
    }
    const { slots, constants } = compiled;
    const parameters = new Array<unknown>(slots.length);
    for (let i = 0; i < slots.length; i += 1) {
      const slot = slots[i] as number;
      if (slot < 0) parameters[i] = constants[i];
      else if (slot < args.length) parameters[i] = args[slot];
      else return Promise.reject(new Error(`statement argument ${slot} missing (${args.length} given)`));
    }
    try {
      const direct = runInGroup<Row>(db, compiled.sql, parameters) ?? readDirectly<Row>(db, compiled.sql, parameters);
      if (direct !== null) return Promise.resolve(direct);
    } catch (error) {
      return Promise.reject(error as Error);
    }
    const query: CompiledQuery<Row> = { sql: compiled.sql, query: compiled.query, parameters, queryId: QUERY_ID };
    return db.executeQuery(query);
  }

  /** The first row, or undefined. */
  async takeFirst(db: Queryable, args: readonly unknown[], shape = ''): Promise<Row | undefined> {
    return (await this.execute(db, args, shape)).rows[0];
  }

  /** How many rows an INSERT, UPDATE or DELETE without RETURNING changed. */
  async affected(db: Queryable, args: readonly unknown[], shape = ''): Promise<number> {
    return Number((await this.execute(db, args, shape)).numAffectedRows ?? 0n);
  }

  private compile(db: Queryable, shape: string): Compiled {
    const { sql, query, parameters } = this.build(db, arg, shape).compile(db);
    return {
      sql: this.rowsAsArrays ? `${sql}${ARRAY_ROWS_MARK}` : sql,
      query,
      constants: parameters.map((value) => (value instanceof Slot ? null : value)),
      slots: parameters.map((value) => (value instanceof Slot ? value.index : -1)),
    };
  }
}

/** Plugins would tell queries apart by id; Gantry's databases have none, so one id serves every call. */
const QUERY_ID = { queryId: 'compiled-statement' } as CompiledQuery['queryId'];

/** Defines a statement; see the header for what its builder may use. */
export function compiledStatement<Row>(
  build: (db: Queryable, arg: ArgSlot, shape: string) => Buildable<Row>,
): CompiledStatement<Row> {
  return new CompiledStatement(build);
}

/** Defines a statement whose rows come back as arrays of values (array-rows.ts): read them with valuesOf. */
export function compiledArrayStatement(
  build: (db: Queryable, arg: ArgSlot, shape: string) => Buildable<unknown>,
): CompiledStatement<unknown> {
  return new CompiledStatement(build, true);
}
