// Commit statuses as the API serves them (Forgejo's routers/api/v1/repo/status.go,
// services/repository/commitstatus/commitstatus.go), and the one way a status
// is written: `writeCommitStatus` appends the row and, in the same
// transaction, a `status` webhook delivery for every active hook of the
// repository and of its owner that subscribes to it (Forgejo's
// services/webhook/notifier.go CreateCommitStatus), so a delivery exists
// exactly when the status does.
//
// Refs in the read routes resolve like Forgejo's ResolveRefOrSha: a branch,
// then a tag, then anything git turns into a commit id; what does not resolve
// is used verbatim as the sha, so an unknown ref lists nothing (200 []).
import { randomUUID } from 'node:crypto';
import { AccessMode } from '../modules/access-mode.ts';
import type { Clock } from '../modules/clock.ts';
import { AppError } from '../modules/errors.ts';
import { commitsBetween } from '../modules/git/commit-log.ts';
import { insertCommitStatus, latestCommitStatuses, listCommitStatuses } from '../models/commit-statuses.ts';
import type { CommitStatus, NewCommitStatus, StatusSort } from '../models/commit-statuses.ts';
import type { Db, Tx } from '../models/database.ts';
import { insertHookTasks } from '../models/hook-tasks.ts';
import type { Repository } from '../models/repos.ts';
import { findPossibleUserById } from '../models/users.ts';
import type { User } from '../models/users.ts';
import { listActiveHooksForRepository } from '../models/webhooks.ts';
import type { GitRepositories } from './git-repositories.ts';
import { apiTime, toApiRepo, toApiUser } from './convert.ts';
import { ANONYMOUS_VIEWER, payloadCommit } from './push-payloads.ts';
import { hookWantsEvent } from './webhooks/hook-events.ts';

/** The states the list's `state` filter knows (Forgejo's CommitStatusState); any other value filters nothing. */
const FILTER_STATES = new Set(['pending', 'success', 'error', 'failure', 'warning']);
const SORTS = new Set<StatusSort>(['oldest', 'recentupdate', 'leastupdate', 'leastindex', 'highestindex']);

/**
 * Worst first (Forgejo's commitStatusPriorities). A state outside the list
 * (F15 stores any string) ranks as `error`. `skipped` (F16, Gitea 1.26) ranks
 * above `success`: skipped jobs never make a commit look worse, and a commit
 * whose statuses are all skipped reads `skipped`.
 */
const PRIORITY: Readonly<Record<string, number>> = {
  error: 0,
  failure: 1,
  warning: 2,
  pending: 3,
  success: 4,
  skipped: 5,
};

/** The combined state of the latest states: the worst, `error` (and any unknown state) reported as `failure`; '' for none. */
export function combinedState(states: readonly string[]): string {
  let worst = '';
  for (const state of states) {
    if (worst === '' || (PRIORITY[state] ?? 0) < (PRIORITY[worst] ?? 0)) worst = state;
  }
  if (worst === 'error' || (worst !== '' && PRIORITY[worst] === undefined)) return 'failure';
  return worst;
}

export interface StatusTarget {
  repo: Repository;
  owner: User;
  creator: User;
  /** Forgejo's PayloadCommit of the sha for the `status` webhook; null when it was not read. */
  commit: unknown;
}

/** The `status` webhook payload (Forgejo's api.CommitStatusPayload). */
function statusPayload(target: StatusTarget, status: CommitStatus, rootUrl: string): Record<string, unknown> {
  return {
    commit: target.commit,
    context: status.context,
    created_at: apiTime(status.created),
    description: status.description,
    // Forgejo sends the row id here, not the per-sha index the API shows.
    id: status.rowId,
    // Forgejo's notifier shows the repository with owner access.
    repository: toApiRepo(target.repo, target.owner, AccessMode.owner, ANONYMOUS_VIEWER, rootUrl),
    sender: toApiUser(target.creator, ANONYMOUS_VIEWER, rootUrl),
    sha: status.sha,
    state: status.state,
    target_url: status.targetUrl,
    updated_at: apiTime(status.updated),
  };
}

/** Appends a status and its `status` deliveries. Call inside the transaction of the change. */
export async function writeCommitStatus(
  tx: Tx,
  clock: Clock,
  rootUrl: string,
  target: StatusTarget,
  status: NewCommitStatus,
): Promise<CommitStatus> {
  const written = await insertCommitStatus(tx, status, clock.nowSec());
  const hooks = (await listActiveHooksForRepository(tx, target.repo.id, target.owner.id)).filter((hook) =>
    hookWantsEvent(hook, 'status'),
  );
  if (hooks.length > 0) {
    // Indented as Forgejo stores payloads.
    const payload = JSON.stringify(statusPayload(target, written, rootUrl), null, 2);
    const nowMs = clock.nowMs();
    await insertHookTasks(
      tx,
      hooks.map((hook) => ({ hookId: hook.id, uuid: randomUUID(), eventType: 'status', payload, nowMs })),
    );
  }
  return written;
}

