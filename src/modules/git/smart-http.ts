// Git's smart HTTP protocol (gitprotocol-http) at the git level: the two
// responses a server gives, produced by the system git as streams. No HTTP
// framework, auth or database here; route code maps requests onto these
// functions and copies `body` into the response.
//
// Behaviour follows git's own http-backend.c (get_info_refs, service_rpc,
// run_service) and Forgejo's routers/web/repo/githttp.go.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { accessSync, constants as fsConstants } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { REF_UPDATES_FILE_ENV, readRefUpdates, type RefUpdate } from './receive-hooks.ts';
import { GitCommandError, gitEnvironment } from './run-git.ts';

export type { RefUpdate } from './receive-hooks.ts';

export type GitService = 'git-upload-pack' | 'git-receive-pack';

export function parseGitService(value: unknown): GitService | null {
  return value === 'git-upload-pack' || value === 'git-receive-pack' ? value : null;
}

/** The Content-Type git-http-backend insists on for POST <service> (else 415). */
export function rpcRequestContentType(service: GitService): string {
  return `application/x-${service}-request`;
}

/** How a git child ended; for logs. */
export interface GitExit {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** The first 64 KiB, trimmed. */
  stderr: string;
  /** Set when Gantry killed git: the client went away, or the time limit passed. */
  killedBy: 'client' | 'timeout' | null;
}

export interface GitResponse {
  contentType: string;
  /**
   * What to send as the response body. Destroying it (the client went away)
   * kills git. Ends normally once git has exited, even with a non-zero code:
   * by then git has told the client what went wrong in the protocol itself.
   */
  body: Readable;
  /**
   * Resolves when git produced its first byte, i.e. when it is safe to send
   * a 200. Rejects with GitCommandError if git failed before that (missing
   * repository…): answer 500 instead, and leave `body` alone; with
   * GitRequestRejectedError when git could not read the request: answer 400.
   */
  started: Promise<void>;
  /** Resolves (never rejects) once git and its helpers have exited. */
  done: Promise<GitExit>;
}

export interface ServiceRpcResponse extends GitResponse {
  /**
   * receive-pack: the ref updates git applied, as post-receive saw them,
   * once git has exited; empty when nothing changed. upload-pack: always empty.
   */
  updates: Promise<RefUpdate[]>;
}

export interface AdvertiseRefsOptions {
  gitDir: string;
  service: GitService;
  /** The request's Git-Protocol header, if any. */
  gitProtocol?: string;
  timeoutMs?: number;
}

export interface ServiceRpcOptions {
  gitDir: string;
  service: GitService;
  /** The request body, already decoded (decodeRequestBody). */
  input: Readable;
  gitProtocol?: string;
  /** Prepared by ensureHooks; must hold post-receive. */
  hooksDir: string;
  /** Extra variables for git and the hooks it runs (pusher id…). */
  env?: Record<string, string>;
  /** No limit by default: a big push over a slow link may take long; a client that goes away kills git anyway. */
  timeoutMs?: number;
}

export class UnsupportedContentEncodingError extends Error {
  readonly encoding: string;
  constructor(encoding: string) {
    super(`unsupported Content-Encoding: ${JSON.stringify(encoding)}`);
    this.name = 'UnsupportedContentEncodingError';
    this.encoding = encoding;
  }
}

/**
 * A request git could not read (a broken pkt-line, an unknown command, a
 * want it does not have, a body that is not valid gzip): the client's
 * mistake, not the server's. `started` rejects with it when that happens
 * before git wrote anything.
 */
export class GitRequestRejectedError extends Error {
  constructor(readonly reason: string) {
    super(`git could not read the request: ${reason}`);
    this.name = 'GitRequestRejectedError';
  }
}

// git's own messages for a request it cannot read (pkt-line.c, upload-pack.c,
// receive-pack.c, serve.c); anything else that fails before output is the server's.
const REQUEST_REJECTED =
  /^fatal: .*(protocol error|bad line length|the remote end hung up unexpectedly|invalid command|unknown capability|invalid deepen|not our ref|unexpected line|expected flush)/im;

