// What a `git push` sets off: the push domain event (webhooks deliver it) and
// the workflow runs whose `on:` matches each updated ref (Forgejo's
// notifier_helper for push, create and delete).
//
// A push made with a task token (the Actions user) starts no run, whatever
// its refs: otherwise a workflow that pushes re-triggers itself without end.
// Its webhooks are still delivered; only runs are suppressed. This is
// Forgejo's rule (services/actions/notifier_helper.go skips every event whose
// doer IsActions()) and GitHub's for GITHUB_TOKEN. Dispatch is the one way a
// job starts another run (dispatch.ts does not pass through here).
import type { Logger } from 'pino';
import { changedPaths } from '../../modules/git/workflow-files.ts';
import type { RepositoryReader } from '../../modules/git/repository-reader.ts';
import { eventsForRefUpdate, workflowMatchesEvent } from '../../modules/workflows/triggers.ts';
import type { EventFacts, RefUpdateKind } from '../../modules/workflows/triggers.ts';
import type { Db } from '../../models/database.ts';
import { listDisabledWorkflows } from '../../models/workflow-states.ts';
import type { Repository } from '../../models/repos.ts';
import { isActionsUser } from '../../models/users.ts';
import type { User } from '../../models/users.ts';
import { isZeroOid, pushCommitLogReader, pushEventPayload, shortRef } from '../push-payloads.ts';
import type { PushCommitLogReader } from '../push-payloads.ts';
import type { DomainEvents } from '../events.ts';
import type { PushedRef } from '../push-payloads.ts';
import { webhooksMayWantPush } from '../webhooks/outbox.ts';
import type { RunCreator } from './run-creator.ts';
import type { ScheduleService } from './schedules.ts';
import type { WorkflowCatalog, WorkflowFile } from './workflow-catalog.ts';

export interface PushContext {
  repo: Repository;
  owner: User;
  pusher: User;
  gitDir: string;
  reader: RepositoryReader;
}

function kindOf(update: PushedRef): RefUpdateKind {
  if (isZeroOid(update.oldOid)) return 'created';
  if (isZeroOid(update.newOid)) return 'deleted';
  return 'updated';
}

function firstLine(message: string): string {
  return message.split('\n', 1)[0]?.trim() ?? '';
}

export class PushTriggers {
  constructor(
    private readonly db: Db,
    private readonly events: DomainEvents,
    private readonly catalog: WorkflowCatalog,
    private readonly runs: RunCreator,
    private readonly schedules: ScheduleService,
    private readonly rootUrl: string,
    private readonly logger: Logger,
  ) {}

  async onPush(ctx: PushContext, updates: readonly PushedRef[]): Promise<void> {
    if (updates.length === 0) return;
    const commitLog = pushCommitLogReader(ctx.gitDir);
    // Webhook payloads list the commits: read them before the transaction,
    // where git would hold SQLite's only connection (every query waits).
    if (await webhooksMayWantPush(this.db, ctx.repo, ctx.owner)) await Promise.all(updates.map(commitLog));
    await this.db.transaction().execute((tx) =>
      this.events.record(tx, {
        type: 'repository.pushed',
        repo: ctx.repo,
        owner: ctx.owner,
        pusher: ctx.pusher,
        updates,
        commitLog,
      }),
    );
    // Before the Actions user's early return: its pushes to the default branch re-register
    // schedules too (Forgejo's notifier_helper.go handles schedules before checking the doer).
    try {
      await this.schedules.onPush(ctx.repo, updates);
    } catch (error) {
      this.logger.error(
        { err: error, repo: `${ctx.owner.name}/${ctx.repo.name}` },
        'could not register the schedules of a push',
      );
    }
    if (!ctx.repo.units.actions || ctx.repo.isArchived || isActionsUser(ctx.pusher)) return;
    for (const update of updates) {
      try {
        await this.triggerWorkflows(ctx, update, commitLog);
      } catch (error) {
        // One broken ref must not stop the others; the push itself has succeeded.
        this.logger.error(
          { err: error, repo: `${ctx.owner.name}/${ctx.repo.name}`, ref: update.ref },
          'could not start the workflows of a push',
        );
      }
    }
  }

  private async triggerWorkflows(ctx: PushContext, update: PushedRef, commitLog: PushCommitLogReader): Promise<void> {
    const kind = kindOf(update);
    // A deleted ref has no commit of its own: `delete` workflows are read from
    // the default branch, as Forgejo does for events that run there.
    const commitSha =
      kind === 'deleted' ? await ctx.reader.resolveCommit(`refs/heads/${ctx.repo.defaultBranch}`) : update.newOid;
    if (commitSha === null) return;
    const found = await this.catalog.workflowsAt(ctx.reader, commitSha);
    if (found.length === 0) return;
    // A disabled workflow is triggered by nothing (Gitea's notifier_helper.go skips DisabledWorkflows).
    const disabled = await listDisabledWorkflows(this.db, ctx.repo.id);
    const workflows = found.filter((workflow) => !disabled.has(workflow.name));
    if (workflows.length === 0) return;

    const log = await commitLog(update);
    const headCommit = log.commits[0] ?? null;
    let changed: Promise<string[] | null> | undefined;
    // A new ref is compared with its head commit's parent, as Forgejo does
    // when `before` is zero: the files of that commit.
    const lazyChangedPaths = (): Promise<string[] | null> =>
      (changed ??= (async () => {
        try {
          const base =
            kind === 'created' ? ((await ctx.reader.readCommit(update.newOid))?.parents[0] ?? null) : update.oldOid;
          return await changedPaths(ctx.gitDir, base, update.newOid);
        } catch (error) {
          // Unknown changes (e.g. a force push whose old commit is gone) must not
          // hide the push: paths filters then do not exclude, as on GitHub.
          this.logger.warn(
            { err: error, ref: update.ref },
            'could not list the files a push changed; paths filters will not exclude it',
          );
          return null;
        }
      })());

    for (const event of eventsForRefUpdate(kind, update.ref)) {
      const facts: EventFacts =
        event === 'push'
          ? { event, ref: update.ref, commitMessage: headCommit?.message ?? '', changedPaths: lazyChangedPaths }
          : { event, ref: update.ref };
      const payload = pushEventPayload(event, {
        repo: ctx.repo,
        owner: ctx.owner,
        pusher: ctx.pusher,
        update,
        commits: log.commits,
        total: log.total,
        rootUrl: this.rootUrl,
      });
      for (const workflow of workflows) {
        if (!(await this.matches(workflow, facts))) continue;
        await this.runs.create({
          repo: ctx.repo,
          owner: ctx.owner,
          triggerUser: ctx.pusher,
          workflow,
          event,
          triggerEvent: event,
          ref: update.ref,
          commitSha,
          payload,
          defaultTitle: headCommit ? firstLine(headCommit.message) : `${event} ${shortRef(update.ref)}`,
        });
      }
    }
  }

  /**
   * A workflow that does not parse has no trustworthy `on:`; it still gets a
   * (failed) run for pushes, once, so its author sees the error.
   */
  private async matches(workflow: WorkflowFile, facts: EventFacts): Promise<boolean> {
    if (workflow.parsed.errors.length > 0 && Object.keys(workflow.parsed.events).length === 0)
      return facts.event === 'push';
    return workflowMatchesEvent(workflow.parsed.events, facts);
  }
}
