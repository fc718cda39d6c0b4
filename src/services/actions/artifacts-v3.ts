// The v3 artifact protocol that actions/upload-artifact@v3 and
// download-artifact@v3 speak (through @actions/artifact 1.x), under
// ACTIONS_RUNTIME_URL = <instance>/api/actions_pipeline/. Forgejo:
// routers/api/actions/artifacts.go, artifacts_chunks.go, artifacts_utils.go.
//
// Upload: POST a container (nothing is stored; the answer is the upload URL,
// keyed by md5(name)) → each file PUT in chunks to that URL with
// `?itemPath=<name>/<path>`, `Content-Range: bytes a-b/total`,
// `x-actions-results-md5` (checked) and, when the client packed the file,
// `Content-Encoding: gzip` and `x-tfs-filelength` (its size unpacked). Each
// chunk is streamed into storage as an object of its own → PATCH
// `?artifactName=` joins the chunks of every complete file of that name into
// the file and confirms it. Download: GET the names, GET a name's files
// (`download_url?itemPath=<name>`), GET each file (`<row id>/download`),
// gzip-encoded as it was uploaded.
//
// Guarantees:
// - Only a running task's runtime token (or task token) works, and only for
//   its own run: the run in the URL must be the token's (400), a file of
//   another run is 404.
// - Quotas (GANTRY_ARTIFACT_MAX_SIZE per artifact, GANTRY_ARTIFACT_MAX_RUN_SIZE
//   per run) are reserved under the run's lock before a chunk's first byte is
//   read, so concurrent chunks cannot together pass them; a chunk past them is
//   refused with 403 naming the setting, and its file's upload fails (row
//   `upload error`, chunks dropped).
// - Nothing is held whole in memory: chunks stream into storage, a file is
//   joined through one buffer, lists stream from keyset pages.
// - A file's row points at its file only once the joined file is written
//   (storage put is atomic); a crash before that leaves a pending row whose
//   chunks the retention pass removes when it expires.
import { createHash } from 'node:crypto';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { AppError } from '../../modules/errors.ts';
import type { Clock } from '../../modules/clock.ts';
import type { ObjectReader, ObjectStorage } from '../../modules/storage/object-storage.ts';
import { noteReceived } from '../../modules/young-garbage.ts';
import type { Db } from '../../models/database.ts';
import { ArtifactStatus, failUpload, findArtifactById, findLiveArtifact } from '../../models/artifacts.ts';
import type { Artifact } from '../../models/artifacts.ts';
import {
  confirmFile,
  findOrCreateFileRow,
  listConfirmedNames,
  pageFilesOfArtifact,
  recordFileEncoding,
  releaseChunkBytes,
  reserveChunkBytes,
  storedBytes,
} from '../../models/artifact-files.ts';
import type { RunningTaskScope } from '../../models/task-tokens.ts';
import { artifactFolder, checkArtifactName } from './artifacts.ts';
import type { ArtifactLimits } from './artifacts.ts';

const DAY_SEC = 86_400;
/** The v4 protocol's rows: one zip per artifact. */
const V4_ENCODING = 'application/zip';
/** Names answered by one list call (the protocol does not page it). */
const MAX_LISTED_ARTIFACTS = 1000;
/** Rows read per page when files are joined or listed. */
const PAGE = 200;
/** Bytes of a file's path inside its artifact. */
const MAX_ITEM_PATH_BYTES = 4096;
const JOIN_BUFFER_BYTES = 1024 * 1024;
/** The longest retention an upload may ask for (GANTRY_ARTIFACT_RETENTION_DAYS's own bound). */
const MAX_RETENTION_DAYS = 36_500;

export const PIPELINE_PREFIX = 'api/actions_pipeline';

const md5Hex = (text: string) => createHash('md5').update(text, 'utf8').digest('hex');
const fileOf = (artifact: Artifact) => `${artifact.storagePath}/file`;
const chunksOf = (artifact: Artifact) => `${artifact.storagePath}/chunks`;

/**
 * `<name>/<path>` as the client sends it (backslashes from Windows runners
 * too) → the artifact's name and the file's clean relative path; 400 for a
 * path that is empty or climbs out (Forgejo: util.PathJoinRelX, parseArtifactItemPath).
 */
export function splitItemPath(itemPath: string): { name: string; path: string } {
  if (itemPath.includes('\0') || Buffer.byteLength(itemPath, 'utf8') > MAX_ITEM_PATH_BYTES)
    throw AppError.invalid('Error invalid itemPath');
  const parts = itemPath
    .replace(/\\/g, '/')
    .split('/')
    .filter((part) => part !== '' && part !== '.');
  if (parts.includes('..')) throw AppError.invalid('Error invalid itemPath: ".." is not allowed');
  const [name, ...rest] = parts;
  if (name === undefined || rest.length === 0)
    throw AppError.invalid('Error invalid itemPath: expected <artifact name>/<file path>');
  return { name, path: rest.join('/') };
}

