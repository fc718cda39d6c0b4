// Scheduled workflows (`on: schedule`): which `cron:` entries a repository
// has registered, and the run one tick of an entry creates.
//
// Registration (Forgejo's services/actions/notifier_helper.go handleSchedules
// and DetectAndHandleSchedules, services/repository/setting.go):
// - Schedules come from the workflows of the default branch only. Every push
//   to it, the Actions user's included (its pushes otherwise start nothing),
//   replaces all the repository's schedules by those of the branch head, in
//   one transaction. The head is read when registering, not the pushed
//   commit: two racing pushes then both register the newest workflows.
// - An archived repository, or one whose Actions unit is off, has none;
//   unarchiving or enabling re-reads the default branch (syncRepository).
//   Disabling a workflow deletes its entries, enabling re-reads the branch.
// - Archiving the repository, switching its Actions unit off or changing its
//   default branch also cancels the scheduled runs of the (old) default
//   branch that have not finished, whatever their workflow (Forgejo's
//   CleanRepoScheduleTasks with cancelPreviousJobs, from
//   services/repository/setting.go and routers/api/v1/repo/repo.go, and
//   SetRepoDefaultBranch in services/repository/branch.go, all through
//   CancelPreviousJobs in services/actions/schedule_tasks.go). Disabling one
//   workflow cancels nothing, as in Forgejo and Gitea (they only record the
//   setting). Deleting the repository deletes its runs.
// - A spec Forgejo's dialect rejects (modules/cron-spec.ts) skips that entry
//   only: the repository keeps its other schedules (Forgejo drops them all
//   after deleting the old ones; the workflows API reports the spec here,
//   `scheduleProblems`). A workflow that does not parse registers nothing.
//
// Firing (Forgejo's services/actions/schedule_tasks.go): one run per tick,
// event and `github.event_name` `schedule`, trigger user the Actions user,
// ref the default branch, commit the one the workflow was registered at,
// payload `{"action":"schedule","schedule":"<cron text>"}` (Gitea's key, so
// `github.event.schedule` works). The tick is claimed in the run's own
// transaction (models/schedules.ts claimScheduleTick), so of several processes
// exactly one creates the run, and a crash loses neither the run nor the tick.
// The next tick is the first after the one fired, or the first after now
// when ticks were missed: those are not replayed.
import type { Logger } from 'pino';
import type { Clock } from '../../modules/clock.ts';
import { CronSpecError, parseCronSpec } from '../../modules/cron-spec.ts';
import type { CronSpec } from '../../modules/cron-spec.ts';
import type { Db } from '../../models/database.ts';
import type { Repository } from '../../models/repos.ts';
import { findRepositoryById } from '../../models/repos.ts';
import {
  claimScheduleTick,
  deleteSchedule,
  deleteSchedulesOfRepository,
  deleteSchedulesOfWorkflow,
  listUnfinishedScheduleRunIds,
  replaceSchedulesOfRepository,
} from '../../models/schedules.ts';
import type { NewSchedule, Schedule } from '../../models/schedules.ts';
import { actionsUser, findAccountById } from '../../models/users.ts';
import { isWorkflowDisabled, listDisabledWorkflows } from '../../models/workflow-states.ts';
import type { GitRepositories } from '../git-repositories.ts';
import type { PushedRef } from '../push-payloads.ts';
import { isZeroOid } from '../push-payloads.ts';
import { TriggerTaken } from './run-creator.ts';
import type { RunCreator } from './run-creator.ts';
import type { WorkflowCatalog, WorkflowFile } from './workflow-catalog.ts';

/** What became of one due schedule. */
export type FireOutcome = 'fired' | 'taken' | 'skipped';

interface Entry {
  text: string;
  timezone: string;
}

/** The `cron:` entries of a workflow as written (`on: schedule` without a list has none). */
function entriesOf(workflow: WorkflowFile): Entry[] {
  const listed: unknown = workflow.parsed.events.schedule;
  if (!Array.isArray(listed)) return [];
  return listed.flatMap((item: { cron?: unknown; timezone?: unknown }) =>
    typeof item.cron === 'string'
      ? [{ text: item.cron, timezone: typeof item.timezone === 'string' ? item.timezone : '' }]
      : [],
  );
}

/** Parsed specs are small and pure: kept by text, the table emptied when it is full. */
const SPEC_CACHE_ENTRIES = 20_000;
/** Unfinished scheduled runs read per query when they are cancelled. */
const CANCEL_PAGE = 50;

