// Runners, their registration tokens, and the per-scope tasks version.
import type { Selectable } from 'kysely';
import { sql } from 'kysely';
import type { ScopeColumns } from '../modules/scope.ts';
import { compiledStatement } from './compiled-statements.ts';
import { isPostgres } from './database.ts';
import type { Queryable } from './database.ts';
import type { ActionRunnerTable } from './tables.ts';

export interface Runner {
  id: number;
  uuid: string;
  name: string;
  version: string;
  ownerId: number;
  repoId: number;
  description: string;
  tokenHash: string;
  tokenLastEight: string;
  /** null until the runner declared labels. */
  labels: string[] | null;
  ephemeral: boolean;
  lastOnline: number;
  lastActive: number;
  created: number;
  updated: number;
}

export function runnerFromRow(row: Selectable<ActionRunnerTable>): Runner {
  let labels: string[] | null = null;
  if (row.agent_labels !== null) {
    const parsed: unknown = JSON.parse(row.agent_labels);
    labels = Array.isArray(parsed) ? parsed.map(String) : [];
  }
  return {
    id: row.id,
    uuid: row.uuid,
    name: row.name,
    version: row.version,
    ownerId: row.owner_id,
    repoId: row.repo_id,
    description: row.description,
    tokenHash: row.token_hash,
    tokenLastEight: row.token_last_eight,
    labels,
    ephemeral: row.ephemeral === 1,
    lastOnline: row.last_online,
    lastActive: row.last_active,
    created: row.created,
    updated: row.updated,
  };
}

export interface NewRunner {
  uuid: string;
  name: string;
  scope: ScopeColumns;
  description?: string;
  version?: string;
  labels?: readonly string[] | null;
  ephemeral: boolean;
  tokenHash: string;
  tokenLastEight: string;
}