/** `bytes a-b/total`, b inclusive; an empty file is `bytes 0--1/0` (what @actions/artifact 1.x sends). */
export function parseContentRange(header: string | undefined): { start: number; length: number; total: number } {
  const match = /^bytes (\d{1,15})-(-1|\d{1,15})\/(\d{1,15})$/.exec((header ?? '').trim());
  if (match === null) throw AppError.invalid('Error the chunk needs a Content-Range: bytes <first>-<last>/<total>');
  const start = Number(match[1]);
  const end = Number(match[2]);
  const total = Number(match[3]);
  const length = end - start + 1;
  if (length < 0 || start + length > total || (length === 0 && total !== 0))
    throw AppError.invalid('Error the Content-Range is not a range of the file');
  return { start, length, total };
}

export interface ChunkUpload {
  hash: string;
  itemPath: string;
  retentionDays?: string;
  contentRange?: string;
  fileLength?: string;
  contentEncoding?: string;
  md5?: string;
}

interface ChunkObject {
  name: string;
  start: number;
  length: number;
  total: number;
}

/** Chunk objects are named `<total>_<start>_<length>`, so the chunks of a file need no index. */
function parseChunkName(name: string): ChunkObject | null {
  const match = /^(\d+)_(\d+)_(\d+)$/.exec(name);
  if (match === null) return null;
  return { name, total: Number(match[1]), start: Number(match[2]), length: Number(match[3]) };
}

/** The chunks that cover a whole file, in order, or null while some are missing (Forgejo: mergeChunksForArtifact). */
export function completeChunks(names: readonly string[]): ChunkObject[] | null {
  const byTotal = new Map<number, ChunkObject[]>();
  for (const name of names) {
    const chunk = parseChunkName(name);
    if (chunk !== null) byTotal.set(chunk.total, [...(byTotal.get(chunk.total) ?? []), chunk]);
  }
  for (const [total, chunks] of byTotal) {
    chunks.sort((a, b) => a.start - b.start || b.length - a.length);
    const order: ChunkObject[] = [];
    let next = 0;
    for (const chunk of chunks) {
      if (chunk.start !== next || (chunk.length === 0 && total !== 0)) continue;
      order.push(chunk);
      next += chunk.length;
      if (next === total) break;
    }
    if (next === total && order.length > 0) return order;
  }
  return null;
}

export interface ContainerItem {
  path: string;
  itemType: 'file';
  fileLength: number;
  contentLocation: string;
}

