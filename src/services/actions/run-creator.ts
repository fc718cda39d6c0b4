// Turns one triggered workflow into a run with its jobs, in one transaction.
// Shared by every trigger (push, dispatch, and later ones), so the rules for
// titles, job states, invalid workflows and the size of a run (run-limits.ts)
// live in one place. Jobs are planned, and the limits checked, before the
// transaction opens: a run over a limit costs no write beyond its failed run
// row, and a refused one (dispatch) none at all.
import { randomUUID } from 'node:crypto';
import { ActionStatus, aggregateJobStatus, shownJobStatus } from '../../modules/actions-status.ts';
import type { Clock } from '../../modules/clock.ts';
import { AppError } from '../../modules/errors.ts';
import { expandJobs, evaluateRunTitle } from '../../modules/workflows/expand-jobs.ts';
import { typedInputs } from '../../modules/workflows/planning-scope.ts';
import { storedJobConcurrency } from '../../modules/workflows/job-concurrency.ts';
import type { ExpansionContext } from '../../modules/workflows/planning-scope.ts';
import { insertRunWithJobs, listJobsOfRun } from '../../models/action-runs.ts';
import type { ActionRun, ActionRunJob, NewJob } from '../../models/action-runs.ts';
import type { Db, Queryable } from '../../models/database.ts';
import { bumpTasksVersionsForRepo } from '../../models/runners.ts';
import type { Repository } from '../../models/repos.ts';
import type { User } from '../../models/users.ts';
import type { DomainEvents } from '../events.ts';
import type { RunProgress } from './run-progress.ts';
import { cancelPreviousRuns, mustQueue, planRunConcurrency } from './concurrency.ts';
import type { CancelRun, RunConcurrency } from './concurrency.ts';
import { runTooLargeMessage } from './run-limits.ts';
import type { RunLimits } from './run-limits.ts';
import type { VariableService } from './variables.ts';
import type { WorkflowFile } from './workflow-catalog.ts';

export interface RunTrigger {
  repo: Repository;
  owner: User;
  /** Who caused the run: the pusher, or the caller of a dispatch. */
  triggerUser: User;
  workflow: WorkflowFile;
  /** The stored event type (`push`, `workflow_dispatch`…). */
  event: string;
  /** The `on:` key that matched. */
  triggerEvent: string;
  ref: string;
  commitSha: string;
  /** The event payload: the runner's `github.event`. */
  payload: Record<string, unknown>;
  inputs?: Record<string, string>;
  /** Used when the workflow has no `run-name`. */
  defaultTitle: string;
  /**
   * A workflow over a run limit: 'fail' records a failed run that says which
   * (pushes: the author sees why), 'refuse' throws a 400 and writes nothing
   * (dispatch: the caller is there to read it).
   */
  overLimit?: 'fail' | 'refuse';
  /**
   * Runs first in the run's transaction (schedules: the claim of the tick).
   * False means another process took this trigger: nothing is written and
   * create throws TriggerTaken.
   */
  claim?: (tx: Queryable) => Promise<boolean>;
  /** The schedule whose tick this is (the run's ScheduleID). */
  scheduleId?: number;
}

/** The trigger's claim was lost to another process (RunTrigger.claim); no run was created. */
export class TriggerTaken extends Error {
  override readonly name = 'TriggerTaken';
}

export interface CreatedRun {
  run: ActionRun;
  jobs: ActionRunJob[];
}

const MAX_TITLE_CHARS = 255;

function refName(ref: string): string {
  for (const prefix of ['refs/heads/', 'refs/tags/']) if (ref.startsWith(prefix)) return ref.slice(prefix.length);
  return ref;
}

function refType(ref: string): string {
  if (ref.startsWith('refs/tags/')) return 'tag';
  if (ref.startsWith('refs/heads/')) return 'branch';
  return '';
}

