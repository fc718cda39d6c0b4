// The commits a push brought, newest first, for event payloads. One git
// process per call; pushes are far rarer than reads.
import { runGit } from './run-git.ts';

export interface CommitSummary {
  oid: string;
  message: string;
  author: { name: string; email: string; date: string };
  committer: { name: string; email: string; date: string };
}

const FIELDS = ['%H', '%an', '%ae', '%aI', '%cn', '%ce', '%cI', '%B'];
const RECORD_END = '\x1e';

/**
 * Commits reachable from `newOid` but not from `oldOid` (all of `newOid`'s
 * history when `oldOid` is null), newest first, at most `max`; and how many
 * there are in all.
 */
export async function commitsBetween(gitDir: string, oldOid: string | null, newOid: string, max: number): Promise<{ commits: CommitSummary[]; total: number }> {
  const range = oldOid === null ? [newOid] : [newOid, `^${oldOid}`];
  const [countOut, logOut] = await Promise.all([
    runGit(['rev-list', '--count', ...range, '--'], { gitDir }),
    runGit(['log', `--max-count=${max}`, `--format=${FIELDS.join('%x00')}${RECORD_END}`, ...range, '--'], { gitDir }),
  ]);
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
    });
  }
  return { commits, total: Number(countOut.toString('utf8').trim()) || commits.length };
}
