// Object reads through long-lived `git cat-file --batch` children, so the hot
// path (push → workflow discovery → dispatch) costs pipe round trips instead
// of a process spawn per object.
//
// Freshness: a long-lived cat-file sees later writes. It re-reads loose refs
// on every lookup, re-stats packed-refs, and rescans the pack directory when
// an object is not found, so new commits, moved refs, new tags, packed refs
// and pushed packs all show up (cat-file.test.ts checks each case). The one
// per-process cache that would go stale, replace refs (refs/replace/*), is
// switched off with GIT_NO_REPLACE_OBJECTS: a pushed replace ref must never
// change what an object id reads as. Names are passed through as given; the
// revision-syntax pitfalls (DWIM refs, `:/regex`, `./path`) are handled by
// repository-reader.ts, which only sends names it has vetted.
import { spawn } from 'node:child_process';
import type { ChildProcessByStdio } from 'node:child_process';
import { constants as bufferConstants } from 'node:buffer';
import { resolve } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { gitEnvironment, runGit } from './run-git.ts';
import type { ObjectFormat } from './bare-repository.ts';

export type GitObjectType = 'blob' | 'tree' | 'commit' | 'tag';

export interface GitObjectInfo {
  oid: string;
  type: GitObjectType;
  size: number;
}

export interface GitObject extends GitObjectInfo {
  content: Buffer;
}

export interface ReadObjectOptions {
  /** A bigger object is read past (the process stays usable) and the read rejects with ObjectTooLargeError. */
  maxSize?: number;
}

export interface CatFileProcessOptions {
  /** How long git may take to answer one request once it is next in line. */
  requestTimeoutMs?: number;
  /** Called whenever the last outstanding request settles (the pool's idle clock). */
  onIdle?: () => void;
}

export interface CatFilePoolOptions {
  /** Most children alive at once; a request for another repository waits when all are busy. */
  maxProcesses?: number;
  /** An idle child is ended after this long. */
  idleTimeoutMs?: number;
  requestTimeoutMs?: number;
}

/** The child died, timed out, was closed, or spoke something we cannot parse. */
export class CatFileError extends Error {
  readonly gitDir: string;
  constructor(gitDir: string, message: string) {
    super(`git cat-file --batch (${gitDir}): ${message}`);
    this.name = 'CatFileError';
    this.gitDir = gitDir;
  }
}

export class ObjectTooLargeError extends Error {
  readonly object: GitObjectInfo;
  readonly maxSize: number;
  constructor(object: GitObjectInfo, maxSize: number) {
    super(`git ${object.type} ${object.oid} is ${object.size} bytes, more than the ${maxSize} allowed`);
    this.name = 'ObjectTooLargeError';
    this.object = object;
    this.maxSize = maxSize;
  }
}

const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
const DEFAULT_MAX_PROCESSES = 16;
const DEFAULT_IDLE_TIMEOUT_MS = 60_000;
// Only used to explain a death; cat-file is quiet unless something is wrong.
const STDERR_TAIL_BYTES = 4096;
const HEADER = /^([0-9a-f]{40}|[0-9a-f]{64}) (blob|tree|commit|tag) (\d+)$/;
const NEWLINE = 0x0a;
// Beyond this a Buffer cannot be allocated at all; the read fails cleanly instead of throwing in a stream handler.
const MAX_BUFFER_LENGTH = bufferConstants.MAX_LENGTH;

interface Request {
  name: string;
  /** false: content is read past and dropped (readInfo). */
  keepContent: boolean;
  maxSize: number;
  resolve(value: GitObject | GitObjectInfo | null): void;
  reject(err: Error): void;
}

interface Body {
  request: Request;
  info: GitObjectInfo;
  /** Allocated once at the announced size, so a big object costs one copy, not a concat per chunk. */
  content: Buffer | null;
  filled: number;
  error: Error | null;
}

/** cat-file stops at a newline and silently drops a trailing CR or anything after a NUL. */
function assertBatchName(name: string): void {
  if (name.length === 0 || /[\n\r\0]/.test(name)) {
    throw new TypeError(`invalid object name for cat-file: ${JSON.stringify(name)}`);
  }
}

/**
 * One spawned child and the requests written to it. Never reused after it
 * dies: CatFileProcess replaces it, so a late event from a dead child can
 * never settle a request that belongs to its successor.
 */
class BatchChild {
  private readonly proc: ChildProcessByStdio<Writable, Readable, Readable>;
  private readonly queue: Request[] = [];
  private head = 0;
  private partialHeader: Buffer | null = null;
  private body: Body | null = null;
  private stderrTail = '';
  // Names asked for in this tick, written together: one write(2) for a burst
  // instead of one per name (writev of many tiny chunks was the top cost).
  private outgoing = '';
  // Runs while a request is outstanding; restarted as each answer arrives.
  private timer: NodeJS.Timeout | null = null;
  private deathReason: string | null = null;
  dead = false;
  readonly closed: Promise<void>;

