// The webhook outbox: a DomainEvents subscriber that turns domain events into
// hook_task rows, in the transaction of the change (so a delivery exists
// exactly when the change does). Candidate hooks and gates follow Forgejo's
// services/webhook/webhook.go PrepareWebhooks: the active hooks of the
// repository, then those of its owner (the rows are written in that order, so
// the repository's hooks are delivered first), the hook's event subscription,
// and the branch filter for push/create/delete. One row (one delivery id) per
// hook per event.
//
// Refs follow Forgejo's services/repository/push.go: a created ref sends
// `push` and `create`, an updated ref `push`, a deleted ref `delete` only.
import { randomUUID } from 'node:crypto';
import { AccessMode } from '../../modules/access-mode.ts';
import type { Clock } from '../../modules/clock.ts';
import type { Queryable } from '../../models/database.ts';
import { insertHookTasks } from '../../models/hook-tasks.ts';
import { listActiveHooksForRepository, listActiveHooksOfOwner } from '../../models/webhooks.ts';
import type { WebhookRecord } from '../../models/webhooks.ts';
import type { Repository } from '../../models/repos.ts';
import type { User } from '../../models/users.ts';
import { toApiOrg, toApiRepo, toApiUser } from '../convert.ts';
import { ANONYMOUS_VIEWER, isZeroOid, pushEventPayload } from '../push-payloads.ts';
import type { DomainEvent, DomainEventHandler } from '../events.ts';
import { hookWantsEvent, hookWantsRef } from './hook-events.ts';

/** Commits listed in a push payload; total_commits keeps the real count (Forgejo's FEED_MAX_COMMIT_NUM is 5). */
export interface WebhookOutboxOptions {
  clock: Clock;
  rootUrl: string;
}

/** Stored payloads are indented as Forgejo stores them (two spaces; one for `repository`). */
function serialise(eventType: string, payload: unknown): string {
  return JSON.stringify(payload, null, eventType === 'repository' ? 1 : 2);
}

/**
 * Whether a push to `owner`'s repositories may send webhooks, so its commits
 * are worth reading from git before the push's transaction opens (inside, the
 * read would hold SQLite's only connection while git runs).
 */
export async function webhooksMayWantPush(db: Queryable, repo: Repository, owner: User): Promise<boolean> {
  return (await listActiveHooksForRepository(db, repo.id, owner.id)).some((hook) => hookWantsEvent(hook, 'push'));
}

export function createWebhookOutbox(options: WebhookOutboxOptions): DomainEventHandler {
  const rootUrl = options.rootUrl;

  /** One row per hook, one delivery id each; the payload is serialised once and the rows written in one statement. */
  const enqueue = async (
    tx: Queryable,
    hooks: readonly WebhookRecord[],
    eventType: string,
    payload: unknown,
  ): Promise<void> => {
    const serialised = serialise(eventType, payload);
    const nowMs = options.clock.nowMs();
    await insertHookTasks(
      tx,
      hooks.map((hook) => ({ hookId: hook.id, uuid: randomUUID(), eventType, payload: serialised, nowMs })),
    );
  };

  const onPush = async (tx: Queryable, event: Extract<DomainEvent, { type: 'repository.pushed' }>): Promise<void> => {
    const candidates = await listActiveHooksForRepository(tx, event.repo.id, event.owner.id);
    if (candidates.length === 0) return;
    for (const update of event.updates) {
      const created = isZeroOid(update.oldOid);
      const deleted = isZeroOid(update.newOid);
      const types: Array<'push' | 'create' | 'delete'> = deleted ? ['delete'] : created ? ['push', 'create'] : ['push'];
      const wanted = types.map((type) => ({
        type,
        hooks: candidates.filter((h) => hookWantsEvent(h, type) && hookWantsRef(h, type, update.ref)),
      }));
      if (wanted.every((w) => w.hooks.length === 0)) continue;
      const log =
        !deleted && wanted.some((w) => w.type === 'push' && w.hooks.length > 0)
          ? await event.commitLog(update)
          : { commits: [], total: 0 };
      for (const { type, hooks: targets } of wanted) {
        if (targets.length === 0) continue;
        const payload = pushEventPayload(type, {
          repo: event.repo,
          owner: event.owner,
          pusher: event.pusher,
          update,
          commits: log.commits,
          total: log.total,
          rootUrl,
        });
        await enqueue(tx, targets, type, payload);
      }
    }
  };

  // To the owner's hooks only: a new repository has no hooks yet, and a
  // deleted one's go with it (Forgejo queues to them, then deletes the rows).
  const onRepository = async (
    tx: Queryable,
    event: Extract<DomainEvent, { type: 'repository.created' | 'repository.deleted' }>,
  ): Promise<void> => {
    if (!event.owner.isOrganization) return;
    const targets = (await listActiveHooksOfOwner(tx, event.owner.id)).filter((h) => hookWantsEvent(h, 'repository'));
    if (targets.length === 0) return;
    // Forgejo's api.RepositoryPayload.
    const payload = {
      action: event.type === 'repository.created' ? 'created' : 'deleted',
      repository: toApiRepo(event.repo, event.owner, AccessMode.none, ANONYMOUS_VIEWER, rootUrl),
      organization: toApiOrg(event.owner, rootUrl),
      sender: toApiUser(event.doer, ANONYMOUS_VIEWER, rootUrl),
    };
    await enqueue(tx, targets, 'repository', payload);
  };

  return async (tx, event) => {
    if (event.type === 'repository.pushed') await onPush(tx, event);
    else if (event.type === 'repository.created' || event.type === 'repository.deleted') await onRepository(tx, event);
  };
}
