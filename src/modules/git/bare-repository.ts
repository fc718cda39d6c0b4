// Lifecycle of the bare repositories Gantry serves: create, seed, inspect,
// move, delete. Everything here works on bare repos only, through plumbing, so
// no work tree or index is ever involved.
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { PRIVATE_DIR_MODE } from '../private-files.ts';
import { isValidBranchName } from './ref-name.ts';
import { GitCommandError, runGit } from './run-git.ts';

export type ObjectFormat = 'sha1' | 'sha256';

export interface InitBareRepositoryOptions {
  defaultBranch: string;
  objectFormat?: ObjectFormat;
}

export interface CommitInitialFileOptions {
  branch: string;
  fileName: string;
  content: string;
  author: { name: string; email: string };
  message: string;
  /** Author and committer time, seconds since the epoch (UTC). Defaults to now. */
  timestampSec?: number;
}

/** Throws unless `branch` is safe to put in `refs/heads/<branch>` on a git command line. */
function assertBranch(branch: string): void {
  if (!isValidBranchName(branch)) {
    throw new TypeError(`invalid branch name: ${JSON.stringify(branch)}`);
  }
}

// Absolute paths cannot start with `-`, so a repository path can never be
// taken for an option, and relative paths cannot depend on the cwd we pick.
function repoPath(path: string): string {
  return resolve(path);
}

async function pathExists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

async function emptyDir(path: string): Promise<void> {
  for (const entry of await readdir(path)) {
    await rm(join(path, entry), { recursive: true, force: true });
  }
}

async function isMissingOrEmptyDir(path: string): Promise<boolean> {
  try {
    const st = await stat(path);
    if (!st.isDirectory()) return false;
    return (await readdir(path)).length === 0;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return true;
    throw err;
  }
}

/**
 * Create an empty bare repository whose HEAD names `defaultBranch`.
 *
 * No config is set beyond what `git init --bare` writes, on purpose:
 * - core.logAllRefUpdates already defaults to false in bare repos, so no reflogs pile up;
 * - automatic gc (gc.auto) stays on: until Gantry runs its own housekeeping,
 *   git's built-in heuristic is what keeps pushed loose objects in check;
 * - receive.* defaults (force pushes allowed) are policy, enforced by the
 *   server's own branch protection rather than baked into each repository.
 */
export async function initBareRepository(path: string, opts: InitBareRepositoryOptions): Promise<void> {
  assertBranch(opts.defaultBranch);
  const objectFormat = opts.objectFormat ?? 'sha1';
  if (objectFormat !== 'sha1' && objectFormat !== 'sha256') {
    throw new TypeError(`invalid object format: ${JSON.stringify(objectFormat)}`);
  }
  const dir = repoPath(path);
  // `git init` on an existing repository "reinitializes" it and on a non-empty
  // directory mixes files; both would hide a naming collision, so refuse.
  const existed = await pathExists(dir);
  if (existed && !(await isMissingOrEmptyDir(dir))) {
    throw new Error(`cannot create repository: ${dir} already exists and is not an empty directory`);
  }
  await mkdir(dirname(dir), { recursive: true, mode: PRIVATE_DIR_MODE });

  const args = ['init', '--bare', '--quiet'];
  // Only pass the flag when needed: sha1 is git's default and the flag is
  // still marked experimental in older gits.
  if (objectFormat === 'sha256') args.push('--object-format=sha256');
  args.push('--', dir);
  try {
    await runGit(args, { cwd: dirname(dir) });
    await setHeadBranch(dir, opts.defaultBranch);
  } catch (err) {
    // Do not leave a half-made repository behind for a retry to trip over.
    // An empty directory handed to us (a mount point, say) is kept, emptied.
    await (existed ? emptyDir(dir) : rm(dir, { recursive: true, force: true })).catch(() => {});
    throw err;
  }
}

/**
 * Create `branch` with a single commit holding one file, using plumbing only
 * (no work tree). Fails if the branch already exists. Returns the commit id.
 */
