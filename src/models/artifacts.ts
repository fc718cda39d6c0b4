// Actions artifacts (Forgejo's action_artifact, models/actions/artifact.go).
// A row's `status` says where its bytes are: an upload in progress, a
// complete file, or a file on its way out. Every transition is a conditional
// update on the status it expects, so two processes (or a client's retries)
// never both apply one — in particular only one retention pass claims a
// row's files for deletion.
import { sql } from 'kysely';
import type { Queryable, Tx } from './database.ts';
import { lockRun } from './action-runs.ts';
import { isUniqueViolation } from './database.ts';

/** Forgejo's ArtifactStatus values (models/actions/artifact.go). */
export const ArtifactStatus = {
  uploadPending: 1,
  uploadConfirmed: 2,
  uploadError: 3,
  expired: 4,
  pendingDeletion: 5,
  deleted: 6,
} as const;

export interface Artifact {
  id: number;
  runId: number;
  jobId: number;
  taskId: number;
  repoId: number;
  ownerId: number;
  commitSha: string;
  name: string;
  path: string;
  storagePath: string;
  fileSize: number;
  compressedSize: number;
  contentEncoding: string;
  stagedSize: number;
  digest: string;
  status: number;
  created: number;
  updated: number;
  expiredUnix: number;
}

export type ArtifactRow = {
  id: number;
  run_id: number;
  job_id: number;
  task_id: number;
  repo_id: number;
  owner_id: number;
  commit_sha: string;
  artifact_name: string;
  artifact_path: string;
  storage_path: string;
  file_size: number;
  file_compressed_size: number;
  content_encoding: string;
  staged_size: number;
  digest: string;
  status: number;
  created: number;
  updated: number;
  expired_unix: number;
};

export function fromRow(row: ArtifactRow): Artifact {
  return {
    id: row.id,
    runId: row.run_id,
    jobId: row.job_id,
    taskId: row.task_id,
    repoId: row.repo_id,
    ownerId: row.owner_id,
    commitSha: row.commit_sha,
    name: row.artifact_name,
    path: row.artifact_path,
    storagePath: row.storage_path,
    fileSize: row.file_size,
    compressedSize: row.file_compressed_size,
    contentEncoding: row.content_encoding,
    stagedSize: row.staged_size,
    digest: row.digest,
    status: row.status,
    created: row.created,
    updated: row.updated,
    expiredUnix: row.expired_unix,
  };
}

/** Rows whose bytes count: an upload in progress or a complete file. */
export const LIVE = [ArtifactStatus.uploadPending, ArtifactStatus.uploadConfirmed];

export interface NewArtifact {
  runId: number;
  jobId: number;
  taskId: number;
  repoId: number;
  ownerId: number;
  commitSha: string;
  name: string;
  path: string;
  contentEncoding: string;
  expiredUnix: number;
  /** The folder of a new row's objects (a reused row keeps its own). */
  storagePath: string;
}

/**
 * Inserts a pending row for `input`; null when a concurrent upload of the
 * same name and path won the unique index (the caller then takes its row).
 */
