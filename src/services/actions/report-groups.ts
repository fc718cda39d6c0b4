// Final reports that arrive together finish together (PostgreSQL). A final
// report that would be finishReportAlone's one statement (no outputs, a
// runner that is not ephemeral, each step named once) waits for the end of
// the event loop's current phase (setImmediate), or while a group is
// finishing, until it is done (under load a group grows instead of
// queueing for a connection as a statement of its own); then the reports
// gathered go as one autocommitted statement (finishReportsAlone), which
// locks each of their runs once, in id order, and counts each run's jobs
// once. A group of one is finishReportAlone's statement itself. In a
// throughput bench the legs of one matrix finish together: one statement
// and one lock of their run instead of one each.
//
// Guarantees (as finishReportAlone gives them to a report alone):
// - Each report gets what finishReportAlone would have answered it: its task
//   finished with its job and steps, or its task done already (answered as
//   it is), or nothing written and the report left to updateTask's
//   transaction. A report is never half-written: the group is one statement.
// - A second report of a task already waiting in the group goes alone.
// - A group whose statement fails with a retryable error (a deadlock) wrote
//   nothing: each of its reports is left to the transaction, as when the
//   statement declines; any other error fails every report of the group.
//
// Cost of a crash: that of the statement: the reports it did not commit
// are answered with an error and sent again by their runners.
import { isRetryableError } from '../../models/database.ts';
import type { Db } from '../../models/database.ts';
import { finishReportAlone, finishReportsAlone } from '../../models/task-reports.ts';
import type { AloneReport, FinishedAlone } from '../../models/task-reports.ts';

/** At most this many reports finish in one statement. */
const MAX_GROUP = 64;
/**
 * While this many groups are finishing, the next gathers until one is done.
 * One, as claim groups (claim-groups.ts's MAX_CLAIMING): a second statement
 * in flight mostly waited for the run the first had locked (the legs of a
 * matrix share it), its FOR UPDATE queued on the run's row ahead of the
 * next claim group's FOR SHARE. In the throughput bench on PostgreSQL one
 * gave a lower FetchTask p99 than two in 3 of 3 alternating pairs (396, 786,
 * 819 against 915, 856, 1,013 ms, load average 5-9) at the same jobs per
 * second.
 */
const MAX_FINISHING = 1;

interface Member {
  report: AloneReport;
  resolve: (finished: FinishedAlone) => void;
  reject: (error: unknown) => void;
}

/** What a report left to the transaction is told: nothing was written, read the task there. */
const LEFT_TO_TRANSACTION: FinishedAlone = { seen: null, finished: false, doneAs: null };

export class ReportGroups {
  private pending: Member[] = [];
  private readonly pendingTasks = new Set<number>();
  private finishing = 0;
  private scheduled = false;

  constructor(
    private readonly db: Db,
    private readonly now: () => number,
  ) {}

  /** finishReportAlone for `report`, in one statement with the others that arrive meanwhile. */
  finish(report: AloneReport): Promise<FinishedAlone> {
    if (this.pendingTasks.has(report.taskId))
      return finishReportAlone(this.db, report.taskId, report.runnerId, report.status, this.now(), report.steps);
    this.pendingTasks.add(report.taskId);
    const finished = new Promise<FinishedAlone>((resolve, reject) => {
      this.pending.push({ report, resolve, reject });
    });
    if (this.pending.length >= MAX_GROUP) this.start();
    else this.schedule();
    return finished;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (this.finishing < MAX_FINISHING) this.start();
    });
  }

  private start(): void {
    const group = this.pending;
    if (group.length === 0) return;
    this.pending = [];
    this.pendingTasks.clear();
    this.finishing += 1;
    void this.run(group).finally(() => {
      this.finishing -= 1;
      // The reports that gathered meanwhile go next, with those of this phase.
      if (this.pending.length > 0) this.schedule();
    });
  }

  private async run(group: readonly Member[]): Promise<void> {
    let results: FinishedAlone[];
    try {
      const now = this.now();
      if (group.length === 1) {
        const { report } = group[0] as Member;
        results = [await finishReportAlone(this.db, report.taskId, report.runnerId, report.status, now, report.steps)];
      } else {
        results = await finishReportsAlone(
          this.db,
          group.map((member) => member.report),
          now,
        );
      }
    } catch (error) {
      if (isRetryableError(error)) results = group.map(() => LEFT_TO_TRANSACTION);
      else {
        for (const member of group) member.reject(error);
        return;
      }
    }
    group.forEach((member, i) => member.resolve(results[i] ?? LEFT_TO_TRANSACTION));
  }
}