const ADVERTISE_TIMEOUT_MS = 60_000;
const MAX_STDERR_BYTES = 64 * 1024;
// After SIGTERM git removes its lock files and quarantine folder (tempfile.c
// and tmp-objdir.c clean up on signals); SIGKILL only if it does not exit.
const KILL_GRACE_MS = 2_000;
const FLUSH_PKT = Buffer.from('0000');
// Forgejo's safeGitProtocolHeader: colon-separated alphanumeric key=value
// pairs only, so the header cannot smuggle anything else into git's env.
const SAFE_GIT_PROTOCOL = /^[0-9a-zA-Z]+=[0-9a-zA-Z]+(:[0-9a-zA-Z]+=[0-9a-zA-Z]+)*$/;
const MAX_GIT_PROTOCOL_LENGTH = 256;

const noop = (): void => {};

function pktLine(payload: string): Buffer {
  const data = Buffer.from(payload, 'utf8');
  return Buffer.concat([Buffer.from((data.length + 4).toString(16).padStart(4, '0')), data]);
}

function validGitProtocol(value: string | undefined): string | null {
  if (value === undefined || value.length > MAX_GIT_PROTOCOL_LENGTH) return null;
  return SAFE_GIT_PROTOCOL.test(value) ? value : null;
}

// The highest `version=N` wins, as in git's determine_protocol_version_server.
function requestedVersion(gitProtocol: string | null): number {
  let version = 0;
  for (const pair of gitProtocol?.split(':') ?? []) {
    const [key, value] = pair.split('=');
    if (key === 'version' && value !== undefined && /^[0-9]$/.test(value)) version = Math.max(version, Number(value));
  }
  return version;
}

function protocolEnv(gitProtocol: string | undefined): Record<string, string> {
  const safe = validGitProtocol(gitProtocol);
  return safe === null ? {} : { GIT_PROTOCOL: safe };
}

/**
 * `-c` settings for every invocation of `service`, on the command line so
 * they override the repository's config.
 *
 * upload-pack: uploadpack.allowFilter lets clients make partial clones
 * (`--filter=blob:none`), as Forgejo enables by default (modules/git/git.go).
 *
 * receive-pack: git's receive.* defaults are kept on purpose. In a bare
 * repository denyCurrentBranch does not apply, denyDeleteCurrent refuses to
 * delete HEAD's branch, and force pushes are allowed: branch protection is
 * Gantry's policy, not repository config. receive.fsckObjects stays off
 * (git's default, Forgejo's too): it would reject malformed objects at a CPU
 * cost on every push; an administrator may still enable it per repository.
 */
function serviceConfig(service: GitService, hooksDir?: string): string[] {
  const config: string[] = [];
  if (service === 'git-upload-pack') config.push('-c', 'uploadpack.allowFilter=true');
  // A repository's own hooks/ folder or core.hooksPath is never used: only
  // the hooks Gantry wrote run, and the command line beats any config file.
  if (hooksDir !== undefined) config.push('-c', `core.hooksPath=${hooksDir}`);
  return config;
}

// `--` and an absolute path: the repository can never be read as an option.
// upload-pack's --strict stops git from trying `<dir>.git` or `<dir>/.git`.
function serviceCommand(service: GitService, gitDir: string, advertise: boolean): string[] {
  const command = service === 'git-upload-pack' ? ['upload-pack', '--strict'] : ['receive-pack'];
  command.push('--stateless-rpc');
  if (advertise) command.push('--advertise-refs');
  command.push('--', resolve(gitDir));
  return command;
}

/**
 * Body of `GET info/refs?service=<service>`. For protocol v0/v1 prefixed with
 * the `# service=` pkt-line and a flush; for v2 (upload-pack only; git never
 * pushes over v2, and receive-pack answers v0 whatever it is asked) exactly
 * what git emits, as http-backend.c does.
 */
export function advertiseRefs(opts: AdvertiseRefsOptions): GitResponse {
  const gitProtocol = validGitProtocol(opts.gitProtocol);
  const v2 = opts.service === 'git-upload-pack' && requestedVersion(gitProtocol) === 2;
  const prefix = v2 ? undefined : Buffer.concat([pktLine(`# service=${opts.service}\n`), FLUSH_PKT]);
  const run = streamGit({
    config: serviceConfig(opts.service),
    command: serviceCommand(opts.service, opts.gitDir, true),
    env: protocolEnv(opts.gitProtocol),
    prefix,
    timeoutMs: opts.timeoutMs ?? ADVERTISE_TIMEOUT_MS,
  });
  return { contentType: `application/x-${opts.service}-advertisement`, ...run };
}

