// The test delivery of a repository hook (Forgejo's POST
// /repos/{o}/{r}/hooks/{id}/tests; services/webhook/webhook.go
// PrepareTestWebhook, routers/api/v1/repo/hook.go TestHook): a `push` payload
// of one commit — the `ref` query's, else the default branch head — with
// before = after = that commit, total_commits 1, the caller as pusher and
// sender. It is queued as an ordinary delivery whether or not the hook is
// active or subscribes to push, and the answer does not wait for it.
import { randomUUID } from 'node:crypto';
import type { Clock } from '../../modules/clock.ts';
import { AppError } from '../../modules/errors.ts';
import { commitsBetween } from '../../modules/git/commit-log.ts';
import type { Db } from '../../models/database.ts';
import { insertHookTask } from '../../models/hook-tasks.ts';
import type { Repository } from '../../models/repos.ts';
import type { User } from '../../models/users.ts';
import { findWebhookOfScope } from '../../models/webhooks.ts';
import type { GitRepositories } from '../git-repositories.ts';
import { pushEventPayload } from '../push-payloads.ts';

const FULL_OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

export class HookTestDelivery {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly rootUrl: string,
    private readonly git: GitRepositories,
  ) {}

  /**
   * `ref`: a branch or tag name, a full ref or a full commit id; '' for the
   * default branch. 404 for an unknown hook, an empty repository or an
   * unknown ref.
   */
  async send(repo: Repository, owner: User, hookId: number, doer: User, ref: string): Promise<void> {
    const hook = hookId > 0 ? await findWebhookOfScope(this.db, { ownerId: 0, repoId: repo.id }, hookId) : null;
    if (hook === null) throw AppError.notFound();
    const sha = await this.resolve(repo, ref);
    if (sha === null) throw AppError.notFound();
    // One commit, with the files it changed (Forgejo's test payload lists none; more is harmless).
    const log = await commitsBetween(this.git.gitDir(repo, owner), null, sha, 1);
    const payload = pushEventPayload('push', {
      repo,
      owner,
      pusher: doer,
      update: { ref: ref === '' ? `refs/heads/${repo.defaultBranch}` : ref, oldOid: sha, newOid: sha },
      commits: log.commits.slice(0, 1),
      total: 1,
      rootUrl: this.rootUrl,
    });
    // Indented as Forgejo stores payloads (services/webhooks/outbox.ts).
    await insertHookTask(this.db, {
      hookId: hook.id,
      uuid: randomUUID(),
      eventType: 'push',
      payload: JSON.stringify(payload, null, 2),
      nowMs: this.clock.nowMs(),
    });
  }

  /** Forgejo's RepoRefForAPI order: a branch, then a tag, then a full commit id. */
  private async resolve(repo: Repository, ref: string): Promise<string | null> {
    const reader = this.git.reader(repo);
    const candidates =
      ref === ''
        ? [`refs/heads/${repo.defaultBranch}`]
        : ref.startsWith('refs/')
          ? [ref]
          : [`refs/heads/${ref}`, `refs/tags/${ref}`];
    for (const candidate of candidates) {
      const sha = await reader.resolveCommit(candidate);
      if (sha !== null) return sha;
    }
    return FULL_OID.test(ref) ? reader.resolveCommit(ref) : null;
  }
}
