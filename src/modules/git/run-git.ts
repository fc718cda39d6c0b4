// The single place in Gantry that spawns `git`. Everything else goes through
// runGit so the hardening below cannot be forgotten at a call site.
import { spawn } from 'node:child_process';

export interface RunGitOptions {
  cwd?: string;
  /**
   * Passed as `--git-dir=<path>`, which also stops git from searching for a
   * repository. Deliberately not used as the default cwd: a missing repository
   * would then fail as `spawn git ENOENT` instead of git's own exit 128.
   */
  gitDir?: string;
  /** Written to git's stdin; when absent stdin is closed so git can never block on it. */
  input?: Buffer | string;
  /** Extra variables (GIT_AUTHOR_* etc.). Cannot override the hardening variables. */
  env?: Record<string, string>;
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 60_000;
// stderr is only used for error messages; cap it so a chatty or broken git
// cannot make us buffer without limit.
const MAX_STDERR_BYTES = 64 * 1024;

// Applied last so neither the caller nor the inherited environment can undo them.
const HARDENED_ENV: Readonly<Record<string, string>> = {
  // Only the repository's own config counts: an admin's /etc/gitconfig or the
  // service user's ~/.gitconfig (hooks path, url rewrites, fsmonitor…) must not
  // change what the server does.
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_ATTR_NOSYSTEM: '1',
  // A server has no terminal; never wait for a password prompt.
  GIT_TERMINAL_PROMPT: '0',
  // Nothing git might read from $HOME (XDG config, credentials, ~ expansion)
  // should exist; a path that does not exist is the most harmless choice.
  HOME: '/nonexistent',
  XDG_CONFIG_HOME: '/nonexistent',
  // A pushed refs/replace/<oid> must never change what an object id reads as.
  GIT_NO_REPLACE_OBJECTS: '1',
  // Stable, untranslated output and messages that we parse or show.
  LC_ALL: 'C',
  LANG: 'C',
};

export class GitCommandError extends Error {
  readonly args: readonly string[];
  /** null when git was killed (timeout or signal) rather than exiting. */
  readonly exitCode: number | null;
  readonly stderr: string;
  readonly timedOut: boolean;

  constructor(
    args: readonly string[],
    exitCode: number | null,
    stderr: string,
    detail?: { timedOut?: boolean; signal?: string | null; timeoutMs?: number },
  ) {
    const sub = args[0] ?? '';
    const trimmed = stderr.trim();
    const firstLine = trimmed.split('\n', 1)[0] ?? '';
    let message: string;
    if (detail?.timedOut === true) {
      message = `git ${sub} timed out after ${detail.timeoutMs ?? 0} ms`;
    } else if (exitCode === null) {
      message = `git ${sub} killed by signal ${detail?.signal ?? 'unknown'}: ${firstLine}`;
    } else {
      message = `git ${sub} failed (exit ${exitCode}): ${firstLine}`;
    }
    super(message);
    this.name = 'GitCommandError';
    this.args = [...args];
    this.exitCode = exitCode;
    this.stderr = trimmed;
    this.timedOut = detail?.timedOut === true;
  }
}

/**
 * The environment every git child gets: the caller's extras, then the hardening
 * on top. Exported for the modules that must spawn long-lived or streaming git
 * processes themselves (cat-file pool, smart HTTP) instead of runGit.
 */
export function gitEnvironment(extra?: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    // Inherited GIT_* variables (GIT_DIR, GIT_INDEX_FILE, GIT_CONFIG_PARAMETERS,
    // GIT_EXEC_PATH… e.g. when Gantry itself runs from a git hook) would
    // silently redirect or reconfigure our commands.
    if (key.startsWith('GIT_')) continue;
    env[key] = value;
  }
  return { ...env, ...extra, ...HARDENED_ENV };
}

/**
 * Run `git <args>` without a shell and resolve with its stdout. Rejects with
 * GitCommandError on a non-zero exit or timeout, and with the spawn error if
 * git cannot be started at all.
 */
export async function runGit(args: string[], opts: RunGitOptions = {}): Promise<Buffer> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  // `--git-dir=<path>` as one argument: a path beginning with `-` can then
  // never be read as an option.
  const fullArgs = opts.gitDir !== undefined ? [`--git-dir=${opts.gitDir}`, ...args] : [...args];
  const hasInput = opts.input !== undefined;

  return new Promise<Buffer>((resolve, reject) => {
    const child = spawn('git', fullArgs, {
      cwd: opts.cwd,
      env: gitEnvironment(opts.env),
      stdio: [hasInput ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      shell: false,
      // Own process group, so a timeout can kill git's helpers too
      // (pack-objects, index-pack, remote helpers). They inherit our stdout
      // pipe; killing only git would leave 'close' waiting on them.
      detached: true,
      windowsHide: true,
    });

    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    let stderrBytes = 0;
    let timedOut = false;
    let settled = false;

    const timer = setTimeout(() => {
      timedOut = true;
      killTree();
    }, timeoutMs);

    function killTree(): void {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Group already gone, or no group: fall back to the direct child.
        child.kill('SIGKILL');
      }
    }

    function finish(err: Error | null, out?: Buffer): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err !== null) reject(err);
      else resolve(out ?? Buffer.alloc(0));
    }

    child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => {
      if (stderrBytes >= MAX_STDERR_BYTES) return;
      stderr.push(chunk);
      stderrBytes += chunk.length;
    });

    child.on('error', (err) => finish(err));

    child.on('close', (code, signal) => {
      const errText = Buffer.concat(stderr).toString('utf8');
      if (timedOut) {
        finish(new GitCommandError(args, null, errText, { timedOut: true, timeoutMs }));
      } else if (code === 0) {
        finish(null, Buffer.concat(stdout));
      } else {
        finish(new GitCommandError(args, code, errText, { signal }));
      }
    });

    if (hasInput && child.stdin !== null) {
      // git may exit before reading all of its input (e.g. on a usage error);
      // the resulting EPIPE is not the interesting failure, the exit code is.
      child.stdin.on('error', () => {});
      child.stdin.end(opts.input);
    }
  });
}