  constructor(
    private readonly gitDir: string,
    private readonly timeoutMs: number,
    private readonly onIdle: () => void,
  ) {
    // `--git-dir=<abs>` as one argument, as in runGit: never read as an option.
    this.proc = spawn('git', [`--git-dir=${gitDir}`, 'cat-file', '--batch'], {
      env: gitEnvironment({ GIT_NO_REPLACE_OBJECTS: '1' }),
      stdio: ['pipe', 'pipe', 'pipe'],
      shell: false,
      windowsHide: true,
    });
    this.closed = new Promise((done) => {
      this.proc.on('close', (code, signal) => {
        this.die(code !== null ? `exited with code ${code}` : `killed by ${signal ?? 'a signal'}`);
        done();
      });
    });
    this.proc.on('error', (err) => this.die(`could not run git: ${err.message}`));
    this.proc.stdout.on('data', (chunk: Buffer) => this.onData(chunk));
    this.proc.stderr.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
    });
    // A write racing the child's exit fails with EPIPE; 'close' reports the real cause.
    this.proc.stdin.on('error', () => {});
  }

  get pending(): number {
    return this.queue.length - this.head;
  }

  enqueue(request: Request): void {
    if (this.dead) {
      request.reject(new CatFileError(this.gitDir, this.deathReason ?? 'process is gone'));
      return;
    }
    this.queue.push(request);
    if (this.pending === 1) this.restartTimer();
    if (this.outgoing === '') process.nextTick(() => this.flush());
    this.outgoing += `${request.name}\n`;
  }

  private flush(): void {
    const lines = this.outgoing;
    this.outgoing = '';
    if (!this.dead && lines !== '') this.proc.stdin.write(lines);
  }

  /** Let git answer what it was asked, then exit (EOF on stdin). */
  end(): Promise<void> {
    this.flush();
    this.proc.stdin.end();
    return this.closed;
  }

  kill(reason: string): Promise<void> {
    this.die(reason);
    return this.closed;
  }

  private onData(chunk: Buffer): void {
    let pos = 0;
    while (pos < chunk.length && !this.dead) {
      const body = this.body;
      if (body !== null) {
        const want = body.info.size - body.filled;
        if (want > 0) {
          const n = Math.min(want, chunk.length - pos);
          if (body.content !== null) chunk.copy(body.content, body.filled, pos, pos + n);
          body.filled += n;
          pos += n;
          continue;
        }
        if (chunk[pos] !== NEWLINE) {
          this.die('malformed output: object not followed by a newline');
          return;
        }
        pos += 1;
        this.body = null;
        if (body.error !== null) this.settle((r) => r.reject(body.error as Error));
        else if (body.content !== null)
          this.settle((r) => r.resolve({ ...body.info, content: body.content as Buffer }));
        else this.settle((r) => r.resolve(body.info));
        continue;
      }
      const newline = chunk.indexOf(NEWLINE, pos);
      if (newline === -1) {
        // Header split across reads: rare and short, so copying is fine here.
        const rest = chunk.subarray(pos);
        this.partialHeader =
          this.partialHeader === null ? Buffer.from(rest) : Buffer.concat([this.partialHeader, rest]);
        return;
      }
      let line = chunk.subarray(pos, newline);
      if (this.partialHeader !== null) {
        line = Buffer.concat([this.partialHeader, line]);
        this.partialHeader = null;
      }
      pos = newline + 1;
      this.onHeader(line.toString('utf8'));
    }
  }

  private onHeader(line: string): void {
    const request = this.queue[this.head];
    if (request === undefined) {
      this.die(`unexpected output: ${JSON.stringify(line.slice(0, 200))}`);
      return;
    }
    const match = HEADER.exec(line);
    if (match === null) {
      // `<name> missing` / `<name> ambiguous`: not an object we can hand out.
      if (line.endsWith(' missing') || line.endsWith(' ambiguous')) this.settle((r) => r.resolve(null));
      else this.die(`unexpected output: ${JSON.stringify(line.slice(0, 200))}`);
      return;
    }
    const info: GitObjectInfo = { oid: match[1] as string, type: match[2] as GitObjectType, size: Number(match[3]) };
    let content: Buffer | null = null;
    let error: Error | null = null;
    const limit = Math.min(request.maxSize, MAX_BUFFER_LENGTH);
    if (info.size > limit) error = new ObjectTooLargeError(info, limit);
    else if (request.keepContent) content = Buffer.allocUnsafe(info.size);
    this.body = { request, info, content, filled: 0, error };
  }

  private settle(action: (request: Request) => void): void {
    const request = this.queue[this.head];
    if (request === undefined) return;
    this.queue[this.head] = undefined as unknown as Request;
    this.head += 1;
    // Compact now and then instead of shift(), which is O(n) per call.
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
    action(request);
    if (this.pending > 0) {
      this.restartTimer();
    } else {
      this.stopTimer();
      this.onIdle();
    }
  }

  private restartTimer(): void {
    if (this.timer === null) this.timer = setTimeout(() => this.onTimeout(), this.timeoutMs);
    else this.timer.refresh();
  }

  private stopTimer(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private onTimeout(): void {
    const request = this.queue[this.head];
    if (request === undefined || this.dead) return;
    // The stream is now out of step with the queue: the only safe move is a new process.
    this.die(`no answer for ${JSON.stringify(request.name)} within ${this.timeoutMs} ms`);
  }

  private die(reason: string): void {
    if (this.dead) return;
    this.dead = true;
    const detail = this.stderrTail.trim().split('\n').pop();
    this.deathReason = detail !== undefined && detail !== '' ? `${reason}: ${detail}` : reason;
    this.stopTimer();
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
    const pending = this.queue.slice(this.head);
    this.queue.length = 0;
    this.head = 0;
    this.body = null;
    for (const request of pending) request.reject(new CatFileError(this.gitDir, this.deathReason));
    if (pending.length > 0) this.onIdle();
  }
}

