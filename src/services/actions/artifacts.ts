// The v4 artifact protocol that actions/upload-artifact@v4 and
// download-artifact@v4 speak (through @actions/artifact): Twirp JSON calls
// authenticated by the runtime token, plus blob-style uploads and downloads
// at signed URLs. Forgejo: routers/api/actions/artifactsv4.go.
//
// Upload: CreateArtifact (a pending row and a signed upload URL) → blocks PUT
// to the URL (`comp=block&blockid=…`, each stored as its own object) → the
// block list (`comp=blocklist`): the listed blocks are streamed one after
// another into the artifact's file while its SHA-256 is computed, then the
// blocks are dropped → FinalizeArtifact checks the size and hash the client
// computed and confirms the row. Nothing is ever held whole in memory.
//
// Guarantees:
// - A task reaches only its own run's artifacts: every call names the run
//   (`workflow_run_backend_id`), which must be the token's (400 otherwise).
// - Only a running task's token or signed URL works (runtime-tokens.ts).
// - Quotas (GANTRY_ARTIFACT_MAX_SIZE per artifact, GANTRY_ARTIFACT_MAX_RUN_SIZE
//   per run) are checked as blocks arrive: bytes past them are refused with
//   413 and the whole upload fails (its row `upload error`, its blocks
//   dropped), so a refused upload does not keep eating the run's quota.
//   A stored block's bytes are counted under the run's lock, so concurrent
//   blocks (of one artifact or of several) cannot together pass either quota.
// - The artifact's file is replaced atomically (ObjectStorage.put): a reader
//   sees the previous upload or the new one, never a part.
import { createHash, randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { AppError } from '../../modules/errors.ts';
import type { Clock } from '../../modules/clock.ts';
import type { ObjectReader, ObjectStorage } from '../../modules/storage/object-storage.ts';
import { noteReceived } from '../../modules/young-garbage.ts';
import type { Db } from '../../models/database.ts';
import {
  ArtifactStatus,
  confirmArtifact,
  createOrReuseArtifact,
  failUpload,
  findArtifactById,
  findLiveArtifact,
  listConfirmedOfRun,
  markForDeletion,
  recordCommittedFile,
  runArtifactBytes,
  stageBlockBytes,
} from '../../models/artifacts.ts';
import type { Artifact } from '../../models/artifacts.ts';
import { findRunningTaskScope } from '../../models/task-tokens.ts';
import type { RunningTaskScope } from '../../models/task-tokens.ts';
import type { ArtifactUrlSigner, SignedTarget } from './artifact-urls.ts';
import type { RuntimeTokens } from './runtime-tokens.ts';

const DAY_SEC = 86_400;
/** A block list names each block by a base64 id; Azure allows 64 bytes before encoding. */
const MAX_BLOCK_ID_LENGTH = 100;
/** Azure's limit of blocks per blob. */
const MAX_BLOCKS = 50_000;
/** The block list XML: 50 000 ids of ~100 characters with their tags. */
export const MAX_BLOCK_LIST_BYTES = 8 * 1024 * 1024;

export interface ArtifactLimits {
  /** GANTRY_ARTIFACT_MAX_SIZE: bytes of one artifact. */
  maxArtifactBytes: number;
  /** GANTRY_ARTIFACT_MAX_RUN_SIZE: bytes of all artifacts of a run. */
  maxRunBytes: number;
  /** GANTRY_ARTIFACT_RETENTION_DAYS: kept this long unless the upload asks otherwise. */
  retentionDays: number;
}

/** Forgejo's artifact name rule (routers/api/actions/artifacts_utils.go validateArtifactName). */
export function checkArtifactName(name: string): void {
  if (name === '') throw AppError.invalid('Error artifact name is empty');
  if (/[\\/":<>|*?\r\n]/.test(name) || name.includes('\0'))
    throw AppError.invalid(`Error artifact name contains one of \\ / " : < > | * ? \\r \\n`);
  if (Buffer.byteLength(name, 'utf8') > 255) throw AppError.invalid('Error artifact name is longer than 255 bytes');
}

/**
 * A new artifact's folder: under its repository and run, so either can be
 * removed as one prefix, and named at random, so it is known before the row
 * is inserted (one statement, nothing to repair after a crash) and a new row
 * never shares a folder with an old one whose files are still to be removed.
 */
export function artifactFolder(repoId: number, runId: number): string {
  return `${repoId}/${runId}/${randomUUID()}`;
}
const fileOf = (artifact: Artifact) => `${artifact.storagePath}/artifact.zip`;
const blocksOf = (artifact: Artifact) => `${artifact.storagePath}/blocks`;

/** Counts bytes; more than `max` fails with 413. */
function sizeLimit(max: number, message: string): (chunk: Buffer) => void {
  let seen = 0;
  return (chunk) => {
    seen += chunk.length;
    if (seen > max) throw AppError.tooLarge(message);
  };
}

/** How much of a block is read at a time when blocks are joined (one buffer, reused). */
const JOIN_BUFFER_BYTES = 1024 * 1024;

/** The block ids of an Azure `<BlockList>` in order (Latest, Committed and Uncommitted alike). */
export function parseBlockList(xml: string): string[] {
  if (!/<BlockList\b/.test(xml)) throw AppError.invalid('Error the block list is not a <BlockList> document');
  const ids: string[] = [];
  for (const match of xml.matchAll(/<(Latest|Committed|Uncommitted)>([^<]*)<\/\1>/g)) ids.push(match[2] ?? '');
  if (ids.length > MAX_BLOCKS) throw AppError.invalid(`Error the block list names more than ${MAX_BLOCKS} blocks`);
  return ids;
}

/** The object name of a block: its id in hex, so any id is a safe file name. */
function blockObject(artifact: Artifact, blockId: string): string {
  if (blockId === '' || blockId.length > MAX_BLOCK_ID_LENGTH) throw AppError.invalid('Error invalid block id');
  return `${blocksOf(artifact)}/${Buffer.from(blockId, 'utf8').toString('hex')}`;
}

export interface DownloadableArtifact {
  artifact: Artifact;
  reader: ObjectReader;
}

export class ArtifactService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly storage: ObjectStorage,
    private readonly tokens: RuntimeTokens,
    private readonly urls: ArtifactUrlSigner,
    private readonly limits: ArtifactLimits,
  ) {}

  /**
   * The running task an `Authorization: Bearer …` header stands for, checked
   * against the run the call names (Forgejo's ArtifactContexter and
   * validateRunIDV4).
   */
  async authenticate(authorization: string | undefined, runBackendId: unknown): Promise<RunningTaskScope> {
    const match = /^Bearer (.+)$/i.exec(authorization ?? '');
    if (match === null) throw AppError.unauthorized('Bad authorization header');
    const task = await this.tokens.authenticate((match[1] ?? '').trim());
    if (task === null) throw AppError.unauthorized('Error runner api getting task: task is not running');
    if (String(runBackendId ?? '') !== String(task.runId)) throw AppError.invalid('run-id does not match');
    return task;
  }

  async create(task: RunningTaskScope, input: { name: string; expiresAt?: string }): Promise<string> {
    checkArtifactName(input.name);
    const now = this.clock.nowSec();
    let days = this.limits.retentionDays;
    if (input.expiresAt !== undefined) {
      const at = Date.parse(input.expiresAt);
      if (Number.isNaN(at)) throw AppError.invalid('Error expires_at is not a timestamp');
      // Whole days until expires_at, rounded: the client sends its own now + N days, which is
      // a moment more or less than N days from the server's now (Forgejo truncates, so
      // `retention-days: 1` can become 0, the default). None, or a past time, means the default.
      const requested = Math.round((at / 1000 - now) / DAY_SEC);
      if (requested > 0) days = requested;
    }
    // A name whose files a v3 upload holds in this run cannot become a v4 zip too (artifacts-v3.ts refuses the reverse).
    const live = await findLiveArtifact(this.db, task.runId, input.name);
    if (live !== undefined && live.contentEncoding !== 'application/zip')
      throw AppError.conflict(`Error artifact ${input.name} was uploaded with upload-artifact@v3 in this run`);
    const artifact = await createOrReuseArtifact(
      this.db,
      {
        runId: task.runId,
        jobId: task.jobId,
        taskId: task.taskId,
        repoId: task.repoId,
        ownerId: task.ownerId,
        commitSha: task.commitSha,
        name: input.name,
        path: `${input.name}.zip`,
        contentEncoding: 'application/zip',
        expiredUnix: now + days * DAY_SEC,
        storagePath: artifactFolder(task.repoId, task.runId),
      },
      now,
    );
    return this.urls.url(
      'UploadArtifact',
      { taskId: task.taskId, artifactId: artifact.id, artifactName: input.name },
      now,
    );
  }

  /** The pending upload a signed upload URL names, while its task runs. */
  private async uploadTarget(query: Record<string, unknown>): Promise<Artifact> {
    const target = this.urls.verify('UploadArtifact', query, this.clock.nowSec());
    const artifact = await this.signedArtifact(target);
    // A block of an upload a quota refused (failUpload: the only way to uploadError) gets that
    // refusal too, not "not found": the client sends blocks several at once, and reports whichever
    // error comes back first.
    if (artifact.status === ArtifactStatus.uploadError)
      throw AppError.tooLarge(
        `Quota exceeded: this artifact's upload was refused for passing a quota (GANTRY_ARTIFACT_MAX_SIZE, GANTRY_ARTIFACT_MAX_RUN_SIZE); upload it again within them`,
      );
    if (artifact.status !== ArtifactStatus.uploadPending) throw AppError.notFoundMessage('Error artifact not found');
    return artifact;
  }

  private async signedArtifact(target: SignedTarget): Promise<Artifact> {
    const task = await findRunningTaskScope(this.db, target.taskId);
    if (task === null) throw AppError.unauthorized('Error runner api getting task: task is not running');
    const artifact = await findArtifactById(this.db, target.artifactId);
    if (artifact === undefined || artifact.runId !== task.runId || artifact.name !== target.artifactName)
      throw AppError.notFoundMessage('Error artifact not found');
    return artifact;
  }

  /** `PUT UploadArtifact?…&comp=block&blockid=…`: stores one block, counted against the quotas. */
  async uploadBlock(query: Record<string, unknown>, blockId: string, body: Readable): Promise<void> {
    const artifact = await this.uploadTarget(query);
    const name = blockObject(artifact, blockId);
    let size: number;
    try {
      const room = await this.roomFor(artifact);
      const limit = sizeLimit(room, this.quotaMessage(room));
      size = await this.storage.put(name, body, (chunk) => {
        limit(chunk);
        // Each chunk is a fresh buffer from the HTTP parser: collected every few MiB, not every 32 MB.
        noteReceived(chunk.length);
      });
    } catch (error) {
      if (error instanceof AppError && error.kind === 'too_large') await this.failUpload(artifact);
      throw error;
    }
    // The room read before the block streamed may have gone to blocks of other
    // artifacts of the run meanwhile: counted again under the run's lock.
    const staged = await this.db.transaction().execute((tx) => stageBlockBytes(tx, artifact, size, this.limits));
    if (!staged.staged) {
      await this.storage.remove(name);
      await this.failUpload(artifact);
      throw AppError.tooLarge(this.quotaMessage(staged.room));
    }
  }

  /** An upload past a quota fails as a whole: its row is marked failed and its blocks dropped. */
  private async failUpload(artifact: Artifact): Promise<void> {
    await failUpload(this.db, artifact.id, this.clock.nowSec());
    await this.storage.removePrefix(blocksOf(artifact));
  }

  /** The most bytes this artifact may still take: the smaller of what its own and its run's quota leave. */
  private async roomFor(artifact: Artifact): Promise<number> {
    const others = await runArtifactBytes(this.db, artifact.runId, artifact.id);
    const room = Math.min(
      this.limits.maxArtifactBytes - artifact.stagedSize,
      this.limits.maxRunBytes - others - artifact.stagedSize,
    );
    if (room <= 0) throw AppError.tooLarge(this.quotaMessage(0));
    return room;
  }

  private quotaMessage(room: number): string {
    return `Quota exceeded: an artifact may hold ${this.limits.maxArtifactBytes} bytes (GANTRY_ARTIFACT_MAX_SIZE) and a run's artifacts ${this.limits.maxRunBytes} (GANTRY_ARTIFACT_MAX_RUN_SIZE); ${room} bytes were left`;
  }

  /** `PUT UploadArtifact?…&comp=blocklist`: the listed blocks, in order, become the artifact's file. */
  async commitBlockList(query: Record<string, unknown>, xml: string): Promise<void> {
    const artifact = await this.uploadTarget(query);
    const names = parseBlockList(xml).map((id) => blockObject(artifact, id));
    for (const name of names)
      if ((await this.storage.size(name)) === null) throw AppError.invalid('Error a listed block was never uploaded');
    const storage = this.storage;
    // One block open at a time, whatever the length of the list, read into one
    // buffer: put() writes each chunk before it pulls the next.
    async function* blocks(): AsyncGenerator<Buffer> {
      const buffer = Buffer.allocUnsafe(JOIN_BUFFER_BYTES);
      for (const name of names) {
        const reader = await storage.open(name);
        try {
          for (let position = 0; position < reader.size;) {
            const read = await reader.read(buffer, position);
            if (read === 0) break;
            position += read;
            yield buffer.subarray(0, read);
          }
        } finally {
          await reader.close();
        }
      }
    }
    const hash = createHash('sha256');
    const limit = sizeLimit(this.limits.maxArtifactBytes, this.quotaMessage(this.limits.maxArtifactBytes));
    const size = await this.storage.put(fileOf(artifact), blocks(), (chunk) => {
      limit(chunk);
      hash.update(chunk);
    });
    const recorded = await recordCommittedFile(
      this.db,
      artifact.id,
      size,
      `sha256:${hash.digest('hex')}`,
      this.clock.nowSec(),
    );
    await this.storage.removePrefix(blocksOf(artifact));
    if (!recorded) throw AppError.notFoundMessage('Error artifact not found');
  }

  /** FinalizeArtifact: the committed file must have the size and hash the client computed. */
  async finalize(task: RunningTaskScope, input: { name: string; size?: string; hash?: string }): Promise<number> {
    const artifact = await findLiveArtifact(this.db, task.runId, input.name);
    if (artifact === undefined || artifact.status !== ArtifactStatus.uploadPending)
      throw AppError.notFoundMessage('Error artifact not found');
    if (artifact.digest === '') throw AppError.invalid('Error the artifact has no committed block list');
    if (input.size !== undefined && input.size !== '0' && input.size !== String(artifact.fileSize))
      throw AppError.invalid(`Error artifact size mismatch: ${artifact.fileSize} bytes were uploaded`);
    if (input.hash !== undefined && input.hash !== '' && input.hash !== artifact.digest)
      throw AppError.invalid('Error artifact hash mismatch');
    if (!(await confirmArtifact(this.db, artifact.id, this.clock.nowSec())))
      throw AppError.notFoundMessage('Error artifact not found');
    return artifact.id;
  }

  async list(task: RunningTaskScope, filter: { name?: string; id?: number }): Promise<Artifact[]> {
    return listConfirmedOfRun(this.db, task.runId, filter);
  }

  async signedDownloadUrl(task: RunningTaskScope, name: string): Promise<string> {
    const artifact = await findLiveArtifact(this.db, task.runId, name);
    if (artifact === undefined || artifact.status !== ArtifactStatus.uploadConfirmed)
      throw AppError.notFoundMessage('Error artifact not found');
    return this.urls.url(
      'DownloadArtifact',
      { taskId: task.taskId, artifactId: artifact.id, artifactName: artifact.name },
      this.clock.nowSec(),
    );
  }

  /** `GET DownloadArtifact?…`: the artifact's zip, while the signing task runs. */
  async openSignedDownload(query: Record<string, unknown>): Promise<DownloadableArtifact> {
    const target = this.urls.verify('DownloadArtifact', query, this.clock.nowSec());
    const artifact = await this.signedArtifact(target);
    return this.openConfirmed(artifact);
  }

  /** A confirmed artifact's file (REST zip and signed download). */
  async openConfirmed(artifact: Artifact): Promise<DownloadableArtifact> {
    if (artifact.status !== ArtifactStatus.uploadConfirmed) throw AppError.notFoundMessage('Error artifact not found');
    try {
      return { artifact, reader: await this.storage.open(fileOf(artifact)) };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT')
        throw AppError.notFoundMessage('Error artifact not found');
      throw error;
    }
  }

  /** DeleteArtifact: the run's artifact of that name is marked for deletion (its files go with the next retention pass). */
  async delete(task: RunningTaskScope, name: string): Promise<number> {
    const marked = await markForDeletion(this.db, { runId: task.runId, name }, this.clock.nowSec());
    const first = marked[0];
    if (first === undefined) throw AppError.notFoundMessage('Error artifact not found');
    return first.id;
  }
}