export async function insertRunner(db: Queryable, runner: NewRunner, now: number): Promise<Runner> {
  const row = await db
    .insertInto('action_runner')
    .values({
      uuid: runner.uuid,
      name: runner.name,
      version: runner.version ?? '',
      owner_id: runner.scope.ownerId,
      repo_id: runner.scope.repoId,
      description: runner.description ?? '',
      token_hash: runner.tokenHash,
      token_last_eight: runner.tokenLastEight,
      agent_labels: runner.labels === undefined || runner.labels === null ? null : JSON.stringify(runner.labels),
      ephemeral: runner.ephemeral ? 1 : 0,
      created: now,
      updated: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return runnerFromRow(row);
}

export async function findRunnerByUuid(db: Queryable, uuid: string): Promise<Runner | null> {
  const row = await db.selectFrom('action_runner').selectAll().where('uuid', '=', uuid).executeTakeFirst();
  return row ? runnerFromRow(row) : null;
}

export async function findRunnerById(db: Queryable, id: number): Promise<Runner | null> {
  const row = await db.selectFrom('action_runner').selectAll().where('id', '=', id).executeTakeFirst();
  return row ? runnerFromRow(row) : null;
}

/** Declare: the runner's labels and version as it starts; null when the runner is gone. */
export async function updateRunnerDeclaration(
  db: Queryable,
  id: number,
  version: string,
  labels: readonly string[],
  now: number,
): Promise<Runner | null> {
  const row = await db
    .updateTable('action_runner')
    .set({ version, agent_labels: JSON.stringify(labels), updated: now })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  return row === undefined ? null : runnerFromRow(row);
}

/**
 * Liveness: every authenticated call is `online`; reports (UpdateTask/UpdateLog) are also `active`.
 * Compiled once (compiled-statements.ts): on SQLite it runs in a group of grouped writes (runner-liveness.ts).
 */
export async function touchRunner(db: Queryable, id: number, now: number, active: boolean): Promise<void> {
  await TOUCH_RUNNER.execute(db, [id, now], active ? 'active' : 'online');
}

const TOUCH_RUNNER = compiledStatement((db, arg, shape) =>
  db
    .updateTable('action_runner')
    .set(
      shape === 'active'
        ? { last_online: arg<number>(1), last_active: arg<number>(1) }
        : { last_online: arg<number>(1) },
    )
    .where('id', '=', arg<number>(0)),
);

/**
 * Liveness of many busy runners in one statement: `online` and `active` now,
 * for each of `ids` not already marked active now; the ids written. On
 * PostgreSQL a row another transaction holds (a claim locks its runner's
 * row) is skipped rather than waited for, and the rows are locked in id
 * order: a claim never waits behind this write, nor this write behind it.
 */
export async function touchRunnersActive(db: Queryable, ids: readonly number[], now: number): Promise<number[]> {
  if (ids.length === 0) return [];
  const rows = isPostgres(db)
    ? (
        await sql<{ id: number }>`update action_runner as r
          set last_online = greatest(r.last_online, ${now}), last_active = ${now}
          from (select id from action_runner where id = any(${[...ids]}::bigint[]) and last_active < ${now}
                order by id for update skip locked) as l
          where r.id = l.id
          returning r.id`.execute(db)
      ).rows
    : await db
        .updateTable('action_runner')
        .set({
          last_online: sql<number>`max(last_online, ${now})`,
          last_active: now,
        })
        .where('id', 'in', ids)
        .where('last_active', '<', now)
        .returning('id')
        .execute();
  return rows.map((row) => Number(row.id));
}

/**
 * Liveness of many runners in one statement: `online` now, for each of `ids`
 * not already marked later. On PostgreSQL the rows are locked in id order,
 * as a claim group locks its runners (group-claims.ts): locked in the plan's
 * order, this write could hold one runner's row while waiting for another a
 * group holds, and the group wait for the first, a deadlock PostgreSQL only
 * breaks after its deadlock_timeout (1 s of every claim of the group).
 */
export async function touchRunnersOnline(db: Queryable, ids: readonly number[], now: number): Promise<void> {
  if (ids.length === 0) return;
  if (isPostgres(db)) {
    await sql`update action_runner as r set last_online = ${now}
      from (select id from action_runner where id = any(${[...ids]}::bigint[]) and last_online < ${now}
            order by id for update) as l
      where r.id = l.id`.execute(db);
    return;
  }
  await db
    .updateTable('action_runner')
    .set({ last_online: now })
    .where('id', 'in', ids)
    .where('last_online', '<', now)
    .execute();
}

/**
 * The runners' identity version: moves whenever a runner is deleted or its
 * token, labels, scope or ephemeral flag change (triggers, migration 0017).
 */
export async function readRunnerIdentityVersion(db: Queryable): Promise<number> {
  const row = await db.selectFrom('action_runner_version').select('version').where('id', '=', 1).executeTakeFirst();
  return row === undefined ? 0 : Number(row.version);
}

export async function deleteRunner(db: Queryable, id: number): Promise<boolean> {
  const result = await db.deleteFrom('action_runner').where('id', '=', id).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/**
 * The tasks version of one scope, created at 1 when missing: runners compare
 * it with the version they saw last and skip the job search when equal. Never 0,
 * which act_runner reads as "old server, always search".
 */
export async function tasksVersion(db: Queryable, scope: ScopeColumns, now: number): Promise<number> {
  const version = await readTasksVersion(db, scope);
  return version !== 0 ? version : bumpTasksVersion(db, scope, now);
}

/** The scope's tasks version without creating it (0 when missing): the long poll reads it often. */
export async function readTasksVersion(db: Queryable, scope: ScopeColumns): Promise<number> {
  const row = await db
    .selectFrom('action_tasks_version')
    .select('version')
    .where('owner_id', '=', scope.ownerId)
    .where('repo_id', '=', scope.repoId)
    .executeTakeFirst();
  return row === undefined ? 0 : Number(row.version);
}

/** A job of `scope` became waiting: the scope's version moves on. */
export async function bumpTasksVersion(db: Queryable, scope: ScopeColumns, now: number): Promise<number> {
  const row = await db
    .insertInto('action_tasks_version')
    .values({ owner_id: scope.ownerId, repo_id: scope.repoId, version: 1, created: now, updated: now })
    .onConflict((oc) =>
      oc
        .columns(['owner_id', 'repo_id'])
        .doUpdateSet({ version: sql<number>`action_tasks_version.version + 1`, updated: now }),
    )
    .returning('version')
    .executeTakeFirstOrThrow();
  return Number(row.version);
}

/** Every scope whose runners might take a new waiting job of this repository: global, owner, repository. */
export async function bumpTasksVersionsForRepo(
  db: Queryable,
  ownerId: number,
  repoId: number,
  now: number,
): Promise<void> {
  for (const scope of [
    { ownerId: 0, repoId: 0 },
    { ownerId, repoId: 0 },
    { ownerId: 0, repoId },
  ]) {
    await bumpTasksVersion(db, scope, now);
  }
}