/**
 * One `git cat-file --batch` for one repository. Requests are answered in
 * the order written, so any number may be in flight (pipelined). The child is
 * spawned on first use and again on the first request after it dies.
 */
export class CatFileProcess {
  readonly gitDir: string;
  private child: BatchChild | null = null;
  private format: Promise<ObjectFormat> | null = null;
  private readonly timeoutMs: number;
  private readonly onIdle: () => void;

  constructor(gitDir: string, opts: CatFileProcessOptions = {}) {
    this.gitDir = resolve(gitDir);
    this.timeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.onIdle = opts.onIdle ?? (() => {});
  }

  /** Requests written and not yet answered. */
  get pending(): number {
    return this.child === null || this.child.dead ? 0 : this.child.pending;
  }

  /** The object `name` names, or null when git says it is missing or ambiguous. */
  read(name: string, opts: ReadObjectOptions = {}): Promise<GitObject | null> {
    return this.request(name, true, opts.maxSize) as Promise<GitObject | null>;
  }

  /** Like read, but the content is read past and dropped: for existence and type checks. */
  readInfo(name: string): Promise<GitObjectInfo | null> {
    return this.request(name, false, undefined);
  }

  /**
   * sha1 or sha256, asked once per repository: it decides how long a full
   * object id is, which callers need to tell full ids from abbreviations.
   */
  objectFormat(): Promise<ObjectFormat> {
    if (this.format === null) {
      const asked = runGit(['rev-parse', '--show-object-format'], { gitDir: this.gitDir }).then((out) => {
        const format = out.toString('utf8').trim();
        if (format !== 'sha1' && format !== 'sha256')
          throw new Error(`unknown object format ${JSON.stringify(format)} in ${this.gitDir}`);
        return format as ObjectFormat;
      });
      // A failure (repository not there yet) is not remembered.
      asked.catch(() => {
        if (this.format === asked) this.format = null;
      });
      this.format = asked;
    }
    return this.format;
  }

  /** Let outstanding requests finish, then stop the child. */
  async end(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (child !== null) await child.end();
  }

  /** Stop the child now; outstanding requests reject. */
  async close(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (child !== null) await child.kill('closed');
  }

  private request(
    name: string,
    keepContent: boolean,
    maxSize: number | undefined,
  ): Promise<GitObject | GitObjectInfo | null> {
    try {
      assertBatchName(name);
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.child === null || this.child.dead) {
      this.child = new BatchChild(this.gitDir, this.timeoutMs, this.onIdle);
    }
    const child = this.child;
    return new Promise((resolvePromise, rejectPromise) => {
      child.enqueue({
        name,
        keepContent,
        maxSize: maxSize ?? Infinity,
        resolve: resolvePromise,
        reject: rejectPromise,
      });
    });
  }
}

interface PoolEntry {
  process: CatFileProcess;
  idleTimer: NodeJS.Timeout | null;
}

/**
 * At most `maxProcesses` cat-file children across all repositories, the
 * least recently used idle one making room for a new repository. Keyed by
 * absolute path, so callers must evict() when a repository is deleted or
 * renamed, or a child keeps serving the old files.
 */
