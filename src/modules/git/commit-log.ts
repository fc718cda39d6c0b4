// The commits a push brought, newest first, for event payloads, with the files
// each one added, removed and modified (against its first parent; a rename is
// a removal and an addition, as Forgejo's payloads show it). Three git
// processes per call, run at once; pushes are far rarer than reads.
import { runGit } from './run-git.ts';

export interface CommitSummary {
  oid: string;
  message: string;
  author: { name: string; email: string; date: string };
  committer: { name: string; email: string; date: string };
  files: { added: string[]; removed: string[]; modified: string[] };
}

/** `git log --name-status -z` output → the changed files of each commit (first parent of merges). */
function parseFileChanges(out: Buffer): Map<string, CommitSummary['files']> {
  const byCommit = new Map<string, CommitSummary['files']>();
  for (const record of out.toString('utf8').split(RECORD_END)) {
    const parts = record.split('\0');
    const oid = parts[0]?.trim() ?? '';
    // `-m` repeats a merge once per parent: the first is against the first parent.
    if (oid === '' || byCommit.has(oid)) continue;
    const files: CommitSummary['files'] = { added: [], removed: [], modified: [] };
    for (let i = 1; i + 1 < parts.length; i += 2) {
      const status = (parts[i] ?? '').trim();
      const file = parts[i + 1] ?? '';
      if (status === 'A') files.added.push(file);
      else if (status === 'D') files.removed.push(file);
      else if (status !== '') files.modified.push(file);
    }
    byCommit.set(oid, files);
  }
  return byCommit;
}

const FIELDS = ['%H', '%an', '%ae', '%aI', '%cn', '%ce', '%cI', '%B'];
const RECORD_END = '\x1e';

/**
 * Commits reachable from `newOid` but not from `oldOid` (all of `newOid`'s
 * history when `oldOid` is null), newest first, at most `max`; and how many
 * there are in all.
 */
export async function commitsBetween(
  gitDir: string,
  oldOid: string | null,
  newOid: string,
  max: number,
): Promise<{ commits: CommitSummary[]; total: number }> {
  const range = oldOid === null ? [newOid] : [newOid, `^${oldOid}`];
  const [countOut, logOut, filesOut] = await Promise.all([
    runGit(['rev-list', '--count', ...range, '--'], { gitDir }),
    runGit(['log', `--max-count=${max}`, `--format=${FIELDS.join('%x00')}${RECORD_END}`, ...range, '--'], { gitDir }),
    runGit(
      [
        'log',
        `--max-count=${max}`,
        `--format=${RECORD_END}%H`,
        '--name-status',
        '-z',
        '--no-renames',
        '-m',
        ...range,
        '--',
      ],
      { gitDir },
    ),
  ]);
  const files = parseFileChanges(filesOut);
  const commits: CommitSummary[] = [];
  for (const record of logOut.toString('utf8').split(RECORD_END)) {
    const fields = record.replace(/^\n/, '').split('\0');
    if (fields.length < FIELDS.length) continue;
    const [oid, an, ae, ad, cn, ce, cd, ...body] = fields;
    commits.push({
      oid: oid ?? '',
      message: body.join('\0'),
      author: { name: an ?? '', email: ae ?? '', date: ad ?? '' },
      committer: { name: cn ?? '', email: ce ?? '', date: cd ?? '' },
      files: files.get(oid ?? '') ?? { added: [], removed: [], modified: [] },
    });
  }
  return { commits, total: Number(countOut.toString('utf8').trim()) || commits.length };
}
