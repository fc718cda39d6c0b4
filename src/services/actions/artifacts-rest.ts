// Artifacts as the REST API shows them (Forgejo 16: routers/api/v1/repo/action.go
// ListActionArtifacts, ListActionRunArtifacts, GetActionArtifact,
// DeleteActionArtifact, DownloadActionArtifact; models/actions/artifact.go).
// One entry per (run, artifact name) among confirmed or expired rows; its id
// is the group's smallest row id. A run or artifact of another repository is
// 404, never 403.
import { AppError } from '../../modules/errors.ts';
import type { Clock } from '../../modules/clock.ts';
import { pipeline } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { ZipStream } from '../../modules/archive/zip-stream.ts';
import type { EntryResult } from '../../modules/archive/zip-stream.ts';
import type { ObjectReader, ObjectStorage } from '../../modules/storage/object-storage.ts';
import { noteReceived } from '../../modules/young-garbage.ts';
import { findRunById } from '../../models/action-runs.ts';
import { ArtifactStatus, listArtifactGroups, markForDeletion, summarizeGroup } from '../../models/artifacts.ts';
import type { Artifact, ArtifactGroup, GroupSummary } from '../../models/artifacts.ts';
import { pageFilesOfArtifact } from '../../models/artifact-files.ts';
import type { Db } from '../../models/database.ts';
import type { Repository } from '../../models/repos.ts';

const ARTIFACT_NOT_FOUND = 'artifact not found';
/** Files of a v3 artifact read per page when it is zipped. */
const FILE_PAGE = 200;

export interface ArtifactPage {
  groups: ArtifactGroup[];
  total: number;
}

export class ArtifactRestService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly storage: ObjectStorage,
  ) {}

  async list(
    repo: Repository,
    filter: { runId?: number; name?: string },
    page: { limit: number; offset: number },
  ): Promise<ArtifactPage> {
    if (filter.runId !== undefined) {
      const run = filter.runId > 0 ? await findRunById(this.db, filter.runId) : null;
      if (run === null) throw AppError.notFoundMessage(`run with id ${filter.runId}: resource does not exist`);
      if (run.repoId !== repo.id) throw AppError.notFoundMessage('resource does not exist');
    }
    return listArtifactGroups(this.db, repo.id, filter, page);
  }

  /** The visible group `id` names. */
  async get(repo: Repository, id: number): Promise<GroupSummary> {
    const summary = await summarizeGroup(this.db, repo.id, id);
    if (summary === undefined) throw AppError.notFoundMessage(ARTIFACT_NOT_FOUND);
    return summary;
  }

  /** Marks every row of the group for deletion; the files go with the next retention pass. */
  async delete(repo: Repository, id: number): Promise<void> {
    const { group } = await this.get(repo, id);
    await markForDeletion(this.db, { runId: group.runId, name: group.name }, this.clock.nowSec());
  }

  /**
   * The artifact's zip: a v4 artifact's stored zip as it is; a v3 artifact's
   * files zipped as they are read (gzip-encoded ones unpacked), as Forgejo's
   * services/actions/download.go serves them. 404 unless every row is confirmed.
   */
  async openZip(repo: Repository, id: number): Promise<ArtifactZip> {
    const { group, rows, allConfirmed, first } = await this.get(repo, id);
    if (!allConfirmed) throw AppError.notFoundMessage(ARTIFACT_NOT_FOUND);
    if (rows === 1 && first.contentEncoding === 'application/zip' && first.path === `${first.name}.zip`) {
      try {
        return { name: group.name, reader: await this.storage.open(`${first.storagePath}/artifact.zip`) };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw AppError.notFoundMessage(ARTIFACT_NOT_FOUND);
        throw error;
      }
    }
    // The zip is written without ZIP64: one that could not fit is refused now rather than cut at 4 GiB.
    if (!fitsWithoutZip64(group.size, rows))
      throw AppError.unprocessable(
        `artifact ${group.name} (${group.size} bytes in ${rows} files) is too large for a zip without ZIP64; download its files with download-artifact@v3`,
      );
    // Every file must still be there before the first byte is sent: a missing one is a 404, not a cut zip.
    for await (const file of this.filesOf(group))
      if ((await this.storage.size(`${file.storagePath}/file`)) === null)
        throw AppError.notFoundMessage(ARTIFACT_NOT_FOUND);
    return { name: group.name, chunks: zipFiles(this.storage, this.filesOf(group), this.clock.nowMs()) };
  }

  /** The confirmed files of a v3 artifact, read page by page. */
  private async *filesOf(group: ArtifactGroup): AsyncGenerator<Artifact> {
    const where = { runId: group.runId, name: group.name, status: ArtifactStatus.uploadConfirmed };
    for (let after = 0; ;) {
      const page = await pageFilesOfArtifact(this.db, where, after, FILE_PAGE);
      yield* page;
      const last = page.at(-1);
      if (last === undefined || page.length < FILE_PAGE) return;
      after = last.id;
    }
  }
}

/** Passes `source` through, counting its fresh buffers towards the next scavenge (young-garbage.ts). */
async function* counted(source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  for await (const chunk of source) {
    noteReceived(chunk.length);
    yield chunk;
  }
}

/** Below 4 GiB and 65,535 entries with room for deflate's worst case and every header (1 KiB per file is ample). */
function fitsWithoutZip64(bytes: number, files: number): boolean {
  return files < 0xffff && bytes + Math.ceil(bytes / 1000) + files * 1024 + 65_536 < 0xffffffff;
}

export type ArtifactZip = { name: string; reader: ObjectReader } | { name: string; chunks: AsyncIterable<Buffer> };

/** The zip of v3 files, entry by entry; a file that cannot be read whole fails the stream (the download is cut). */
async function* zipFiles(
  storage: ObjectStorage,
  files: AsyncIterable<Artifact>,
  nowMs: number,
): AsyncGenerator<Buffer> {
  const zip = new ZipStream(new Date(nowMs));
  for await (const file of files) {
    const stored = await storage.read(`${file.storagePath}/file`);
    const source: AsyncIterable<Buffer> =
      file.contentEncoding === 'gzip' ? pipeline(stored, createGunzip(), () => {}) : stored;
    const result: EntryResult = { error: null };
    for await (const piece of zip.entry(file.path, counted(source), result)) {
      // The file's reads and deflate's output are fresh buffers that die at once: collected every few MiB.
      noteReceived(piece.length);
      yield piece;
    }
    if (result.error !== null) throw result.error;
  }
  yield* zip.finish();
}