export async function commitInitialFile(path: string, opts: CommitInitialFileOptions): Promise<string> {
  assertBranch(opts.branch);
  assertTreeEntryName(opts.fileName);
  assertIdentPart('author name', opts.author.name);
  assertIdentPart('author email', opts.author.email);
  const gitDir = repoPath(path);
  const timestampSec = opts.timestampSec ?? Math.floor(Date.now() / 1000);
  if (!Number.isSafeInteger(timestampSec) || timestampSec < 0) {
    throw new TypeError(`invalid timestamp: ${String(timestampSec)}`);
  }

  // --no-filters: store the content byte for byte, whatever attributes the repo has.
  const blob = await gitLine(
    ['hash-object', '-w', '--no-filters', '--stdin'],
    gitDir,
    Buffer.from(opts.content, 'utf8'),
  );

  // -z: NUL-terminated input, so a name with a leading `"` is not unquoted as
  // a C string and no other byte in it needs escaping.
  const tree = await gitLine(['mktree', '-z'], gitDir, `100644 blob ${blob}\t${opts.fileName}\0`);

  // Message via stdin (-F -) rather than -m: no argv size limits, and `-m`
  // would complete the last line the same way we do here.
  const message = opts.message.endsWith('\n') ? opts.message : `${opts.message}\n`;
  const date = `@${timestampSec} +0000`;
  const commit = await gitLine(['commit-tree', tree, '-F', '-'], gitDir, message, {
    GIT_AUTHOR_NAME: opts.author.name,
    GIT_AUTHOR_EMAIL: opts.author.email,
    GIT_AUTHOR_DATE: date,
    GIT_COMMITTER_NAME: opts.author.name,
    GIT_COMMITTER_EMAIL: opts.author.email,
    GIT_COMMITTER_DATE: date,
  });

  // The all-zero old value makes update-ref create-only: if the branch was
  // created meanwhile it fails instead of overwriting it. Its length follows
  // the object format (40 for sha1, 64 for sha256), i.e. the length of any id.
  const zeroOid = '0'.repeat(commit.length);
  await runGit(['update-ref', '--', `refs/heads/${opts.branch}`, commit, zeroOid], { gitDir });
  return commit;
}

export async function branchExists(path: string, branch: string): Promise<boolean> {
  assertBranch(branch);
  try {
    await runGit(['show-ref', '--verify', '--quiet', '--', `refs/heads/${branch}`], { gitDir: repoPath(path) });
    return true;
  } catch (err) {
    // Exit 1 is show-ref's "no such ref"; anything else (128: not a repo…) is a real failure.
    if (err instanceof GitCommandError && err.exitCode === 1) return false;
    throw err;
  }
}

/** Point HEAD (the default branch) at `branch`, which need not exist yet. */
export async function setHeadBranch(path: string, branch: string): Promise<void> {
  assertBranch(branch);
  await runGit(['symbolic-ref', '--', 'HEAD', `refs/heads/${branch}`], { gitDir: repoPath(path) });
}

/** True when the repository has no refs at all (HEAD may still name an unborn branch). */
export async function isEmptyRepository(path: string): Promise<boolean> {
  const out = await runGit(['for-each-ref', '--count=1', '--format=%(refname)'], { gitDir: repoPath(path) });
  return out.length === 0;
}

/** Delete a repository directory; a missing one is not an error. */
export async function removeRepository(path: string): Promise<void> {
  await rm(repoPath(path), { recursive: true, force: true });
}

/**
 * Move a repository (rename/transfer). Refuses an existing destination:
 * rename(2) would silently replace an empty directory there.
 */
export async function moveRepository(from: string, to: string): Promise<void> {
  const src = repoPath(from);
  const dest = repoPath(to);
  if (await pathExists(dest)) {
    throw new Error(`cannot move repository: ${dest} already exists`);
  }
  await mkdir(dirname(dest), { recursive: true, mode: PRIVATE_DIR_MODE });
  await rename(src, dest);
}

async function gitLine(
  args: string[],
  gitDir: string,
  input: Buffer | string,
  env?: Record<string, string>,
): Promise<string> {
  const out = await runGit(args, { gitDir, input, ...(env !== undefined ? { env } : {}) });
  return out.toString('utf8').trim();
}

// A single tree entry at the root: no path separators, nothing git refuses
// to check out (`.`, `..`, `.git` in any case), no NUL (our -z terminator).
function assertTreeEntryName(name: string): void {
  if (
    name.length === 0 ||
    name.includes('/') ||
    name.includes('\0') ||
    name === '.' ||
    name === '..' ||
    name.toLowerCase() === '.git'
  ) {
    throw new TypeError(`invalid file name: ${JSON.stringify(name)}`);
  }
}

// git writes `Name <email>` into the commit header; these characters would
// corrupt it (git strips some of them silently, which would hide the problem).
function assertIdentPart(what: string, value: string): void {
  if (/[<>\n\0]/.test(value)) {
    throw new TypeError(`invalid ${what}: ${JSON.stringify(value)}`);
  }
}
