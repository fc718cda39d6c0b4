// The payloads of a git push, shared by workflow runs (the runner's
// github.event) and webhooks: Forgejo's PushPayload, CreatePayload and
// DeletePayload (modules/structs/hook.go).
import { AccessMode } from '../modules/access-mode.ts';
import { commitsBetween } from '../modules/git/commit-log.ts';
import type { CommitSummary } from '../modules/git/commit-log.ts';
import type { Repository } from '../models/repos.ts';
import type { User } from '../models/users.ts';
import { toApiRepo, toApiUser } from './convert.ts';

export const MAX_PAYLOAD_COMMITS = 20;

/** Payloads show repositories and users as an anonymous caller would see them. */
export const ANONYMOUS_VIEWER = { doer: null, isSiteAdmin: false };

export function isZeroOid(oid: string): boolean {
  return /^0+$/.test(oid);
}

export function shortRef(ref: string): string {
  for (const prefix of ['refs/heads/', 'refs/tags/']) if (ref.startsWith(prefix)) return ref.slice(prefix.length);
  return ref;
}

/** One ref a `git push` changed; an all-zero oid on one side means created or deleted. */
export interface PushedRef {
  ref: string;
  oldOid: string;
  newOid: string;
}

/** The commits of one ref update: at most MAX_PAYLOAD_COMMITS, newest first, and how many there are in all. */
export interface PushCommitLog {
  commits: CommitSummary[];
  total: number;
}

export type PushCommitLogReader = (update: PushedRef) => Promise<PushCommitLog>;

/**
 * The commits of each ref update of one push, read from git at most once per
 * update, for webhooks and workflow runs alike (a deleted ref has none).
 */
export function pushCommitLogReader(gitDir: string): PushCommitLogReader {
  const reads = new Map<string, Promise<PushCommitLog>>();
  return (update) => {
    if (isZeroOid(update.newOid)) return Promise.resolve({ commits: [], total: 0 });
    const key = `${update.oldOid}..${update.newOid}`;
    let read = reads.get(key);
    if (!read) {
      read = commitsBetween(
        gitDir,
        isZeroOid(update.oldOid) ? null : update.oldOid,
        update.newOid,
        MAX_PAYLOAD_COMMITS,
      );
      reads.set(key, read);
    }
    return read;
  };
}

/** One commit as payloads list it (Forgejo's api.PayloadCommit); `htmlUrl` is the repository's page. */
export function payloadCommit(htmlUrl: string, commit: CommitSummary): Record<string, unknown> {
  return {
    id: commit.oid,
    message: commit.message,
    url: `${htmlUrl}/commit/${commit.oid}`,
    author: { name: commit.author.name, email: commit.author.email, username: '' },
    committer: { name: commit.committer.name, email: commit.committer.email, username: '' },
    verification: null,
    timestamp: commit.author.date,
    added: commit.files.added,
    removed: commit.files.removed,
    modified: commit.files.modified,
  };
}

/** Forgejo's api.PushPayload (and create/delete payloads) for one ref update. */
export function pushEventPayload(
  event: 'push' | 'create' | 'delete',
  input: {
    repo: Repository;
    owner: User;
    pusher: User;
    update: PushedRef;
    commits: CommitSummary[];
    total: number;
    rootUrl: string;
  },
): Record<string, unknown> {
  const { repo, owner, pusher, update, rootUrl } = input;
  const repository = toApiRepo(repo, owner, AccessMode.none, ANONYMOUS_VIEWER, rootUrl);
  const sender = toApiUser(pusher, ANONYMOUS_VIEWER, rootUrl);
  const refType = update.ref.startsWith('refs/tags/') ? 'tag' : 'branch';
  if (event === 'create')
    return { ref: shortRef(update.ref), ref_type: refType, sha: update.newOid, repository, sender };
  if (event === 'delete')
    return { ref: shortRef(update.ref), ref_type: refType, pusher_type: 'user', repository, sender };
  const htmlUrl = repository.html_url;
  const commits = input.commits.map((commit) => payloadCommit(htmlUrl, commit));
  return {
    ref: update.ref,
    before: update.oldOid,
    after: update.newOid,
    compare_url: isZeroOid(update.oldOid) ? '' : `${htmlUrl}/compare/${update.oldOid}...${update.newOid}`,
    commits,
    total_commits: input.total,
    head_commit: commits[0] ?? null,
    repository,
    pusher: sender,
    sender,
  };
}
