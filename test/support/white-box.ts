// The only writes the black-box tests make behind the API's back, each named
// for what it makes and why no API (HTTP, the runner protocol, the CLI) can
// make it: rows as an older version or an older setting stored them, states
// that only time produces, or states a test needs without driving a runner
// through every step. Everything else a test sets up goes through the API as
// a user would (issue 12 item 7). A new helper here needs the same excuse.
import type { Db } from '../../src/models/database.ts';
import type { Queryable } from '../../src/models/database.ts';
import type { ActionStatusValue } from '../../src/modules/actions-status.ts';

interface OwnerKey {
  ownerId: number;
  repoId: number;
}

/**
 * A variable under a name today's rules refuse (`GITHUB_…`), as an older
 * version let it be stored: the API refuses to create it.
 */
export async function insertLegacyVariable(db: Db, key: OwnerKey, name: string, data: string): Promise<void> {
  await db
    .insertInto('action_variable')
    .values({ owner_id: key.ownerId, repo_id: key.repoId, name, data, created_unix: 1, updated_unix: 1 })
    .execute();
}

/**
 * Secrets stored as given: `data` already encrypted by the caller, under a
 * name today's rules may refuse or under a key that is no longer current.
 * The API only stores valid names, encrypted under the current key.
 */
export async function insertStoredSecrets(
  db: Db,
  rows: readonly { key: OwnerKey; name: string; data: string }[],
): Promise<void> {
  if (rows.length === 0) return;
  await db
    .insertInto('secret')
    .values(
      rows.map(({ key, name, data }) => ({
        owner_id: key.ownerId,
        repo_id: key.repoId,
        name,
        data,
        created_unix: 1,
        updated_unix: 1,
      })),
    )
    .execute();
}

/** Moves a secret's creation time back: only time makes an older secret. */
export async function backdateSecret(db: Db, key: OwnerKey, name: string, createdUnix: number): Promise<void> {
  await db
    .updateTable('secret')
    .set({ created_unix: createdUnix })
    .where('name', '=', name)
    .where('owner_id', '=', key.ownerId)
    .where('repo_id', '=', key.repoId)
    .execute();
}

/** When a runner was last seen and last busy: only time (and the runner's calls) set these. */
export async function setRunnerLastSeen(
  db: Db,
  runnerId: number,
  seen: { lastOnline: number; lastActive?: number },
): Promise<void> {
  await db
    .updateTable('action_runner')
    .set({ last_online: seen.lastOnline, ...(seen.lastActive === undefined ? {} : { last_active: seen.lastActive }) })
    .where('id', '=', runnerId)
    .execute();
}

/**
 * Every runner of every scope gone, so a list counts only what the test then
 * registers: no API lists (and so deletes) the runners of all scopes at once.
 */
export async function deleteAllRunners(db: Db): Promise<void> {
  await db.deleteFrom('action_runner').execute();
}

/**
 * Sets jobs' columns directly: a job state (running under a task, finished)
 * that a test of the jobs search or of run settlement needs without driving
 * a runner through every job. Call runProgress.settle afterwards where the
 * run's status must follow, as UpdateTask does.
 */
export async function forceJobs(
  db: Queryable,
  jobIds: readonly number[],
  values: { status?: ActionStatusValue; taskId?: number; attempt?: number },
): Promise<void> {
  if (jobIds.length === 0) return;
  await db
    .updateTable('action_run_job')
    .set({
      ...(values.status === undefined ? {} : { status: values.status }),
      ...(values.taskId === undefined ? {} : { task_id: values.taskId }),
      ...(values.attempt === undefined ? {} : { attempt: values.attempt }),
    })
    .where('id', 'in', [...jobIds])
    .execute();
}

/** A claim's request key expired: only ten minutes of waiting would expire it. */
export async function expireRequestKey(db: Db, taskId: number, expiredAt: number): Promise<void> {
  await db.updateTable('action_task').set({ runner_request_key_expires: expiredAt }).where('id', '=', taskId).execute();
}

/**
 * A password hash as another setting (an older, cheaper cost) or another
 * process stored it: the API only ever stores hashes at the current cost.
 */
export async function storePasswordHash(db: Db, userId: number, hash: string): Promise<void> {
  await db.updateTable('user').set({ passwd: hash }).where('id', '=', userId).execute();
}

/**
 * A delivery's outcome recorded `startedMs` ago: retention acts on age, and
 * only time makes an old delivery. The task is parked a year ahead, so the
 * server's own worker never picks it up.
 */
export async function recordOldDelivery(
  db: Db,
  taskId: number,
  status: number,
  startedMs: number,
  parkedUntilMs: number,
): Promise<void> {
  await db
    .updateTable('hook_task')
    .set({ status, next_attempt_at: parkedUntilMs, attempts: 1 })
    .where('id', '=', taskId)
    .execute();
  await db
    .insertInto('hook_task_attempt')
    .values({
      task_id: taskId,
      attempt: 1,
      started: startedMs,
      duration_ms: 1,
      request_url: 'http://x',
      request_headers: '{}',
      request_body: '{}',
      response_status: 200,
      response_headers: '{}',
      response_body: '',
      error: '',
    })
    .execute();
}

/**
 * An account prohibited from signing in, as a site administrator sets it in
 * Forgejo (PATCH /admin/users/{username}): Gantry has no route that sets it.
 */
export async function prohibitSignIn(db: Db, name: string): Promise<void> {
  await db.updateTable('user').set({ prohibit_login: 1 }).where('lower_name', '=', name.toLowerCase()).execute();
}
