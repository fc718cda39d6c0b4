// Reads behind the runners API: runners of a set of scopes (a list page, its
// count, one runner by id), and the waiting or running jobs a jobs search
// looks at. Each query reads one index range per scope key.
import type { ExpressionBuilder } from 'kysely';
import type { ActionRunJob } from './action-runs.ts';
import { jobFromRow } from './action-runs.ts';
import type { Queryable } from './database.ts';
import type { ScopeColumns } from '../modules/scope.ts';
import type { Runner } from './runners.ts';
import { runnerFromRow } from './runners.ts';
import type { Database } from './tables.ts';
import type { ActionStatusValue } from '../modules/actions-status.ts';

/** The runners of these exact scopes (owner_id, repo_id), or every runner. */
export type RunnerSelection = readonly ScopeColumns[] | 'all';

function inSelection(selection: readonly ScopeColumns[]) {
  return (eb: ExpressionBuilder<Database, 'action_runner'>) =>
    eb.or(selection.map((key) => eb.and([eb('owner_id', '=', key.ownerId), eb('repo_id', '=', key.repoId)])));
}

function selectRunners(db: Queryable, selection: RunnerSelection) {
  const query = db.selectFrom('action_runner');
  return selection === 'all' ? query : query.where(inSelection(selection));
}

/** Most recently online first; the id breaks ties (never-seen runners have 0), newest first. */
export async function listRunners(
  db: Queryable,
  selection: RunnerSelection,
  page: { limit: number; offset: number },
): Promise<Runner[]> {
  if (selection !== 'all' && selection.length === 0) return [];
  const rows = await selectRunners(db, selection)
    .selectAll()
    .orderBy('last_online', 'desc')
    .orderBy('id', 'desc')
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  return rows.map(runnerFromRow);
}

export async function countRunners(db: Queryable, selection: RunnerSelection): Promise<number> {
  if (selection !== 'all' && selection.length === 0) return 0;
  const row = await selectRunners(db, selection)
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Runner `id` if it belongs to the selection, else null. */
export async function findRunnerInSelection(
  db: Queryable,
  id: number,
  selection: RunnerSelection,
): Promise<Runner | null> {
  if (selection !== 'all' && selection.length === 0) return null;
  const row = await selectRunners(db, selection).selectAll().where('id', '=', id).executeTakeFirst();
  return row ? runnerFromRow(row) : null;
}

/** Which jobs a search covers: a repository's, those of all repositories of an owner, or all. */
export type JobSelection = { repoId: number } | { ownerId: number } | 'all';

/**
 * The newest `limit` jobs with one status, newest first. One status per query
 * keeps it a single backward range of (repo_id, status, id), (owner_id,
 * status, id) or (status, id).
 */
export async function listJobsWithStatus(
  db: Queryable,
  selection: JobSelection,
  status: ActionStatusValue,
  limit: number,
): Promise<ActionRunJob[]> {
  let query = db.selectFrom('action_run_job').selectAll().where('status', '=', status);
  if (selection !== 'all') {
    query =
      'repoId' in selection
        ? query.where('repo_id', '=', selection.repoId)
        : query.where('owner_id', '=', selection.ownerId);
  }
  const rows = await query.orderBy('id', 'desc').limit(limit).execute();
  return rows.map(jobFromRow);
}