export class CatFilePool {
  private readonly entries = new Map<string, PoolEntry>();
  // Callers for a new repository while every child is busy; woken as one goes idle.
  private readonly waiting: Array<() => void> = [];
  private readonly maxProcesses: number;
  private readonly idleTimeoutMs: number;
  private readonly requestTimeoutMs: number;
  private closed = false;

  constructor(opts: CatFilePoolOptions = {}) {
    this.maxProcesses = Math.max(1, opts.maxProcesses ?? DEFAULT_MAX_PROCESSES);
    this.idleTimeoutMs = opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  }

  /** Number of repositories with a process entry (for tests and metrics). */
  get size(): number {
    return this.entries.size;
  }

  async readObject(gitDir: string, name: string, opts?: ReadObjectOptions): Promise<GitObject | null> {
    assertBatchName(name);
    return this.use(gitDir, (process) => process.read(name, opts));
  }

  async readObjectInfo(gitDir: string, name: string): Promise<GitObjectInfo | null> {
    assertBatchName(name);
    return this.use(gitDir, (process) => process.readInfo(name));
  }

  async objectFormat(gitDir: string): Promise<ObjectFormat> {
    return this.use(gitDir, (process) => process.objectFormat());
  }

  /** Forget a repository (deleted, renamed, transferred): its child finishes what it was asked, then exits. */
  async evict(gitDir: string): Promise<void> {
    const key = resolve(gitDir);
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.drop(key, entry);
    await entry.process.end();
  }

  /** Kill every child and wait for each to be reaped; later reads reject. */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.entries.entries()];
    for (const [key, entry] of all) this.drop(key, entry);
    for (const wake of this.waiting.splice(0)) wake();
    await Promise.all(all.map(([, entry]) => entry.process.close()));
  }

  /**
   * Hand `fn` a process in the same tick as it is picked: `fn` enqueues its
   * request synchronously, so the process is busy before anything else can
   * see it idle and evict it.
   */
  private async use<T>(gitDir: string, fn: (process: CatFileProcess) => Promise<T>): Promise<T> {
    const key = resolve(gitDir);
    for (;;) {
      if (this.closed) throw new CatFileError(key, 'pool is closed');
      const process = this.pick(key);
      if (process !== null) return fn(process);
      await new Promise<void>((wake) => this.waiting.push(wake));
    }
  }

  private pick(key: string): CatFileProcess | null {
    const entry = this.entries.get(key);
    if (entry !== undefined) {
      // Map order is the LRU order: move to the back on every use.
      this.entries.delete(key);
      this.entries.set(key, entry);
      if (entry.idleTimer !== null) {
        clearTimeout(entry.idleTimer);
        entry.idleTimer = null;
      }
      return entry.process;
    }
    if (this.entries.size < this.maxProcesses || this.evictLeastRecentlyUsedIdle()) return this.create(key);
    return null;
  }

  private create(key: string): CatFileProcess {
    const entry: PoolEntry = {
      process: new CatFileProcess(key, {
        requestTimeoutMs: this.requestTimeoutMs,
        onIdle: () => this.onIdle(key, entry),
      }),
      idleTimer: null,
    };
    this.entries.set(key, entry);
    // Armed now as well: a use that never reaches the child (objectFormat) must not pin the slot.
    this.armIdleTimer(key, entry);
    return entry.process;
  }

  private onIdle(key: string, entry: PoolEntry): void {
    if (this.entries.get(key) !== entry) return;
    const wake = this.waiting.shift();
    if (wake !== undefined) {
      // Someone is waiting for a slot; this child is the one free.
      this.drop(key, entry);
      void entry.process.end();
      wake();
      return;
    }
    this.armIdleTimer(key, entry);
  }

  private armIdleTimer(key: string, entry: PoolEntry): void {
    if (entry.idleTimer !== null) clearTimeout(entry.idleTimer);
    entry.idleTimer = setTimeout(() => {
      if (this.entries.get(key) !== entry || entry.process.pending > 0) return;
      this.drop(key, entry);
      void entry.process.end();
    }, this.idleTimeoutMs);
    // An idle child must not keep the server (or a test run) alive on its own.
    entry.idleTimer.unref();
  }

  private evictLeastRecentlyUsedIdle(): boolean {
    for (const [key, entry] of this.entries) {
      if (entry.process.pending === 0) {
        this.drop(key, entry);
        void entry.process.end();
        return true;
      }
    }
    return false;
  }

  private drop(key: string, entry: PoolEntry): void {
    if (entry.idleTimer !== null) clearTimeout(entry.idleTimer);
    entry.idleTimer = null;
    if (this.entries.get(key) === entry) this.entries.delete(key);
  }
}