export class ScheduleService {
  private readonly specs = new Map<string, CronSpec>();

  /**
   * @param clock the schedule clock (deps.ts: the process clock, or the test seam's faster one);
   *   `next` is computed and compared on it.
   * @param onRegistered tells this process's scheduler that earlier ticks may exist now.
   * @param cancelRun cancels one run as the run-control API does (run-control.ts cancel).
   */
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly catalog: WorkflowCatalog,
    private readonly git: GitRepositories,
    private readonly runs: RunCreator,
    private readonly logger: Logger,
    private readonly onRegistered: () => void = () => {},
    private readonly cancelRun: (repo: Repository, runId: number) => Promise<void> = async () => {},
  ) {}

  /** The entries of a workflow that Forgejo's dialect rejects, each with the reason (the workflows API shows them). */
  scheduleProblems(workflow: WorkflowFile): string[] {
    const problems: string[] = [];
    for (const entry of entriesOf(workflow)) {
      try {
        this.spec(entry.text, entry.timezone);
      } catch (error) {
        if (!(error instanceof CronSpecError)) throw error;
        problems.push(error.message);
      }
    }
    return problems;
  }

  /** After a push: re-registers when it updated the default branch. */
  async onPush(repo: Repository, updates: readonly PushedRef[]): Promise<void> {
    const defaultRef = `refs/heads/${repo.defaultBranch}`;
    if (!updates.some((update) => update.ref === defaultRef && !isZeroOid(update.newOid))) return;
    await this.syncRepository(repo);
  }

  /**
   * Makes the repository's schedules those of its default branch head, or
   * none when it is archived, its Actions unit is off or the branch is gone.
   */
  async syncRepository(repo: Repository): Promise<void> {
    const head =
      repo.isArchived || !repo.units.actions || repo.isEmpty
        ? null
        : await this.git.reader(repo).resolveCommit(`refs/heads/${repo.defaultBranch}`);
    if (head === null) {
      await deleteSchedulesOfRepository(this.db, repo.id);
      return;
    }
    const [workflows, disabled] = await Promise.all([
      this.catalog.workflowsAt(this.git.reader(repo), head),
      listDisabledWorkflows(this.db, repo.id),
    ]);
    const nowMs = this.clock.nowMs();
    const rows: NewSchedule[] = [];
    for (const workflow of workflows) {
      if (disabled.has(workflow.name) || workflow.parsed.errors.length > 0) continue;
      for (const entry of entriesOf(workflow)) {
        let spec: CronSpec;
        try {
          spec = this.spec(entry.text, entry.timezone);
        } catch (error) {
          if (!(error instanceof CronSpecError)) throw error;
          this.logger.warn(
            { repo: `${repo.ownerName}/${repo.name}`, workflow: workflow.name, reason: error.message },
            'a schedule of the default branch was not registered',
          );
          continue;
        }
        rows.push({
          repoId: repo.id,
          ownerId: repo.ownerId,
          workflowId: workflow.name,
          workflowDirectory: workflow.dir,
          ref: `refs/heads/${repo.defaultBranch}`,
          commitSha: head,
          spec: entry.text,
          timeZone: entry.timezone,
          next: Math.floor(spec.next(nowMs) / 1000),
        });
      }
    }
    await this.db
      .transaction()
      .execute((tx) => replaceSchedulesOfRepository(tx, repo.id, rows, Math.floor(nowMs / 1000)));
    if (rows.length > 0) this.onRegistered();
  }

  /**
   * After an edit of the repository (`before` → `after`) that changed whether
   * or where its schedules run: re-registers them, then, when the edit
   * archived the repository, switched its Actions unit off or moved its
   * default branch, cancels the unfinished scheduled runs of the old default
   * branch. The schedules go first, so no tick adds a run behind the cancel
   * (fire() also skips an archived repository or a unit that is off).
   */
  async onRepositoryEdited(before: Repository, after: Repository): Promise<void> {
    await this.syncRepository(after);
    const stopped = (after.isArchived && !before.isArchived) || (!after.units.actions && before.units.actions);
    if (stopped || after.defaultBranch !== before.defaultBranch)
      await this.cancelUnfinishedRuns(after, `refs/heads/${before.defaultBranch}`);
  }

  /**
   * Cancels the repository's scheduled runs on `ref` that have not finished,
   * oldest first, one run-control cancel each. A run that cannot be cancelled
   * now (runners kept claiming its jobs) is logged and left: housekeeping or a
   * user's cancel ends it, and it blocks none of the others.
   */
  private async cancelUnfinishedRuns(repo: Repository, ref: string): Promise<void> {
    for (let afterId = 0; ;) {
      const ids = await listUnfinishedScheduleRunIds(this.db, repo.id, ref, afterId, CANCEL_PAGE);
      for (const runId of ids) {
        try {
          await this.cancelRun(repo, runId);
        } catch (error) {
          this.logger.warn({ err: error, repoId: repo.id, runId }, 'a scheduled run could not be cancelled');
        }
      }
      const last = ids.at(-1);
      if (last === undefined || ids.length < CANCEL_PAGE) return;
      afterId = last;
    }
  }

  /** A disabled workflow's entries go (enabling it calls syncRepository). */
  async removeWorkflow(repoId: number, workflowId: string): Promise<void> {
    await deleteSchedulesOfWorkflow(this.db, repoId, workflowId);
  }

  /**
   * Fires the due tick `schedule.next` once: 'fired' when this call created
   * the run, 'taken' when another process had, 'skipped' when the tick passed
   * without a run (the repository or workflow no longer runs schedules; the
   * tick is consumed all the same). Throws only when even that failed.
   */
  async fire(schedule: Schedule): Promise<FireOutcome> {
    const tick = schedule.next;
    let nextTick: number;
    try {
      nextTick = this.nextTick(schedule);
    } catch (error) {
      // Registered once, refused now (a time zone gone from the system's data): it cannot fire again.
      this.logger.error({ err: error, scheduleId: schedule.id }, 'a registered schedule no longer parses; removed');
      await deleteSchedule(this.db, schedule.id);
      return 'skipped';
    }
    const consume = async (): Promise<FireOutcome> =>
      (await claimScheduleTick(this.db, schedule.id, tick, nextTick)) ? 'skipped' : 'taken';
    try {
      const repo = await findRepositoryById(this.db, schedule.repoId);
      // Safety net for races with archiving, unit and workflow changes, which delete the rows.
      if (repo === null || repo.isArchived || !repo.units.actions) return await consume();
      if (await isWorkflowDisabled(this.db, repo.id, schedule.workflowId)) return await consume();
      const owner = await findAccountById(this.db, repo.ownerId);
      const workflow = await this.catalog.workflowAt(this.git.reader(repo), schedule.commitSha, schedule.workflowId);
      if (owner === null || workflow === null) return await consume();
      await this.runs.create({
        repo,
        owner,
        triggerUser: actionsUser(),
        workflow,
        event: 'schedule',
        triggerEvent: 'schedule',
        ref: schedule.ref,
        commitSha: schedule.commitSha,
        payload: { action: 'schedule', schedule: schedule.spec },
        // Forgejo's title for a scheduled run: the workflow's name, else its path.
        defaultTitle: workflow.parsed.name ?? `${workflow.dir}/${workflow.name}`,
        overLimit: 'fail',
        claim: (tx) => claimScheduleTick(tx, schedule.id, tick, nextTick),
        scheduleId: schedule.id,
      });
      return 'fired';
    } catch (error) {
      if (error instanceof TriggerTaken) return 'taken';
      // The tick is consumed even so: a schedule that cannot run must not be retried in a loop.
      this.logger.error(
        { err: error, scheduleId: schedule.id, repoId: schedule.repoId, workflow: schedule.workflowId },
        'a scheduled run could not be created',
      );
      await consume();
      return 'skipped';
    }
  }

  /** The tick after `schedule.next`, or the first after now when that one has passed already. */
  private nextTick(schedule: Schedule): number {
    const spec = this.spec(schedule.spec, schedule.timeZone);
    const nowMs = this.clock.nowMs();
    let next = spec.next(schedule.next * 1000);
    if (next <= nowMs) next = spec.next(nowMs);
    return Math.floor(next / 1000);
  }

  private spec(text: string, timezone: string): CronSpec {
    const key = `${timezone}\0${text}`;
    let spec = this.specs.get(key);
    if (spec === undefined) {
      spec = parseCronSpec(text, timezone === '' ? undefined : timezone);
      if (this.specs.size >= SPEC_CACHE_ENTRIES) this.specs.clear();
      this.specs.set(key, spec);
    }
    return spec;
  }
}
