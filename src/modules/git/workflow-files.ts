// What a push or dispatch needs from git: which workflow files a commit has,
// and which paths a push changed (for `on.push.paths` filters).
import { parseTree } from './objects.ts';
import type { TreeEntry } from './objects.ts';
import type { RepositoryReader } from './repository-reader.ts';
import { runGit } from './run-git.ts';

/** In order of precedence; matches Forgejo's modules/actions/workflows.go (ListWorkflows). */
export const WORKFLOW_DIRS = ['.forgejo/workflows', '.gitea/workflows', '.github/workflows'] as const;

export interface WorkflowFile {
  /** Relative to the directory, e.g. `ci.yml` or `sub/x.yml`. */
  name: string;
  /** From the repository root, e.g. `.forgejo/workflows/ci.yml`. */
  path: string;
  blobOid: string;
}

export interface WorkflowFiles {
  dir: (typeof WORKFLOW_DIRS)[number];
  files: WorkflowFile[];
}

export interface ChangedPathsOptions {
  /** Above this many paths the answer is null ("unknown"). */
  maxPaths?: number;
}

const WORKFLOW_FILE = /\.ya?ml$/;
const DEFAULT_MAX_PATHS = 10_000;
const OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
// git knows the empty tree without it being stored, in both object formats.
const EMPTY_TREE: Readonly<Record<number, string>> = {
  40: '4b825dc642cb6eb9a060e54bf8d69288fbee4904',
  64: '6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321',
};

/**
 * The workflow files of a commit. As in Forgejo, the first of WORKFLOW_DIRS
 * that exists as a directory is used alone: an empty .forgejo/workflows hides
 * .github/workflows. Files end in .yml or .yaml and are listed recursively,
 * sorted by name. Null when none of the directories exists.
 *
 * Departure from Forgejo: symlinks and submodules named *.yml are left out.
 * Forgejo lists them and then fails to read them as workflows.
 */
export async function listWorkflowFiles(
  reader: Pick<RepositoryReader, 'readPath' | 'listTree'>,
  commitOid: string,
): Promise<WorkflowFiles | null> {
  // All three in one pipelined round trip: usually the cheapest way to learn which one wins.
  const candidates = await Promise.all(WORKFLOW_DIRS.map((dir) => reader.readPath(commitOid, dir)));
  const index = candidates.findIndex((object) => object?.type === 'tree');
  const root = candidates[index];
  const dir = WORKFLOW_DIRS[index];
  if (root === undefined || root === null || dir === undefined) return null;

  const files: WorkflowFile[] = [];
  // Breadth first, each level's subdirectories read in one pipelined round trip.
  let level: Array<{ prefix: string; entries: TreeEntry[] }> = [
    { prefix: '', entries: parseTree(root.content, root.oid.length === 64 ? 32 : 20) },
  ];
  while (level.length > 0) {
    const subtrees: Array<{ prefix: string; oid: string }> = [];
    for (const { prefix, entries } of level) {
      for (const entry of entries) {
        const name = prefix + entry.name;
        if (entry.kind === 'tree') subtrees.push({ prefix: `${name}/`, oid: entry.oid });
        else if (entry.kind === 'blob' && WORKFLOW_FILE.test(entry.name))
          files.push({ name, path: `${dir}/${name}`, blobOid: entry.oid });
      }
    }
    const listed = await Promise.all(subtrees.map((tree) => reader.listTree(tree.oid)));
    level = subtrees.map((tree, i) => {
      const entries = listed[i];
      if (entries === null || entries === undefined)
        throw new Error(`tree ${tree.oid} (${dir}/${tree.prefix}) is missing from the repository`);
      return { prefix: tree.prefix, entries };
    });
  }
  // Byte order of the UTF-8 names: stable whatever the locale, and git's own order for paths.
  files.sort((a, b) => Buffer.compare(Buffer.from(a.name, 'utf8'), Buffer.from(b.name, 'utf8')));
  return { dir, files };
}

/**
 * Paths that differ between two commits, or null when there are more than
 * `maxPaths` (the caller treats the change set as unknown).
 *
 * A null or all-zero `beforeOid` (a new branch or tag) is diffed against the
 * empty tree, so every file of `afterOid` counts as changed. The zero id and
 * the empty tree come in the length of `afterOid`, sha1 or sha256.
 */
export async function changedPaths(
  gitDir: string,
  beforeOid: string | null,
  afterOid: string,
  opts: ChangedPathsOptions = {},
): Promise<string[] | null> {
  if (!OID.test(afterOid) || /^0+$/.test(afterOid))
    throw new TypeError(`invalid commit id: ${JSON.stringify(afterOid)}`);
  if (beforeOid !== null && (!OID.test(beforeOid) || beforeOid.length !== afterOid.length)) {
    throw new TypeError(`invalid commit id: ${JSON.stringify(beforeOid)}`);
  }
  const before = beforeOid === null || /^0+$/.test(beforeOid) ? (EMPTY_TREE[afterOid.length] as string) : beforeOid;
  const maxPaths = opts.maxPaths ?? DEFAULT_MAX_PATHS;
  // -z: names verbatim, never C-quoted. --no-renames: a rename is both of its
  // paths, whatever diff.renames says. Replace refs off, as in cat-file.ts.
  const out = await runGit(['diff-tree', '-r', '--name-only', '-z', '--no-renames', before, afterOid], {
    gitDir,
    env: { GIT_NO_REPLACE_OBJECTS: '1' },
  });
  const paths: string[] = [];
  let pos = 0;
  while (pos < out.length) {
    let end = out.indexOf(0, pos);
    if (end === -1) end = out.length;
    if (paths.length === maxPaths) return null;
    paths.push(out.toString('utf8', pos, end));
    pos = end + 1;
  }
  return paths;
}
