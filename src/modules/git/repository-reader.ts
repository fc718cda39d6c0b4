// Read access to one repository through the shared cat-file pool: resolve a
// revision to a commit, read commits, trees, blobs and paths. Cheap to
// create (one per request is fine): all state lives in the pool.
//
// cat-file resolves names with git's full revision syntax, which is too
// much for names that come from users or pushes. Only three forms are
// accepted, and each is sent in a form that cannot be misread:
// - full object ids, checked against the repository's id length, so they are
//   never taken for an abbreviation or a ref name;
// - `HEAD` and full ref names (`refs/...`), guarded against git's ref DWIM
//   (see resolveName);
// - abbreviated ids (4 hex digits or more), guarded the same way.
// `:/regex`, `@{...}`, `./path` and friends are refused: they are slow,
// read reflogs, or make cat-file exit.
import type { ObjectFormat } from './bare-repository.ts';
import type { CatFilePool, GitObject, GitObjectInfo, ReadObjectOptions } from './cat-file.ts';
import { parseCommit, parseTree } from './objects.ts';
import type { Commit, TreeEntry } from './objects.ts';
import { GitCommandError, runGit } from './run-git.ts';

export interface CommitWithId extends Commit {
  oid: string;
}

const HEX_LENGTH: Readonly<Record<ObjectFormat, number>> = { sha1: 40, sha256: 64 };
// git's MINIMUM_ABBREV: shorter hex is never read as an object id.
const MIN_ABBREV = 4;
// check_refname_format: control characters, space and the characters of
// revision syntax, refspecs and globs.
// eslint-disable-next-line no-control-regex
const REF_FORBIDDEN = /[\x00-\x20\x7f~^:?*[\\]/;
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/** A full ref name git would accept (check_refname_format), under `refs/`. */
function isFullRefName(name: string): boolean {
  if (!name.startsWith('refs/') || name.endsWith('.') || LONE_SURROGATE.test(name)) return false;
  if (REF_FORBIDDEN.test(name) || name.includes('..') || name.includes('@{')) return false;
  return name.split('/').every((part) => part.length > 0 && !part.startsWith('.') && !part.endsWith('.lock'));
}

/**
 * A path inside a tree. `.`/`..` components would make git read the name as
 * relative to a work tree, and in a bare repository cat-file exits on them.
 */
function assertTreePath(path: string): void {
  const bad =
    /[\n\r\0]/.test(path) ||
    LONE_SURROGATE.test(path) ||
    path.split('/').some((part) => part === '' || part === '.' || part === '..');
  if (bad) throw new TypeError(`invalid path: ${JSON.stringify(path)}`);
}

/**
 * The refs git tries after `name` itself when `name` does not exist
 * (refs.c ref_rev_parse_rules). `refs/tags/v1` must not quietly become a
 * branch someone pushed as `refs/tags/v1`, i.e. refs/heads/refs/tags/v1.
 */
function dwimFallbacks(name: string): string[] {
  return [
    `refs/${name}`,
    `refs/tags/${name}`,
    `refs/heads/${name}`,
    `refs/remotes/${name}`,
    `refs/remotes/${name}/HEAD`,
  ];
}

export class RepositoryReader {
  readonly gitDir: string;

  constructor(
    private readonly pool: CatFilePool,
    gitDir: string,
  ) {
    this.gitDir = gitDir;
  }

  /**
   * The commit `rev` names, peeling annotated tags; null when there is none
   * or `rev` is not one of the accepted forms (full or abbreviated id,
   * `HEAD`, `refs/...`). Short names such as `main` are not expanded: the
   * caller decides between refs/heads/ and refs/tags/.
   */
  async resolveCommit(rev: string): Promise<string | null> {
    const hexLength = await this.hexLength();
    if (/^[0-9a-f]+$/.test(rev)) {
      if (rev.length === hexLength)
        return (await this.pool.readObjectInfo(this.gitDir, `${rev}^{commit}`))?.oid ?? null;
      if (rev.length < MIN_ABBREV || rev.length > hexLength) return null;
      // git looks for refs before abbreviated ids; a ref named like the
      // abbreviation makes the name ambiguous, and we do not guess.
      const found = await this.resolveName(rev, `${rev}^{commit}`);
      return found === 'ambiguous' ? null : (found?.oid ?? null);
    }
    if (rev !== 'HEAD' && !isFullRefName(rev)) return null;
    const found = await this.resolveName(rev, `${rev}^{commit}`);
    if (found !== 'ambiguous') return found?.oid ?? null;
    const target = await this.exactRef(rev);
    return target === null ? null : ((await this.pool.readObjectInfo(this.gitDir, `${target}^{commit}`))?.oid ?? null);
  }

  /** True when exactly this ref exists and points at an object the repository has. */
  async refExists(fullRef: string): Promise<boolean> {
    if (!isFullRefName(fullRef)) throw new TypeError(`invalid ref name: ${JSON.stringify(fullRef)}`);
    const found = await this.resolveName(fullRef, fullRef);
    if (found !== 'ambiguous') return found !== null;
    const target = await this.exactRef(fullRef);
    return target !== null && (await this.pool.readObjectInfo(this.gitDir, target)) !== null;
  }

  async readBlob(oid: string, opts?: ReadObjectOptions): Promise<Buffer | null> {
    const object = await this.readExact(oid, opts);
    return object?.type === 'blob' ? object.content : null;
  }

  async readCommit(oid: string): Promise<CommitWithId | null> {
    const object = await this.readExact(oid);
    return object?.type === 'commit' ? { oid: object.oid, ...parseCommit(object.content) } : null;
  }

  async listTree(treeOid: string): Promise<TreeEntry[] | null> {
    const object = await this.readExact(treeOid);
    return object?.type === 'tree' ? parseTree(object.content, oidBytesOf(object)) : null;
  }

  /**
   * The object at `path` (slash-separated, no leading slash; '' is the root
   * tree) in a commit, or null. git walks the trees inside cat-file
   * (`<commit>:<path>`), so this is one round trip whatever the depth. A
   * symlink reads as its target text, a submodule as missing, as in `git show`.
   */
  async readPath(commitOid: string, path: string, opts?: ReadObjectOptions): Promise<GitObject | null> {
    await this.assertFullOid(commitOid);
    if (path === '') return this.pool.readObject(this.gitDir, `${commitOid}^{tree}`, opts);
    assertTreePath(path);
    return this.pool.readObject(this.gitDir, `${commitOid}:${path}`, opts);
  }

  private async readExact(oid: string, opts?: ReadObjectOptions): Promise<GitObject | null> {
    await this.assertFullOid(oid);
    return this.pool.readObject(this.gitDir, oid, opts);
  }

  private async hexLength(): Promise<number> {
    return HEX_LENGTH[await this.pool.objectFormat(this.gitDir)];
  }

  private async assertFullOid(oid: string): Promise<void> {
    const hexLength = await this.hexLength();
    if (oid.length !== hexLength || !/^[0-9a-f]+$/.test(oid)) {
      throw new TypeError(`not a full object id for this repository: ${JSON.stringify(oid)}`);
    }
  }

  /**
   * Look `query` up together with every ref git's DWIM would fall back to
   * for `name`, all in one pipelined round trip. When none of those exists,
   * cat-file's answer can only have come from `name` itself; otherwise the
   * answer is 'ambiguous' and the caller resolves exactly (or gives up).
   */
  private async resolveName(name: string, query: string): Promise<GitObjectInfo | null | 'ambiguous'> {
    const [found, ...fallbacks] = await Promise.all(
      [query, ...dwimFallbacks(name)].map((n) => this.pool.readObjectInfo(this.gitDir, n)),
    );
    if (found === null || found === undefined) return null;
    return fallbacks.every((f) => f === null) ? found : 'ambiguous';
  }

  /** The id `ref` (HEAD or refs/...) points at, by its exact name: the slow path, a spawn. */
  private async exactRef(ref: string): Promise<string | null> {
    try {
      const out = (await runGit(['show-ref', '--verify', '--', ref], { gitDir: this.gitDir })).toString('utf8');
      return out.split(' ', 1)[0] ?? null;
    } catch (err) {
      if (err instanceof GitCommandError && err.exitCode === 128 && err.stderr.includes('not a valid ref')) return null;
      throw err;
    }
  }
}

function oidBytesOf(object: GitObjectInfo): 20 | 32 {
  return object.oid.length === 64 ? 32 : 20;
}