/**
 * Body of `POST <service>`: `input` piped into
 * `git <service> --stateless-rpc <gitDir>`, its stdout exposed as `body`.
 */
export function serviceRpc(opts: ServiceRpcOptions): ServiceRpcResponse {
  const hooksDir = resolve(opts.hooksDir);
  const receive = opts.service === 'git-receive-pack';
  const env: Record<string, string> = { ...opts.env, ...protocolEnv(opts.gitProtocol) };
  let updatesFile: string | undefined;
  if (receive) {
    // A missing hook would silently turn every push into "nothing changed".
    accessSync(join(hooksDir, 'post-receive'), fsConstants.X_OK);
    updatesFile = join(tmpdir(), `gantry-ref-updates-${randomUUID()}`);
    env[REF_UPDATES_FILE_ENV] = updatesFile;
  }
  const run = streamGit({
    config: serviceConfig(opts.service, hooksDir),
    command: serviceCommand(opts.service, opts.gitDir, false),
    env,
    input: opts.input,
    // Once a push has fully arrived, let git finish even if the client hangs
    // up: killing it mid-update could leave ref .lock files behind and
    // refs changed that `updates` never reports.
    finishAfterInput: receive,
    timeoutMs: opts.timeoutMs,
  });
  const updates = updatesFile === undefined ? Promise.resolve([]) : run.done.then(() => collectUpdates(updatesFile));
  updates.catch(noop); // the caller may not ask; a rejection must not crash the process
  return { contentType: `application/x-${opts.service}-result`, ...run, updates };
}

async function collectUpdates(file: string): Promise<RefUpdate[]> {
  try {
    return await readRefUpdates(file);
  } finally {
    await rm(file, { force: true });
  }
}

/**
 * The request body as git must read it. git's client gzips upload-pack
 * requests above 1 KiB (remote-curl.c); http-backend.c accepts `gzip` and
 * `x-gzip`. Decoding streams, so a large body is never held in memory.
 */
export function decodeRequestBody(raw: Readable, contentEncoding: string | undefined): Readable {
  const encoding = (contentEncoding ?? '').trim().toLowerCase();
  if (encoding === '' || encoding === 'identity') return raw;
  if (encoding !== 'gzip' && encoding !== 'x-gzip') throw new UnsupportedContentEncodingError(encoding);
  const gunzip = createGunzip();
  // pipe() does not forward failures: without these a client that hangs up
  // mid-body would look like a body that ended early (and git would be fed a
  // truncated pack instead of being killed).
  raw.on('error', (err) => gunzip.destroy(err));
  raw.on('close', () => {
    if (!raw.readableEnded) gunzip.destroy(new Error('request body aborted'));
  });
  // The consumer (serviceRpc) has its own listener; this one only keeps an
  // unconsumed, failed body from being an uncaught 'error' event.
  gunzip.on('error', noop);
  raw.pipe(gunzip);
  return gunzip;
}

interface StreamGitOptions {
  config: string[];
  command: string[];
  env: Record<string, string>;
  input?: Readable;
  /** Written before git's first byte. */
  prefix?: Buffer;
  finishAfterInput?: boolean;
  timeoutMs?: number;
}