export async function insertPendingArtifact(db: Queryable, input: NewArtifact, now: number): Promise<Artifact | null> {
  try {
    const inserted = await db
      .insertInto('action_artifact')
      .values({
        run_id: input.runId,
        job_id: input.jobId,
        task_id: input.taskId,
        repo_id: input.repoId,
        owner_id: input.ownerId,
        commit_sha: input.commitSha,
        artifact_name: input.name,
        artifact_path: input.path,
        storage_path: input.storagePath,
        content_encoding: input.contentEncoding,
        status: ArtifactStatus.uploadPending,
        created: now,
        updated: now,
        expired_unix: input.expiredUnix,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return fromRow(inserted);
  } catch (error) {
    if (!isUniqueViolation(error)) throw error;
    return null;
  }
}

/**
 * Forgejo's CreateArtifact: the run's live artifact of this name and path is
 * reused (a new upload replaces its file, in the same folder), else a row is
 * inserted with `storagePath`. A concurrent create of the same name loses the
 * unique index and reuses the winner's row.
 */
export async function createOrReuseArtifact(db: Queryable, input: NewArtifact, now: number): Promise<Artifact> {
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const reused = await db
      .updateTable('action_artifact')
      .set({
        job_id: input.jobId,
        task_id: input.taskId,
        commit_sha: input.commitSha,
        content_encoding: input.contentEncoding,
        status: ArtifactStatus.uploadPending,
        staged_size: 0,
        digest: '',
        updated: now,
        expired_unix: input.expiredUnix,
      })
      .where('run_id', '=', input.runId)
      .where('artifact_name', '=', input.name)
      .where('artifact_path', '=', input.path)
      .where('status', 'in', LIVE)
      .returningAll()
      .executeTakeFirst();
    if (reused !== undefined) return fromRow(reused);
    const inserted = await insertPendingArtifact(db, input, now);
    if (inserted !== null) return inserted;
  }
  throw new Error(`artifact ${input.name} of run ${input.runId} keeps changing; try again`);
}

export async function findArtifactById(db: Queryable, id: number): Promise<Artifact | undefined> {
  const row = await db.selectFrom('action_artifact').selectAll().where('id', '=', id).executeTakeFirst();
  return row === undefined ? undefined : fromRow(row);
}

/** The run's live artifact of this name (pending or confirmed). */
export async function findLiveArtifact(db: Queryable, runId: number, name: string): Promise<Artifact | undefined> {
  const row = await db
    .selectFrom('action_artifact')
    .selectAll()
    .where('run_id', '=', runId)
    .where('artifact_name', '=', name)
    .where('status', 'in', LIVE)
    .orderBy('id', 'desc')
    .executeTakeFirst();
  return row === undefined ? undefined : fromRow(row);
}

/**
 * Counts `bytes` more staged for the pending upload `artifact`, unless that
 * takes it past GANTRY_ARTIFACT_MAX_SIZE or its run's artifacts past
 * GANTRY_ARTIFACT_MAX_RUN_SIZE: then nothing is counted and the bytes that
 * were still free come back. Under the run's lock (PostgreSQL; a SQLite
 * transaction is alone anyway), as the v3 chunks reserve theirs
 * (artifact-files.ts), so blocks of several artifacts of one run arriving
 * together cannot pass the run's quota between them.
 */
export async function stageBlockBytes(
  tx: Tx,
  artifact: Pick<Artifact, 'id' | 'runId'>,
  bytes: number,
  quotas: { maxArtifactBytes: number; maxRunBytes: number },
): Promise<{ staged: true } | { staged: false; room: number }> {
  await lockRun(tx, artifact.runId);
  const others = await runArtifactBytes(tx, artifact.runId, artifact.id);
  const own = await tx
    .selectFrom('action_artifact')
    .select('staged_size')
    .where('id', '=', artifact.id)
    .where('status', '=', ArtifactStatus.uploadPending)
    .executeTakeFirst();
  if (own === undefined) return { staged: false, room: 0 };
  const room = Math.max(
    0,
    Math.min(quotas.maxArtifactBytes - own.staged_size, quotas.maxRunBytes - others - own.staged_size),
  );
  if (bytes > room) return { staged: false, room };
  await tx
    .updateTable('action_artifact')
    .set({ staged_size: sql<number>`staged_size + ${bytes}` })
    .where('id', '=', artifact.id)
    .execute();
  return { staged: true };
}

/** Records the committed file of a pending upload (size and digest); false if the row is no longer pending. */
export async function recordCommittedFile(
  db: Queryable,
  id: number,
  size: number,
  digest: string,
  now: number,
): Promise<boolean> {
  const result = await db
    .updateTable('action_artifact')
    .set({ file_size: size, file_compressed_size: size, digest, staged_size: 0, updated: now })
    .where('id', '=', id)
    .where('status', '=', ArtifactStatus.uploadPending)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/**
 * Pending → upload error, its staged bytes no longer counted: an upload refused
 * for its quota fails as a whole, so what it staged does not eat the run's
 * quota. False when the row was not pending.
 */
export async function failUpload(db: Queryable, id: number, now: number): Promise<boolean> {
  const result = await db
    .updateTable('action_artifact')
    .set({ status: ArtifactStatus.uploadError, staged_size: 0, updated: now })
    .where('id', '=', id)
    .where('status', '=', ArtifactStatus.uploadPending)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Pending → confirmed; false when the row was not pending. */
export async function confirmArtifact(db: Queryable, id: number, now: number): Promise<boolean> {
  const result = await db
    .updateTable('action_artifact')
    .set({ status: ArtifactStatus.uploadConfirmed, updated: now })
    .where('id', '=', id)
    .where('status', '=', ArtifactStatus.uploadPending)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/**
 * Bytes the run's live artifacts other than `exceptId` take (committed files
 * and staged blocks), as stored: a v3 file uploaded gzip-encoded counts its
 * compressed size (file_size is its size unpacked).
 */
export async function runArtifactBytes(db: Queryable, runId: number, exceptId: number): Promise<number> {
  const row = await db
    .selectFrom('action_artifact')
    .select(sql<string | number | null>`sum(file_compressed_size + staged_size)`.as('total'))
    .where('run_id', '=', runId)
    .where('id', '!=', exceptId)
    .where('status', 'in', LIVE)
    .executeTakeFirst();
  return Number(row?.total ?? 0);
}

export interface ArtifactFilter {
  runId?: number;
  name?: string;
  id?: number;
}

/** The run's confirmed v4 artifacts (one zip each; not the files of v3 ones) for ListArtifacts, oldest first. */
export async function listConfirmedOfRun(db: Queryable, runId: number, filter: ArtifactFilter): Promise<Artifact[]> {
  let query = db
    .selectFrom('action_artifact')
    .selectAll()
    .where('run_id', '=', runId)
    .where('status', '=', ArtifactStatus.uploadConfirmed)
    .where('content_encoding', '=', 'application/zip');
  if (filter.name !== undefined) query = query.where('artifact_name', '=', filter.name);
  if (filter.id !== undefined) query = query.where('id', '=', filter.id);
  return (await query.orderBy('id').execute()).map(fromRow);
}

/** Marks the run's live artifacts of `name` (all names when null) for deletion; the rows marked. */
export async function markForDeletion(
  db: Queryable,
  where: { runId: number; name: string | null },
  now: number,
): Promise<Artifact[]> {
  let query = db
    .updateTable('action_artifact')
    .set({ status: ArtifactStatus.pendingDeletion, updated: now })
    .where('run_id', '=', where.runId)
    // Failed uploads too: a block that was in flight when its upload failed may have left a file.
    .where('status', 'in', [...LIVE, ArtifactStatus.uploadError, ArtifactStatus.expired]);
  if (where.name !== null) query = query.where('artifact_name', '=', where.name);
  return (await query.returningAll().execute()).map(fromRow);
}

/** What the REST API lists: one entry per (run, name) among confirmed or expired rows (Forgejo 16). */
export interface ArtifactGroup {
  id: number;
  runId: number;
  name: string;
  size: number;
  expired: boolean;
  created: number;
  updated: number;
  expiredUnix: number;
}

const VISIBLE = [ArtifactStatus.uploadConfirmed, ArtifactStatus.expired];

/** A page of a repository's artifacts (optionally of one run, of one name), newest first, with the total. */
export async function listArtifactGroups(
  db: Queryable,
  repoId: number,
  filter: { runId?: number; name?: string },
  page: { limit: number; offset: number },
): Promise<{ groups: ArtifactGroup[]; total: number }> {
  let base = db.selectFrom('action_artifact').where('repo_id', '=', repoId).where('status', 'in', VISIBLE);
  if (filter.runId !== undefined) base = base.where('run_id', '=', filter.runId);
  if (filter.name !== undefined) base = base.where('artifact_name', '=', filter.name);
  const rows = await base
    .select([
      sql<number>`min(id)`.as('id'),
      'run_id',
      'artifact_name',
      // sum() of a bigint is numeric on PostgreSQL (a string to pg): cast back.
      sql<number>`cast(sum(file_size) as bigint)`.as('size'),
      sql<number>`max(status)`.as('max_status'),
      sql<number>`min(created)`.as('created'),
      sql<number>`max(updated)`.as('updated'),
      sql<number>`max(expired_unix)`.as('expired_unix'),
    ])
    .groupBy(['run_id', 'artifact_name'])
    .orderBy(sql`min(id)`, 'desc')
    .limit(page.limit)
    .offset(page.offset)
    .execute();
  const counted = await db
    .selectFrom(base.select(['run_id', 'artifact_name']).groupBy(['run_id', 'artifact_name']).as('g'))
    .select(sql<number>`count(*)`.as('n'))
    .executeTakeFirst();
  return {
    groups: rows.map((row) => ({
      id: Number(row.id),
      runId: row.run_id,
      name: row.artifact_name,
      size: Number(row.size),
      expired: Number(row.max_status) === ArtifactStatus.expired,
      created: Number(row.created),
      updated: Number(row.updated),
      expiredUnix: Number(row.expired_unix),
    })),
    total: Number(counted?.n ?? 0),
  };
}

/** A REST artifact (a group of visible rows) with what serving it needs to know. */
export interface GroupSummary {
  group: ArtifactGroup;
  /** Visible rows of the group. */
  rows: number;
  /** Whether every visible row is confirmed (none expired). */
  allConfirmed: boolean;
  /** The group's first row (a v4 artifact's only one). */
  first: Artifact;
}

/**
 * The visible group whose smallest row id is `id`, summed up in SQL (a v3
 * artifact may have many files); undefined when `id` names no such group of
 * the repository.
 */
export async function summarizeGroup(db: Queryable, repoId: number, id: number): Promise<GroupSummary | undefined> {
  const first = await findArtifactById(db, id);
  if (first === undefined || first.repoId !== repoId) return undefined;
  const row = await db
    .selectFrom('action_artifact')
    .select([
      sql<number>`min(id)`.as('id'),
      sql<number>`count(*)`.as('rows'),
      sql<number>`cast(sum(file_size) as bigint)`.as('size'),
      sql<number>`sum(case when status = ${ArtifactStatus.uploadConfirmed} then 0 else 1 end)`.as('unconfirmed'),
      sql<number>`min(created)`.as('created'),
      sql<number>`max(updated)`.as('updated'),
      sql<number>`max(expired_unix)`.as('expired_unix'),
    ])
    .where('run_id', '=', first.runId)
    .where('artifact_name', '=', first.name)
    .where('status', 'in', VISIBLE)
    .executeTakeFirst();
  if (row === undefined || Number(row.rows) === 0 || Number(row.id) !== id) return undefined;
  const unconfirmed = Number(row.unconfirmed);
  return {
    group: {
      id,
      runId: first.runId,
      name: first.name,
      size: Number(row.size),
      expired: unconfirmed > 0,
      created: Number(row.created),
      updated: Number(row.updated),
      expiredUnix: Number(row.expired_unix),
    },
    rows: Number(row.rows),
    allConfirmed: unconfirmed === 0,
    first,
  };
}

/** Up to `limit` ids of rows whose files are due to go: live (confirmed, or an abandoned upload) past expiry, or marked for deletion. */
export async function findDueForCleanup(db: Queryable, now: number, limit: number): Promise<number[]> {
  const expired = await db
    .selectFrom('action_artifact')
    .select('id')
    .where('status', 'in', LIVE)
    .where('expired_unix', '<', now)
    .orderBy('expired_unix')
    .limit(limit)
    .execute();
  const marked = await db
    .selectFrom('action_artifact')
    .select('id')
    .where('status', '=', ArtifactStatus.pendingDeletion)
    .limit(limit)
    .execute();
  return [...expired, ...marked].map((row) => row.id);
}

/**
 * Claims the files of `ids` for deletion: live rows past `now` become
 * expired, rows marked for deletion become deleted, in one conditional update
 * each. Only the rows this call changed come back, so of two processes
 * running this at once each file is claimed by exactly one.
 */
export async function claimForCleanup(tx: Queryable, ids: readonly number[], now: number): Promise<Artifact[]> {
  if (ids.length === 0) return [];
  const expired = await tx
    .updateTable('action_artifact')
    .set({ status: ArtifactStatus.expired, updated: now })
    .where('id', 'in', ids)
    .where('status', 'in', LIVE)
    .where('expired_unix', '<', now)
    .returningAll()
    .execute();
  const deleted = await tx
    .updateTable('action_artifact')
    .set({ status: ArtifactStatus.deleted, updated: now })
    .where('id', 'in', ids)
    .where('status', '=', ArtifactStatus.pendingDeletion)
    .returningAll()
    .execute();
  return [...expired, ...deleted].map(fromRow);
}