export interface CreateStatusInput {
  state?: string;
  target_url?: string;
  description?: string;
  context?: string;
}

export interface StatusListQuery {
  state?: string;
  sort?: string;
  offset: number;
  limit: number;
}

export interface StatusWithCreator {
  status: CommitStatus;
  creator: User;
}

export class CommitStatusService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly git: GitRepositories,
    private readonly rootUrl: string,
  ) {}

  /** POST …/statuses/{sha}: a (short) commit id of the repository, else 404; values are trimmed, the state is not checked (as F15). */
  async create(
    repo: Repository,
    owner: User,
    doer: User,
    sha: string,
    input: CreateStatusInput,
  ): Promise<StatusWithCreator> {
    if (sha === '') throw AppError.invalid('sha not given');
    const full = /^[0-9a-f]+$/i.test(sha) ? await this.git.reader(repo).resolveCommit(sha.toLowerCase()) : null;
    if (full === null) throw AppError.notFoundMessage(`object does not exist [id: ${sha}, rel_path: ]`);
    // The commit is read from git before the transaction (inside, SQLite's only
    // connection would wait on git), and only when a hook will be sent it.
    const wanted = (await listActiveHooksForRepository(this.db, repo.id, owner.id)).some((hook) =>
      hookWantsEvent(hook, 'status'),
    );
    let commit: unknown = null;
    if (wanted) {
      const log = await commitsBetween(this.git.gitDir(repo, owner), null, full, 1);
      const first = log.commits[0];
      commit = first ? payloadCommit(`${this.rootUrl}${owner.name}/${repo.name}`, first) : null;
    }
    const status = await this.db.transaction().execute((tx) =>
      writeCommitStatus(
        tx,
        this.clock,
        this.rootUrl,
        { repo, owner, creator: doer, commit },
        {
          repoId: repo.id,
          sha: full,
          state: (input.state ?? '').trim(),
          targetUrl: (input.target_url ?? '').trim(),
          description: (input.description ?? '').trim(),
          context: (input.context ?? '').trim(),
          creatorId: doer.id,
        },
      ),
    );
    return { status, creator: doer };
  }

  /** Forgejo's ResolveRefOrSha: branch, then tag, then a (short) commit id; otherwise the text itself. */
  async resolveRef(repo: Repository, ref: string): Promise<string> {
    const reader = this.git.reader(repo);
    for (const candidate of [`refs/heads/${ref}`, `refs/tags/${ref}`, ref]) {
      const sha = await reader.resolveCommit(candidate);
      if (sha !== null) return sha;
    }
    return ref;
  }

  async list(
    repo: Repository,
    sha: string,
    query: StatusListQuery,
  ): Promise<{ statuses: StatusWithCreator[]; total: number }> {
    const state = query.state !== undefined && FILTER_STATES.has(query.state) ? query.state : undefined;
    const sort = SORTS.has(query.sort as StatusSort) ? (query.sort as StatusSort) : '';
    const { statuses, total } = await listCommitStatuses(this.db, repo.id, sha, {
      ...(state !== undefined ? { state } : {}),
      sort,
      offset: query.offset,
      limit: query.limit,
    });
    return { statuses: await this.withCreators(statuses), total };
  }

  /**
   * The latest status of each context and their combined state: the worst by
   * priority, `error` reported as `failure` (Forgejo's CalcCommitStatus).
   * `state` is '' when the sha has no statuses.
   */
  async combined(
    repo: Repository,
    sha: string,
    page: { offset: number; limit: number },
  ): Promise<{ state: string; statuses: StatusWithCreator[]; total: number }> {
    const { statuses, total } = await latestCommitStatuses(this.db, repo.id, sha, page);
    return {
      state: combinedState(statuses.map((status) => status.state)),
      statuses: await this.withCreators(statuses),
      total,
    };
  }

  private async withCreators(statuses: readonly CommitStatus[]): Promise<StatusWithCreator[]> {
    const users = new Map<number, User>();
    const out: StatusWithCreator[] = [];
    for (const status of statuses) {
      let creator = users.get(status.creatorId);
      if (creator === undefined) {
        creator = await findPossibleUserById(this.db, status.creatorId);
        users.set(status.creatorId, creator);
      }
      out.push({ status, creator });
    }
    return out;
  }
}