export class ArtifactV3Service {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly storage: ObjectStorage,
    private readonly limits: ArtifactLimits,
    private readonly rootUrl: string,
  ) {}

  private runUrl(runId: number): string {
    return `${this.rootUrl}${PIPELINE_PREFIX}/_apis/pipelines/workflows/${runId}/artifacts`;
  }

  private quotaMessage(room: number): string {
    return `Quota exceeded: an artifact may hold ${this.limits.maxArtifactBytes} bytes (GANTRY_ARTIFACT_MAX_SIZE) and a run's artifacts ${this.limits.maxRunBytes} (GANTRY_ARTIFACT_MAX_RUN_SIZE); ${room} bytes were left`;
  }

  /** `POST …/artifacts`: the upload URL of an artifact (rows are made by its chunks). */
  async createContainer(task: RunningTaskScope, input: { name: unknown; retentionDays: unknown }): Promise<string> {
    const name = typeof input.name === 'string' ? input.name : '';
    checkArtifactName(name);
    await this.refuseV4Name(task.runId, name);
    const used = await storedBytes(this.db, task.runId, name);
    const room = Math.min(this.limits.maxRunBytes - used.run, this.limits.maxArtifactBytes - used.name);
    // 403 is what the client reads as "Artifact storage quota has been hit" here.
    if (room <= 0) throw AppError.forbidden(this.quotaMessage(0));
    const days = Number(input.retentionDays ?? 0);
    const retention =
      Number.isSafeInteger(days) && days > 0 ? `?retentionDays=${Math.min(days, MAX_RETENTION_DAYS)}` : '';
    return `${this.runUrl(task.runId)}/${md5Hex(name)}/upload${retention}`;
  }

  /** An artifact name the v4 protocol holds in this run cannot take v3 files too (and the other way round). */
  private async refuseV4Name(runId: number, name: string): Promise<void> {
    const live = await findLiveArtifact(this.db, runId, name);
    if (live !== undefined && live.contentEncoding === V4_ENCODING)
      throw AppError.conflict(`Error artifact ${name} was uploaded with upload-artifact@v4 in this run`);
  }

  private retentionDays(raw: string | undefined): number {
    if (raw === undefined || raw === '') return this.limits.retentionDays;
    if (!/^\d{1,15}$/.test(raw) || Number(raw) < 1) throw AppError.invalid('Error parse retention days');
    return Math.min(Number(raw), MAX_RETENTION_DAYS);
  }

  /** `PUT …/{md5(name)}/upload?itemPath=…`: one chunk of one file, streamed into storage. */
  async uploadChunk(task: RunningTaskScope, upload: ChunkUpload, body: Readable): Promise<void> {
    const item = splitItemPath(upload.itemPath);
    if (upload.hash !== md5Hex(item.name)) throw AppError.invalid('Invalid artifact hash');
    checkArtifactName(item.name);
    const range = parseContentRange(upload.contentRange);
    const encoding = upload.contentEncoding ?? '';
    if (encoding !== '' && encoding !== 'gzip') throw AppError.invalid('Error Content-Encoding must be gzip or none');
    const fileLength = upload.fileLength === undefined ? range.total : Number(upload.fileLength);
    if (!Number.isSafeInteger(fileLength) || fileLength < 0) throw AppError.invalid('Error invalid x-tfs-filelength');
    if (upload.md5 === undefined || upload.md5 === '')
      throw AppError.invalid('Error the chunk needs its MD5 in x-actions-results-md5');
    const days = this.retentionDays(upload.retentionDays);
    await this.refuseV4Name(task.runId, item.name);

    const now = this.clock.nowSec();
    const file = await findOrCreateFileRow(
      this.db,
      {
        runId: task.runId,
        jobId: task.jobId,
        taskId: task.taskId,
        repoId: task.repoId,
        ownerId: task.ownerId,
        commitSha: task.commitSha,
        name: item.name,
        path: item.path,
        contentEncoding: encoding,
        expiredUnix: now + days * DAY_SEC,
        storagePath: artifactFolder(task.repoId, task.runId),
      },
      now,
    );
    const reservation = await this.db
      .transaction()
      .execute((tx) => reserveChunkBytes(tx, file, range.length, this.limits));
    if (!reservation.reserved && 'notPending' in reservation)
      // A PATCH of the name joined the file (or a rerun dropped it) between the two statements.
      throw AppError.conflict('Error the file is no longer being uploaded; upload it again');
    if (!reservation.reserved) {
      // The file's upload fails as a whole, so what it staged no longer eats the run's quota.
      await failUpload(this.db, file.id, now);
      await this.storage.removePrefix(chunksOf(file));
      throw AppError.forbidden(this.quotaMessage(reservation.room));
    }

    const name = `${chunksOf(file)}/${range.total}_${range.start}_${range.length}`;
    const earlier = await this.storage.size(name);
    const md5 = createHash('md5');
    let seen = 0;
    let written: number;
    try {
      written = await this.storage.put(name, body, (chunk) => {
        seen += chunk.length;
        if (seen > range.length) throw AppError.invalid('Error the chunk is longer than its Content-Range');
        md5.update(chunk);
        // Each chunk is a fresh buffer from the HTTP parser: collected every few MiB, not every 32 MB.
        noteReceived(chunk.length);
      });
    } catch (error) {
      await releaseChunkBytes(this.db, file.id, range.length);
      throw error;
    }
    const problem =
      written !== range.length
        ? 'Error the chunk is shorter than its Content-Range'
        : md5.digest('base64') !== upload.md5
          ? 'Error the chunk does not match its x-actions-results-md5'
          : null;
    if (problem !== null) {
      await this.storage.remove(name);
      await releaseChunkBytes(this.db, file.id, range.length + (earlier ?? 0));
      throw AppError.invalid(problem);
    }
    // A retried chunk replaced its earlier copy: that copy's reservation goes back.
    if (earlier !== null) await releaseChunkBytes(this.db, file.id, earlier);
    await recordFileEncoding(this.db, file.id, fileLength, encoding, this.clock.nowSec());
  }

  /** `PATCH …/artifacts?artifactName=`: every file of the name whose chunks are all there is joined and confirmed. */
  async finalize(task: RunningTaskScope, name: string): Promise<number> {
    if (name === '') throw AppError.invalid('Error artifact name is empty');
    let confirmed = 0;
    for (let after = 0; ;) {
      const files = await pageFilesOfArtifact(
        this.db,
        { runId: task.runId, name, status: ArtifactStatus.uploadPending },
        after,
        PAGE,
      );
      for (const file of files) if (await this.joinChunks(file)) confirmed += 1;
      const last = files.at(-1);
      if (last === undefined || files.length < PAGE) break;
      after = last.id;
    }
    return confirmed;
  }

  /** Joins a pending file's chunks into its file; false while some chunk is missing. */
  private async joinChunks(file: Artifact): Promise<boolean> {
    const chunks = completeChunks((await this.storage.list(chunksOf(file))).map((object) => object.name));
    if (chunks === null) return false;
    const storage = this.storage;
    const folder = chunksOf(file);
    // One chunk open at a time, read through one buffer: put() writes each piece before it pulls the next.
    async function* joined(): AsyncGenerator<Buffer> {
      const buffer = Buffer.allocUnsafe(JOIN_BUFFER_BYTES);
      for (const chunk of chunks ?? []) {
        const reader = await storage.open(`${folder}/${chunk.name}`);
        try {
          for (let position = 0; position < chunk.length;) {
            const read = await reader.read(buffer, position);
            if (read === 0) throw new Error(`chunk ${chunk.name} of ${folder} is shorter than its name says`);
            position += read;
            yield buffer.subarray(0, read);
          }
        } finally {
          await reader.close();
        }
      }
    }
    let size: number;
    try {
      size = await this.storage.put(fileOf(file), joined());
    } catch (error) {
      // A concurrent PATCH of the same name joined this file first and removed its chunks.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw error;
    }
    const done = await confirmFile(this.db, file.id, size, this.clock.nowSec());
    await this.storage.removePrefix(folder);
    return done;
  }

  /** `GET …/artifacts`: the run's confirmed v3 artifacts (an empty list when none; Forgejo: 404). */
  async list(
    task: RunningTaskScope,
  ): Promise<{ count: number; value: { name: string; fileContainerResourceUrl: string }[] }> {
    const names = await listConfirmedNames(this.db, task.runId, MAX_LISTED_ARTIFACTS, V4_ENCODING);
    return {
      count: names.length,
      value: names.map((name) => ({
        name,
        fileContainerResourceUrl: `${this.runUrl(task.runId)}/${md5Hex(name)}/download_url`,
      })),
    };
  }

  /**
   * `GET …/{md5(name)}/download_url?itemPath=<name>`: the artifact's files as
   * JSON text pieces, read page by page (an artifact may hold many files);
   * 404 when it has none.
   */
  async containerItems(task: RunningTaskScope, hash: string, itemPath: string): Promise<AsyncGenerator<string>> {
    const name = itemPath.replace(/\\/g, '/').replace(/^\/+|\/+$/g, '');
    if (hash !== md5Hex(name)) throw AppError.invalid('Invalid artifact hash');
    const where = { runId: task.runId, name, status: ArtifactStatus.uploadConfirmed, notEncoding: V4_ENCODING };
    const first = await pageFilesOfArtifact(this.db, where, 0, PAGE);
    if (first.length === 0) throw AppError.notFoundMessage('Error artifact not found');
    const item = (file: Artifact): ContainerItem => ({
      path: path.posix.join(name, file.path),
      itemType: 'file',
      fileLength: file.fileSize,
      contentLocation: `${this.runUrl(task.runId)}/${file.id}/download`,
    });
    const db = this.db;
    return (async function* () {
      yield '{"value":[';
      let files = first;
      let separator = '';
      for (;;) {
        for (const file of files) {
          yield separator + JSON.stringify(item(file));
          separator = ',';
        }
        const last = files.at(-1);
        if (last === undefined || files.length < PAGE) break;
        files = await pageFilesOfArtifact(db, where, last.id, PAGE);
      }
      yield ']}';
    })();
  }

  /** `GET …/{row id}/download`: one confirmed file of the token's run, as stored (gzip or not). */
  async openFile(task: RunningTaskScope, id: number): Promise<{ file: Artifact; reader: ObjectReader }> {
    const file = await findArtifactById(this.db, id);
    if (
      file === undefined ||
      file.runId !== task.runId ||
      file.status !== ArtifactStatus.uploadConfirmed ||
      file.contentEncoding === V4_ENCODING
    )
      throw AppError.notFoundMessage(`artifact with ID ${id} does not exist`);
    try {
      return { file, reader: await this.storage.open(fileOf(file)) };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT')
        throw AppError.notFoundMessage(`artifact with ID ${id} does not exist`);
      throw error;
    }
  }
}