// One git child whose stdout becomes `body`, with flow control both ways:
// `input` is piped (so a slow git slows the upload) and git's stdout pauses
// while `body` is full (so a slow client slows git). Memory stays flat
// whatever the pack size.
function streamGit(opts: StreamGitOptions): Omit<GitResponse, 'contentType'> {
  const { command, input } = opts;
  const child = spawn('git', [...opts.config, ...command], {
    env: gitEnvironment(opts.env),
    stdio: [input !== undefined ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    shell: false,
    // Own process group: pack-objects, index-pack and hooks die with git.
    detached: true,
    windowsHide: true,
  });

  const body = new PassThrough();
  const stderr: Buffer[] = [];
  let stderrBytes = 0;
  let hasOutput = false;
  let exited = false;
  let inputEnded = false;
  let killedBy: GitExit['killedBy'] = null;
  let killTimer: NodeJS.Timeout | undefined;
  /** Set when the request body failed (client gone, or not valid gzip). */
  let inputError: Error | undefined;

  let resolveStarted: () => void = noop;
  let rejectStarted: (err: Error) => void = noop;
  const started = new Promise<void>((res, rej) => {
    resolveStarted = res;
    rejectStarted = rej;
  });
  started.catch(noop); // see `updates`
  let resolveDone: (exit: GitExit) => void = noop;
  const done = new Promise<GitExit>((res) => {
    resolveDone = res;
  });

  const timer =
    opts.timeoutMs !== undefined && opts.timeoutMs > 0 ? setTimeout(() => kill('timeout'), opts.timeoutMs) : undefined;

  function signalGroup(signal: NodeJS.Signals): void {
    if (child.pid === undefined) return;
    try {
      process.kill(-child.pid, signal);
    } catch {
      child.kill(signal);
    }
  }

  function kill(reason: 'client' | 'timeout'): void {
    if (exited || killedBy !== null) return;
    killedBy = reason;
    signalGroup('SIGTERM');
    killTimer = setTimeout(() => signalGroup('SIGKILL'), KILL_GRACE_MS);
  }

  function markStarted(): void {
    if (hasOutput) return;
    hasOutput = true;
    if (opts.prefix !== undefined && !body.destroyed) body.write(opts.prefix);
    resolveStarted();
  }

  /** Why git could not read the request, when that is why it failed: its input broke, or it said so. */
  function requestRejection(exitCode: number | null, stderrText: string): GitRequestRejectedError | null {
    if (input === undefined) return null;
    const code = (inputError as { code?: unknown } | undefined)?.code;
    if (typeof code === 'string' && code.startsWith('Z_'))
      return new GitRequestRejectedError(`the body is not valid gzip (${inputError?.message ?? code})`);
    if (exitCode === 128 && REQUEST_REJECTED.test(stderrText))
      return new GitRequestRejectedError(stderrText.split('\n', 1)[0] ?? '');
    return null;
  }

  function finish(exitCode: number | null, signal: NodeJS.Signals | null, spawnError?: Error): void {
    if (exited) return;
    exited = true;
    clearTimeout(timer);
    clearTimeout(killTimer);
    const text = spawnError?.message ?? Buffer.concat(stderr).toString('utf8').trim();
    if (!hasOutput && exitCode === 0) markStarted();
    if (!hasOutput) {
      rejectStarted(
        spawnError ??
          requestRejection(exitCode, text) ??
          new GitCommandError(command, exitCode, text, {
            timedOut: killedBy === 'timeout',
            signal,
            timeoutMs: opts.timeoutMs,
          }),
      );
      // Nobody should be reading; no error, so an unread body cannot crash us.
      body.destroy();
    } else if (exitCode === null) {
      // Killed mid-stream: the output is cut short, so the response must be too.
      body.destroy();
    } else {
      body.end();
    }
    resolveDone({ exitCode, signal, stderr: text, killedBy });
  }

  child.stdout?.on('data', (chunk: Buffer) => {
    if (body.destroyed) return; // client gone: drain and drop
    markStarted();
    if (!body.write(chunk)) {
      child.stdout?.pause();
      body.once('drain', () => child.stdout?.resume());
    }
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    if (stderrBytes >= MAX_STDERR_BYTES) return;
    stderr.push(chunk.subarray(0, MAX_STDERR_BYTES - stderrBytes));
    stderrBytes += chunk.length;
  });
  child.on('error', (err) => finish(null, null, err));
  // 'close', not 'exit': only then has all of stdout (helpers included) arrived.
  child.on('close', (code, signal) => finish(code, signal));

  body.on('close', () => {
    // A paused stdout would block git forever once nobody drains `body`.
    child.stdout?.resume();
    if (opts.finishAfterInput === true && inputEnded) return;
    kill('client');
  });

  if (input !== undefined && child.stdin !== null) {
    // EPIPE when git exits before reading everything; the exit status is what counts.
    child.stdin.on('error', noop);
    input.on('end', () => {
      inputEnded = true;
    });
    input.on('error', (err) => {
      inputError = err;
      kill('client');
    });
    input.on('close', () => {
      if (!input.readableEnded) kill('client');
    });
    input.pipe(child.stdin);
  }

  return { body, started, done };
}
