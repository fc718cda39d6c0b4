// Task logs on disk: one plain file per task while the runner streams lines
// to it, one gzip file once the runner says "no more" (or housekeeping stops
// the task). Forgejo keeps running logs in DBFS and archives them to the
// `actions_log` storage (modules/actions/log.go); here both live under
// <dataDir>/actions_log, named by the repository and task ids, which never
// change (Forgejo's owner/repo names do on rename):
//
//   <repoId>/<taskId mod 256 as 2 hex digits>/<taskId>.log      while running
//   <repoId>/<taskId mod 256 as 2 hex digits>/<taskId>.log.gz   archived
//
// Durability: the database is the truth. action_task.log_size says how many
// bytes of the plain file are committed; an append writes at that offset,
// fsyncs, and only then moves log_length/log_size on. Bytes past log_size
// (a crash between fsync and the update, or a writer that lost a race) are
// never read and are overwritten by the next append, which writes at
// log_size again. So the ack a runner gets after a restart is exactly what is
// durably on disk, with nothing to recover. Concurrent writers of the same
// lines write identical bytes at identical offsets (a line's bytes depend
// only on the runner's row), so they cannot corrupt the committed prefix.
//
// Size limit (GANTRY_ACTIONS_LOG_MAX_SIZE): a log never grows past it. Lines
// are stored while they leave room for one notice line before the limit; the
// first line that does not is replaced by the notice, and from then on
// nothing is stored. The runner's lines are still acknowledged (the caller
// moves log_length on by every row), so it stops resending them and the
// task finishes normally. A log is known to be sealed by its last line: the
// notice, whose bytes depend only on the limit and the dropped row's time,
// so concurrent writers still write identical bytes at identical offsets.
//
// Reading (job-logs.ts): a log is served as stored, `<time> <content>\n` per
// line. A running log is read only below the log_size the reader saw, so a
// reader never sees bytes a runner has not been acknowledged; an archived log
// is gunzipped on the fly and a byte range of it is reached by skipping
// decompressed bytes, so neither is ever held whole in memory. A range is
// served through log-body.ts, which reuses its buffers.
import { randomBytes } from 'node:crypto';
import { constants as fsConstants, createReadStream, createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '../../modules/private-files.ts';
import { ArchivedLogBody, EMPTY_LOG_BODY, PlainLogBody } from './log-body.ts';
import type { LogBody } from './log-body.ts';

/** Forgejo's MaxLineSize: a line's content is cut at 64 KiB. */
export const MAX_LOG_LINE_BYTES = 64 * 1024;
/** The widest timestamp formatLogTime writes (a six-digit year with its sign), with room to spare. */
const NOTICE_TIME_BYTES = 40;
/** A stored line's bytes at most: the content, its timestamp, a space and `\n`. */
const MAX_STORED_LINE_BYTES = MAX_LOG_LINE_BYTES + NOTICE_TIME_BYTES + 2;

/** The line that ends a log cut at GANTRY_ACTIONS_LOG_MAX_SIZE. */
export function truncationNotice(maxBytes: number): string {
  return `Gantry: the rest of this log was dropped: a task's log is limited to ${maxBytes} bytes (GANTRY_ACTIONS_LOG_MAX_SIZE).`;
}

export interface LogRow {
  /** Unix seconds, fractions allowed; absent reads as the epoch, as Go's nil Timestamp does. */
  time?: number;
  /**
   * Nanoseconds within `time` (then whole seconds), as the runner's protobuf
   * Timestamp carries them. A float of seconds since 1970 only holds about
   * 240 ns, so without this a line's time could differ from what the runner
   * sent in the seventh fractional digit.
   */
  nanos?: number;
  content: string;
}

/** Where a task's log is, as action_task records it. */
export interface LogLocation {
  /** Relative to the log root; '' while nothing was ever written. */
  filename: string;
  /** The file is the gzip archive. */
  inStorage: boolean;
  /** Committed bytes of the plain log. */
  size: number;
}

export interface ReadLogOptions {
  /** 0-based index of the first line to yield. */
  fromLine?: number;
  /** At most this many lines. */
  limit?: number;
}

/**
 * `2006-01-02T15:04:05.0000000Z07:00` in UTC (Forgejo's TimeFormat): seven
 * fractional digits. With `nanos` the digits are Go's: the nanoseconds cut
 * (not rounded) to 100 ns, so a line reads exactly as Forgejo prints the
 * runner's timestamp; a fractional `seconds` alone is rounded to them.
 */
export function formatLogTime(seconds: number | undefined, nanos?: number): string {
  // Outside what a Date holds (a runner's garbage) reads as the epoch rather than failing the upload.
  const t = seconds !== undefined && Number.isFinite(seconds) && Math.abs(seconds) < 8.64e12 ? seconds : 0;
  let whole = Math.floor(t);
  let ticks: number;
  if (nanos !== undefined && Number.isSafeInteger(nanos) && t === whole) {
    // Go's time.Unix normalises nanoseconds outside [0, 1e9) into the seconds.
    whole += Math.floor(nanos / 1e9);
    ticks = Math.floor((((nanos % 1e9) + 1e9) % 1e9) / 100);
  } else {
    ticks = Math.round((t - whole) * 1e7);
  }
  if (ticks >= 1e7) {
    whole += 1;
    ticks -= 1e7;
  }
  if (Math.abs(whole) >= 8.64e12) return formatLogTime(0);
  const iso = new Date(whole * 1000).toISOString();
  return `${iso.slice(0, iso.indexOf('.'))}.${String(ticks).padStart(7, '0')}Z`;
}

/**
 * One stored line (modules/actions/log.go FormatLog): embedded newlines
 * become the two characters `\n`, so a line is one line; content is cut at
 * 64 KiB. Unlike Go, the cut backs off to a character boundary.
 */
export function formatLogLine(row: LogRow): string {
  let content = row.content.replaceAll('\n', '\\n');
  // A UTF-16 code unit is at most 3 UTF-8 bytes: most lines need no byte count at all.
  const bytes = content.length * 3 > MAX_LOG_LINE_BYTES ? Buffer.from(content, 'utf8') : null;
  if (bytes !== null && bytes.length > MAX_LOG_LINE_BYTES) {
    let end = MAX_LOG_LINE_BYTES;
    while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end -= 1;
    content = bytes.subarray(0, end).toString('utf8');
  }
  return `${formatLogTime(row.time, row.nanos)} ${content}\n`;
}

/** The plain log's name of a task: ids only, so renames never move a log. */
export function plainLogName(repoId: number, taskId: number): string {
  return `${repoId}/${(taskId % 256).toString(16).padStart(2, '0')}/${taskId}.log`;
}

function archivedLogName(plainName: string): string {
  return `${plainName}.gz`;
}

function isMissing(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 'ENOENT';
}

async function fsyncPath(target: string): Promise<void> {
  const handle = await fs.open(target, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Splits a byte stream on `\n` without holding more than one line and one chunk. */
async function* splitLines(source: AsyncIterable<Buffer>): AsyncGenerator<string> {
  let rest: Buffer = Buffer.alloc(0);
  for await (const chunk of source) {
    let data = rest.length > 0 ? Buffer.concat([rest, chunk]) : chunk;
    let start = 0;
    let nl = data.indexOf(0x0a, start);
    while (nl !== -1) {
      yield data.subarray(start, nl).toString('utf8');
      start = nl + 1;
      nl = data.indexOf(0x0a, start);
    }
    data = data.subarray(start);
    rest = Buffer.from(data);
  }
  if (rest.length > 0) yield rest.toString('utf8');
}

export class TaskLogStore {
  /** ` ${notice}\n`: how a sealed log ends, whatever the notice's timestamp. */
  private readonly sealedSuffix: Buffer;

  /** `root` is <dataDir>/actions_log; `maxBytes` bounds each log (GANTRY_ACTIONS_LOG_MAX_SIZE). */
  constructor(
    readonly root: string,
    readonly maxBytes: number = Number.POSITIVE_INFINITY,
  ) {
    this.sealedSuffix = Buffer.from(` ${truncationNotice(maxBytes)}\n`, 'utf8');
  }

  /** Deletes every log of a repository (it has been deleted; its task rows went with it). */
  async removeRepository(repoId: number): Promise<void> {
    await fs.rm(path.join(this.root, String(repoId)), { recursive: true, force: true });
  }

  /** The absolute path of a stored name; refuses names that would leave the root. */
  resolve(name: string): string {
    const normalized = path.posix.normalize(name);
    if (
      name === '' ||
      path.posix.isAbsolute(normalized) ||
      normalized.startsWith('../') ||
      normalized === '..' ||
      normalized.includes('\0')
    ) {
      throw new Error(`unsafe log file name ${JSON.stringify(name)}`);
    }
    return path.join(this.root, ...normalized.split('/'));
  }

  /**
   * Writes `lines` at byte `offset` of the plain log (creating it, and
   * syncing the new directory entries, when needed) and fsyncs it. Returns
   * the bytes written. The caller commits offset + bytes afterwards. Within
   * the size limit: lines past it are dropped (0 bytes once the log is sealed).
   */
  async append(name: string, offset: number, lines: readonly LogRow[]): Promise<number> {
    const file = this.resolve(name);
    const data = await this.bytesWithinLimit(file, offset, lines);
    if (data.length === 0) return 0;
    let handle: fs.FileHandle;
    let created = false;
    try {
      handle = await fs.open(file, 'r+');
    } catch (error) {
      if (!isMissing(error)) throw error;
      await fs.mkdir(path.dirname(file), { recursive: true, mode: PRIVATE_DIR_MODE });
      // Create without truncating and without O_APPEND (which would ignore the
      // offset): a concurrent writer may have created it a moment ago.
      // Owner-only: a log may echo what a step printed, secrets included.
      handle = await fs.open(file, fsConstants.O_RDWR | fsConstants.O_CREAT, PRIVATE_FILE_MODE);
      created = true;
    }
    try {
      let written = 0;
      while (written < data.length) {
        const { bytesWritten } = await handle.write(data, written, data.length - written, offset + written);
        written += bytesWritten;
      }
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (created) await this.syncDirectories(path.dirname(file));
    return data.length;
  }

  /** The formatted lines that fit under the limit, then the notice if some do not. */
  private async bytesWithinLimit(file: string, offset: number, lines: readonly LogRow[]): Promise<Buffer> {
    const formatted = lines.map((row) => Buffer.from(formatLogLine(row), 'utf8'));
    if (this.maxBytes === Number.POSITIVE_INFINITY) return Buffer.concat(formatted);
    // Room for the notice is always kept: its timestamp and the fixed rest.
    const reserve = NOTICE_TIME_BYTES + this.sealedSuffix.length;
    // A log is sealed only after a line (at most MAX_STORED_LINE_BYTES) did not fit: only near the limit is it worth a look.
    if (offset + MAX_STORED_LINE_BYTES + reserve > this.maxBytes && (await this.endsWithNotice(file, offset)))
      return Buffer.alloc(0);
    const kept: Buffer[] = [];
    let size = offset;
    for (const [index, line] of formatted.entries()) {
      if (size + line.length + reserve > this.maxBytes) {
        kept.push(
          Buffer.concat([
            Buffer.from(formatLogTime(lines[index]?.time, lines[index]?.nanos), 'utf8'),
            this.sealedSuffix,
          ]),
        );
        break;
      }
      kept.push(line);
      size += line.length;
    }
    return Buffer.concat(kept);
  }

  /** The committed log (its first `size` bytes) ends with the truncation notice. */
  private async endsWithNotice(file: string, size: number): Promise<boolean> {
    const suffix = this.sealedSuffix;
    if (size < suffix.length) return false;
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(file, 'r');
    } catch (error) {
      if (isMissing(error)) return false;
      throw error;
    }
    try {
      const tail = Buffer.alloc(suffix.length);
      const { bytesRead } = await handle.read(tail, 0, suffix.length, size - suffix.length);
      return bytesRead === suffix.length && tail.equals(suffix);
    } finally {
      await handle.close();
    }
  }

  /**
   * Compresses the first `size` bytes of the plain log into its archive
   * (streamed through gzip; written to a temporary file, fsynced, renamed).
   * Returns the archive's name, or '' for an empty log, which needs no file.
   * The plain file stays until the caller has committed the archive.
   */
  async archive(plainName: string, size: number): Promise<string> {
    if (size === 0) return '';
    const plain = this.resolve(plainName);
    const archivedName = archivedLogName(plainName);
    const target = this.resolve(archivedName);
    const temporary = `${target}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      await pipeline(
        createReadStream(plain, { start: 0, end: size - 1 }),
        createGzip(),
        createWriteStream(temporary, { mode: PRIVATE_FILE_MODE }),
      );
      await fsyncPath(temporary);
      await fs.rename(temporary, target);
    } catch (error) {
      await fs.rm(temporary, { force: true });
      throw error;
    }
    await fsyncPath(path.dirname(target));
    return archivedName;
  }

  /** Drops a plain log whose archive is committed (or that holds nothing committed). */
  async removePlain(plainName: string): Promise<void> {
    await fs.rm(this.resolve(plainName), { force: true });
  }

  /**
   * The stored lines (without their `\n`), streamed from the plain file (up
   * to its committed size) or through gunzip from the archive. Throws
   * ENOENT when the file went away (archived meanwhile): the caller re-reads
   * the location and tries again.
   */
  async open(location: LogLocation): Promise<Readable> {
    if (location.filename === '' || (!location.inStorage && location.size === 0)) return Readable.from([]);
    const file = this.resolve(location.filename);
    // Open first, so a missing file fails here rather than inside the iteration.
    const handle = await fs.open(file, 'r');
    if (!location.inStorage) return handle.createReadStream({ start: 0, end: location.size - 1 });
    const gunzip = createGunzip();
    const raw = handle.createReadStream();
    raw.on('error', (error) => gunzip.destroy(error));
    // pipe() never ends its source early: a reader that stops (a limit) must close the file too.
    gunzip.on('close', () => raw.destroy());
    return raw.pipe(gunzip);
  }

  /**
   * Bytes `start`..`end` (inclusive) of the committed log, opened but not
   * yet read: from the plain file directly, or through gunzip, skipping the
   * decompressed bytes before `start`. The caller keeps `end` below the
   * committed size (the archive holds exactly that many bytes). Throws
   * ENOENT as `open` does, before anything is sent.
   */
  async openRange(location: LogLocation, start: number, end: number): Promise<LogBody> {
    if (end < start || location.filename === '' || (!location.inStorage && location.size === 0)) return EMPTY_LOG_BODY;
    const handle = await fs.open(this.resolve(location.filename), 'r');
    return location.inStorage
      ? new ArchivedLogBody(handle, start, end - start + 1, start === 0 && end === location.size - 1)
      : new PlainLogBody(handle, start, end);
  }

  async *lines(stream: Readable, options: ReadLogOptions = {}): AsyncGenerator<string> {
    const from = Math.max(0, options.fromLine ?? 0);
    const limit = options.limit ?? Number.POSITIVE_INFINITY;
    if (limit <= 0) {
      stream.destroy();
      return;
    }
    let index = 0;
    let yielded = 0;
    try {
      for await (const line of splitLines(stream as AsyncIterable<Buffer>)) {
        if (index >= from) {
          yield line;
          yielded += 1;
          if (yielded >= limit) return;
        }
        index += 1;
      }
    } finally {
      stream.destroy();
    }
  }

  // A new file's entry, and the directories mkdir may have just made, survive a crash.
  private async syncDirectories(dir: string): Promise<void> {
    const top = path.dirname(this.root);
    for (let current = dir; ; current = path.dirname(current)) {
      await fsyncPath(current);
      if (current === top || !current.startsWith(this.root)) break;
    }
  }
}