export class RunCreator {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly variables: VariableService,
    private readonly events: DomainEvents,
    private readonly serverUrl: string,
    private readonly limits: Pick<RunLimits, 'maxJobsPerRun' | 'maxRunPayloadBytes'>,
    /** Cancel in progress cancels older runs of the group through the cancel API's service. */
    private readonly cancelRun: CancelRun = async () => {},
    /** Admits the jobs that declare a job-level `concurrency:` (job-concurrency.ts). */
    private readonly progress?: RunProgress,
  ) {}

  async create(trigger: RunTrigger): Promise<CreatedRun> {
    const { repo, owner, workflow } = trigger;
    const context: ExpansionContext = {
      github: this.githubContext(trigger),
      vars: Object.fromEntries(await this.variables.variablesForRepo(repo)),
      inputs: trigger.inputs ?? {},
    };
    const errors = [...workflow.parsed.errors];
    let jobs: NewJob[] = [];
    if (errors.length === 0) {
      const expanded = expandJobs(workflow.parsed, context, {
        maxJobs: this.limits.maxJobsPerRun,
        maxPayloadBytes: this.limits.maxRunPayloadBytes,
      });
      if (expanded.exceeded !== undefined) {
        const message = runTooLargeMessage(workflow.name, expanded.exceeded);
        if (trigger.overLimit === 'refuse') throw AppError.invalid(message);
        errors.push(message);
      }
      errors.push(...expanded.errors);
      const { github } = context;
      const { event: _event, ...githubWithoutEvent } = github;
      const inputs = typedInputs(workflow.parsed, context);
      jobs = expanded.jobs.map((job) => ({
        name: job.name,
        jobId: job.jobId,
        handle: randomUUID(),
        needs: job.needs,
        runsOn: job.runsOn,
        hasIf: job.hasIf,
        workflowPayload: job.workflowPayload,
        // Jobs whose needs are not done yet wait in `blocked` (Forgejo's job emitter unblocks them);
        // so do jobs with a job-level group, until they are admitted to it (job-concurrency.ts).
        status: job.needs.length > 0 || job.concurrency !== undefined ? ActionStatus.blocked : ActionStatus.waiting,
        ...(job.concurrency !== undefined
          ? {
              rawConcurrency: JSON.stringify(
                storedJobConcurrency(job.concurrency, { github: githubWithoutEvent, vars: context.vars, inputs }),
              ),
            }
          : {}),
      }));
    }
    // The concurrency block (concurrency.ts): evaluated once, here, with the run's contexts.
    let concurrency: RunConcurrency | undefined;
    if (errors.length === 0) {
      const planned = planRunConcurrency(workflow.parsed, context, {
        ref: trigger.ref,
        workflowId: workflow.name,
        triggerEvent: trigger.triggerEvent,
        event: trigger.event,
      });
      if ('error' in planned) errors.push(planned.error);
      else concurrency = planned;
    }
    if (concurrency !== undefined) await cancelPreviousRuns(this.db, repo, concurrency, this.cancelRun);
    const title =
      (errors.length === 0 ? evaluateRunTitle(workflow.parsed, context) : undefined) ?? trigger.defaultTitle;
    const now = this.clock.nowSec();
    // A workflow that cannot run still gets a run: failed, without jobs, with
    // the reason, so the author sees why nothing happened.
    const invalid = errors.length > 0;
    const jobConcurrency = !invalid && jobs.some((job) => job.rawConcurrency !== undefined);
    return this.events.transaction(this.db, async (tx) => {
      if (trigger.claim !== undefined && !(await trigger.claim(tx))) throw new TriggerTaken('trigger already taken');
      // Queue behind an unfinished run of the group: the jobs that would wait are held instead.
      const queued = !invalid && concurrency !== undefined && (await mustQueue(tx, repo.id, concurrency));
      // (A job that waits for its job group's admission counts as ready: it is held with the run.)
      const ready = (job: NewJob): boolean =>
        job.status === ActionStatus.waiting || (job.rawConcurrency !== undefined && job.needs.length === 0);
      const newJobs = queued
        ? jobs.map((job) => (ready(job) ? { ...job, status: ActionStatus.blocked, concurrencyHeld: true } : job))
        : jobs;
      const created = await insertRunWithJobs(
        tx,
        {
          repoId: repo.id,
          ownerId: owner.id,
          title: title.slice(0, MAX_TITLE_CHARS),
          workflowId: workflow.name,
          workflowDirectory: workflow.dir,
          triggerUserId: trigger.triggerUser.id,
          ref: trigger.ref,
          commitSha: trigger.commitSha,
          event: trigger.event,
          eventPayload: JSON.stringify(trigger.payload),
          triggerEvent: trigger.triggerEvent,
          ...(trigger.scheduleId !== undefined ? { scheduleId: trigger.scheduleId } : {}),
          status: invalid
            ? ActionStatus.failure
            : aggregateJobStatus(
                newJobs.map((j) => shownJobStatus({ ...j, concurrencyHeld: j.concurrencyHeld === true })),
              ),
          ...(concurrency !== undefined
            ? { concurrencyGroup: concurrency.group, concurrencyType: concurrency.mode }
            : {}),
          ...(invalid ? { preExecutionError: errors.join('\n'), stopped: now } : {}),
          ...(jobConcurrency ? { jobConcurrency } : {}),
        },
        invalid ? [] : newJobs,
        now,
      );
      if (created.jobs.some((job) => job.status === ActionStatus.waiting))
        await bumpTasksVersionsForRepo(tx, owner.id, repo.id, now);
      await this.events.record(tx, {
        type: 'actions.run.created',
        repo,
        owner,
        run: created.run,
        jobs: created.jobs,
        triggerUser: trigger.triggerUser,
      });
      if (jobConcurrency && this.progress !== undefined) {
        const run = (await this.progress.settle(tx, created.run.id)) ?? created.run;
        return { run, jobs: await listJobsOfRun(tx, created.run.id) };
      }
      return created;
    });
  }

  private githubContext(trigger: RunTrigger): Record<string, unknown> {
    const fullName = `${trigger.owner.name}/${trigger.repo.name}`;
    return {
      event_name: trigger.triggerEvent,
      event: trigger.payload,
      ref: trigger.ref,
      ref_name: refName(trigger.ref),
      ref_type: refType(trigger.ref),
      sha: trigger.commitSha,
      repository: fullName,
      repository_owner: trigger.owner.name,
      actor: trigger.triggerUser.name,
      triggering_actor: trigger.triggerUser.name,
      workflow: trigger.workflow.parsed.name ?? `${trigger.workflow.dir}/${trigger.workflow.name}`,
      server_url: this.serverUrl,
      api_url: `${this.serverUrl}/api/v1`,
      head_ref: '',
      base_ref: '',
    };
  }
}
