// The files of v3 artifacts (upload-artifact@v3): one action_artifact row per
// file, as Forgejo keeps them (routers/api/actions/artifacts.go): the
// artifact's name in `artifact_name`, the file's path inside it in
// `artifact_path`, its size unpacked in `file_size`, its stored size in
// `file_compressed_size` and `gzip` in `content_encoding` when the client
// sent it gzip-encoded. While a file's chunks arrive, `staged_size` counts
// the bytes reserved for them (the quotas); merging them moves the count to
// `file_compressed_size` and confirms the row.
//
// Every transition is a conditional update on the status it expects, as in
// models/artifacts.ts.
import { sql } from 'kysely';
import type { Queryable, Tx } from './database.ts';
import { ArtifactStatus, LIVE, fromRow, insertPendingArtifact } from './artifacts.ts';
import type { Artifact, NewArtifact } from './artifacts.ts';
import { lockRun } from './action-runs.ts';

/**
 * The run's live row of this file, created when missing. A confirmed row
 * takes a new upload of its file: it goes back to pending, counting nothing
 * until its new chunks arrive (its old file stays until the merge replaces
 * it). A concurrent first chunk of the same file loses the unique index and
 * takes the winner's row.
 */
export async function findOrCreateFileRow(db: Queryable, input: NewArtifact, now: number): Promise<Artifact> {
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const found = await db
      .selectFrom('action_artifact')
      .selectAll()
      .where('run_id', '=', input.runId)
      .where('artifact_name', '=', input.name)
      .where('artifact_path', '=', input.path)
      .where('status', 'in', LIVE)
      .executeTakeFirst();
    if (found !== undefined && found.status === ArtifactStatus.uploadPending) return fromRow(found);
    if (found !== undefined) {
      const reopened = await db
        .updateTable('action_artifact')
        .set({
          job_id: input.jobId,
          task_id: input.taskId,
          status: ArtifactStatus.uploadPending,
          file_compressed_size: 0,
          staged_size: 0,
          updated: now,
          expired_unix: input.expiredUnix,
        })
        .where('id', '=', found.id)
        .where('status', '=', ArtifactStatus.uploadConfirmed)
        .returningAll()
        .executeTakeFirst();
      if (reopened !== undefined) return fromRow(reopened);
      continue;
    }
    const inserted = await insertPendingArtifact(db, input, now);
    if (inserted !== null) return inserted;
  }
  throw new Error(`artifact file ${input.path} of run ${input.runId} keeps changing; try again`);
}

/** Bytes the run's live rows take as stored, all of them and those of one artifact name. */
export async function storedBytes(db: Queryable, runId: number, name: string): Promise<{ run: number; name: number }> {
  const row = await db
    .selectFrom('action_artifact')
    .select([
      sql<string | number | null>`sum(file_compressed_size + staged_size)`.as('run'),
      sql<
        string | number | null
      >`sum(case when artifact_name = ${name} then file_compressed_size + staged_size else 0 end)`.as('name'),
    ])
    .where('run_id', '=', runId)
    .where('status', 'in', LIVE)
    .executeTakeFirst();
  return { run: Number(row?.run ?? 0), name: Number(row?.name ?? 0) };
}

export interface Quotas {
  maxArtifactBytes: number;
  maxRunBytes: number;
}

/**
 * Reserves `bytes` for a chunk of the pending row `file`, unless that takes
 * its artifact or its run past a quota: then nothing is reserved and the
 * bytes that were still free come back. Under the run's lock (PostgreSQL; a
 * SQLite transaction is alone anyway), so concurrent chunks of one run cannot
 * together pass a quota.
 */
export async function reserveChunkBytes(
  tx: Tx,
  file: Artifact,
  bytes: number,
  quotas: Quotas,
): Promise<{ reserved: true } | { reserved: false; room: number } | { reserved: false; notPending: true }> {
  await lockRun(tx, file.runId);
  const used = await storedBytes(tx, file.runId, file.name);
  const room = Math.max(0, Math.min(quotas.maxRunBytes - used.run, quotas.maxArtifactBytes - used.name));
  if (bytes > room) return { reserved: false, room };
  const result = await tx
    .updateTable('action_artifact')
    .set({ staged_size: sql<number>`staged_size + ${bytes}` })
    .where('id', '=', file.id)
    .where('status', '=', ArtifactStatus.uploadPending)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1 ? { reserved: true } : { reserved: false, notPending: true };
}

/** Gives back bytes reserved for a chunk that was not stored, or that replaced an earlier copy of itself. */
export async function releaseChunkBytes(db: Queryable, id: number, bytes: number): Promise<void> {
  if (bytes <= 0) return;
  await db
    .updateTable('action_artifact')
    .set({ staged_size: sql<number>`case when staged_size > ${bytes} then staged_size - ${bytes} else 0 end` })
    .where('id', '=', id)
    .where('status', '=', ArtifactStatus.uploadPending)
    .execute();
}

/** What each chunk says about its file: its size unpacked and whether it is gzip-encoded. */
export async function recordFileEncoding(
  db: Queryable,
  id: number,
  fileSize: number,
  contentEncoding: string,
  now: number,
): Promise<void> {
  await db
    .updateTable('action_artifact')
    .set({ file_size: fileSize, content_encoding: contentEncoding, updated: now })
    .where('id', '=', id)
    .where('status', '=', ArtifactStatus.uploadPending)
    .execute();
}

/** Pending → confirmed with its merged file's size (what the reservations counted moves there). */
export async function confirmFile(db: Queryable, id: number, storedSize: number, now: number): Promise<boolean> {
  const result = await db
    .updateTable('action_artifact')
    .set({
      status: ArtifactStatus.uploadConfirmed,
      file_compressed_size: storedSize,
      staged_size: 0,
      updated: now,
    })
    .where('id', '=', id)
    .where('status', '=', ArtifactStatus.uploadPending)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Up to `limit` rows of the run's artifact `name` with `status`, after row `afterId`, by id. */
export async function pageFilesOfArtifact(
  db: Queryable,
  where: { runId: number; name: string; status: number; notEncoding?: string },
  afterId: number,
  limit: number,
): Promise<Artifact[]> {
  let query = db
    .selectFrom('action_artifact')
    .selectAll()
    .where('run_id', '=', where.runId)
    .where('artifact_name', '=', where.name)
    .where('status', '=', where.status)
    .where('id', '>', afterId);
  if (where.notEncoding !== undefined) query = query.where('content_encoding', '!=', where.notEncoding);
  return (await query.orderBy('id').limit(limit).execute()).map(fromRow);
}

/** Up to `limit` names of the run's confirmed artifacts (but those stored with `notEncoding`), first uploaded first. */
export async function listConfirmedNames(
  db: Queryable,
  runId: number,
  limit: number,
  notEncoding: string,
): Promise<string[]> {
  const rows = await db
    .selectFrom('action_artifact')
    .select(['artifact_name', sql<number>`min(id)`.as('first')])
    .where('run_id', '=', runId)
    .where('status', '=', ArtifactStatus.uploadConfirmed)
    .where('content_encoding', '!=', notEncoding)
    .groupBy('artifact_name')
    .orderBy(sql`min(id)`)
    .limit(limit)
    .execute();
  return rows.map((row) => row.artifact_name);
}
