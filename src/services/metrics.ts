// What GET /metrics reports, in Prometheus terms. One Registry per app (never
// prom-client's global one: tests run several servers in one process).
//
// | Metric                                    | Type      | Labels                  | Source                                 |
// |-------------------------------------------|-----------|-------------------------|----------------------------------------|
// | gantry_http_requests_total                | counter   | method, route, status   | this process                           |
// | gantry_http_request_duration_seconds      | histogram | method, route           | this process                           |
// | gantry_webhook_deliveries                 | gauge     | state                   | database: hook_task rows               |
// | gantry_actions_jobs                       | gauge     | status                  | database: action_run_job rows          |
// | gantry_actions_jobs_waiting               | gauge     | labels                  | database: waiting jobs by runs-on      |
// | gantry_runners                            | gauge     | status                  | database: action_runner rows           |
// | gantry_metrics_database_up                | gauge     |                         | 1 if the last database read succeeded  |
// | gantry_metrics_database_read_seconds      | gauge     |                         | how long that read took                |
// | process_*, nodejs_*                       | various   |                         | prom-client's default metrics          |
//
// `route` is the route template (`/api/v1/repos/:owner/:repo`), or `unmatched`:
// never the raw URL, which would hold names and let clients mint series.
// `state` of deliveries, the outbox now: pending (due, waiting for a worker:
// new deliveries and retries whose time has come; growing means the workers
// fall behind), retrying (failed, backing off until its next attempt),
// delivering (claimed by a worker: queued in it or being sent); and what
// settled in the last hour (SETTLED_WINDOW_SEC, so the cost does not grow
// with the retention period): delivered, failed (for good).
// `status` of jobs is waiting, running or blocked; of runners online (idle +
// active), offline, idle or active, by the same rule as the runners API.
// `labels` is a job's runs-on, sorted and comma-joined ("" for none), over
// the oldest WAITING_JOBS_GROUPED waiting jobs; past MAX_LABEL_SETS label
// sets, the smallest are summed under OTHER_LABELS.
//
// Every process answers the database gauges for the whole shared database:
// summing them across processes counts them once per process (use max or
// pick one). Request metrics are per process and do sum. The database gauges
// are read at most once per DATABASE_READ_TTL_MS per process, however often
// it is scraped, each count stopping at COUNT_CAP (a value equal to it means
// "at least").
import { performance } from 'node:perf_hooks';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type * as PromClientModule from 'prom-client';
import { ActionStatus } from '../modules/actions-status.ts';
import type { Clock } from '../modules/clock.ts';
import type { Db } from '../models/database.ts';
import {
  countHookTasksByState,
  countJobsWithStatus,
  countRunnersByLiveness,
  countWaitingJobsByRunsOn,
} from '../models/metrics-queries.ts';
import type { HookTaskStateCounts, WaitingJobGroup } from '../models/metrics-queries.ts';
import { RUNNER_IDLE_AFTER_MS, RUNNER_OFFLINE_AFTER_MS } from './actions/runners.ts';

export const DATABASE_READ_TTL_MS = 5_000;
/** About 20 ms of index reads on SQLite, whose reads block the event loop. */
export const COUNT_CAP = 100_000;
export const SETTLED_WINDOW_SEC = 3600;
/** The waiting jobs grouped by label set: the oldest ones, which runners take first. */
export const WAITING_JOBS_GROUPED = 5_000;
/** Label sets reported one by one; the rest are summed under OTHER_LABELS (user-written runs-on must not mint unbounded series). */
export const MAX_LABEL_SETS = 100;
export const OTHER_LABELS = '(other)';
const MAX_LABELS_LENGTH = 200;

/** Up to a minute: runner long polls and git transfers are slow on purpose. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

interface DatabaseSnapshot {
  deliveries: HookTaskStateCounts;
  jobs: { waiting: number; running: number; blocked: number };
  waitingByLabels: Map<string, number>;
  runners: { online: number; offline: number; idle: number; active: number };
}

export interface MetricsServiceOptions {
  /** Told when the database gauges could not be read (the scrape still answers, without them). */
  onError?: (error: unknown) => void;
  readTtlMs?: number;
}

/** A job's stored runs-on (JSON array) as one label value: sorted, de-duplicated, comma-joined. */
export function labelSetOf(runsOn: string): string {
  let labels: string[] = [];
  try {
    const parsed: unknown = JSON.parse(runsOn);
    if (Array.isArray(parsed)) labels = parsed.map(String);
  } catch {
    labels = [runsOn];
  }
  const joined = [...new Set(labels)].sort().join(',');
  return joined.length > MAX_LABELS_LENGTH ? `${joined.slice(0, MAX_LABELS_LENGTH)}…` : joined;
}

/** Merges groups that differ only in label order, keeps the largest MAX_LABEL_SETS, sums the rest. */
export function groupWaitingJobs(groups: readonly WaitingJobGroup[]): Map<string, number> {
  const merged = new Map<string, number>();
  for (const group of groups) {
    const key = labelSetOf(group.runsOn);
    merged.set(key, (merged.get(key) ?? 0) + group.count);
  }
  if (merged.size <= MAX_LABEL_SETS) return merged;
  const sorted = [...merged].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  const kept = new Map(sorted.slice(0, MAX_LABEL_SETS - 1));
  kept.set(
    OTHER_LABELS,
    sorted.slice(MAX_LABEL_SETS - 1).reduce((sum, [, n]) => sum + n, 0),
  );
  return kept;
}

/** prom-client, loaded by createMetricsService: a server without metrics never loads it (1.5 MB of heap with @opentelemetry/api). */
type PromClient = typeof PromClientModule;

/** The metrics of a server with GANTRY_METRICS_TOKEN set. */
export async function createMetricsService(
  db: Db,
  clock: Clock,
  options: MetricsServiceOptions = {},
): Promise<MetricsService> {
  return new MetricsService(db, clock, options, await import('prom-client'));
}

export class MetricsService {
  readonly registry: Registry;
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly durations: Histogram<'method' | 'route'>;
  private readonly readTtlMs: number;
  private snapshot: { at: number; value: DatabaseSnapshot | null } | null = null;
  private reading: Promise<DatabaseSnapshot | null> | null = null;
  private lastReadSeconds = 0;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly options: MetricsServiceOptions,
    private readonly prom: PromClient,
  ) {
    const { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } = prom;
    this.registry = new Registry();
    this.readTtlMs = options.readTtlMs ?? DATABASE_READ_TTL_MS;
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: 'gantry_http_requests_total',
      help: 'HTTP requests answered by this process, by method, route template and status.',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.durations = new Histogram({
      name: 'gantry_http_request_duration_seconds',
      help: 'Time from request to response in this process, by method and route template.',
      labelNames: ['method', 'route'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.databaseGauge(
      'gantry_webhook_deliveries',
      'Webhook deliveries (all processes): pending, retrying, delivering now; delivered, failed in the last hour.',
      ['state'],
      (gauge, s) => {
        for (const [state, n] of Object.entries(s.deliveries)) gauge.set({ state }, n);
      },
    );
    this.databaseGauge(
      'gantry_actions_jobs',
      'Actions jobs (all processes) that are waiting, running or blocked.',
      ['status'],
      (gauge, s) => {
        for (const [status, n] of Object.entries(s.jobs)) gauge.set({ status }, n);
      },
    );
    this.databaseGauge(
      'gantry_actions_jobs_waiting',
      'Waiting Actions jobs (all processes) by runs-on label set.',
      ['labels'],
      (gauge, s) => {
        for (const [labels, n] of s.waitingByLabels) gauge.set({ labels }, n);
      },
    );
    this.databaseGauge(
      'gantry_runners',
      'Registered runners (all processes): online (idle + active), offline, idle, active.',
      ['status'],
      (gauge, s) => {
        for (const [status, n] of Object.entries(s.runners)) gauge.set({ status }, n);
      },
    );
    const up: Gauge = new Gauge({
      name: 'gantry_metrics_database_up',
      help: '1 if the last read of the database gauges succeeded, else 0 (they are then left out).',
      registers,
      collect: async () => {
        up.set((await this.readDatabase()) === null ? 0 : 1);
      },
    });
    const readSeconds: Gauge = new Gauge({
      name: 'gantry_metrics_database_read_seconds',
      help: 'How long the last read of the database gauges took.',
      registers,
      collect: async () => {
        await this.readDatabase();
        readSeconds.set(this.lastReadSeconds);
      },
    });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  observeRequest(method: string, route: string, status: number, seconds: number): void {
    this.requests.inc({ method, route, status: String(status) });
    this.durations.observe({ method, route }, seconds);
  }

  /** The Prometheus text exposition of every metric. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  private databaseGauge<L extends string>(
    name: string,
    help: string,
    labelNames: L[],
    fill: (gauge: Gauge<L>, snapshot: DatabaseSnapshot) => void,
  ): void {
    const gauge: Gauge<L> = new this.prom.Gauge<L>({
      name,
      help,
      labelNames,
      registers: [this.registry],
      collect: async () => {
        const snapshot = await this.readDatabase();
        // A series that is gone (a label set with no waiting job) must not linger.
        gauge.reset();
        if (snapshot !== null) fill(gauge, snapshot);
      },
    });
  }

  /** The cached snapshot, or one read shared by every concurrent caller. */
  private readDatabase(): Promise<DatabaseSnapshot | null> {
    if (this.snapshot !== null && performance.now() - this.snapshot.at < this.readTtlMs)
      return Promise.resolve(this.snapshot.value);
    if (this.reading === null) {
      const started = performance.now();
      this.reading = this.readFromDatabase()
        .catch((error: unknown) => {
          this.options.onError?.(error);
          return null;
        })
        .then((value) => {
          // A failure is cached too: a database in trouble is not asked again at every scrape.
          const at = performance.now();
          this.snapshot = { at, value };
          this.lastReadSeconds = (at - started) / 1000;
          this.reading = null;
          return value;
        });
    }
    return this.reading;
  }

  private async readFromDatabase(): Promise<DatabaseSnapshot> {
    const nowMs = this.clock.nowMs();
    const deliveries = await countHookTasksByState(this.db, COUNT_CAP, nowMs, nowMs - SETTLED_WINDOW_SEC * 1000);
    const jobs = {
      waiting: await countJobsWithStatus(this.db, ActionStatus.waiting, COUNT_CAP),
      running: await countJobsWithStatus(this.db, ActionStatus.running, COUNT_CAP),
      blocked: await countJobsWithStatus(this.db, ActionStatus.blocked, COUNT_CAP),
    };
    const waitingByLabels = groupWaitingJobs(await countWaitingJobsByRunsOn(this.db, WAITING_JOBS_GROUPED));
    // runnerStatus's rule in whole seconds: online ⇔ now − last_online·1000 ≤ offline-after.
    const live = await countRunnersByLiveness(
      this.db,
      Math.ceil((nowMs - RUNNER_OFFLINE_AFTER_MS) / 1000),
      Math.ceil((nowMs - RUNNER_IDLE_AFTER_MS) / 1000),
    );
    return {
      deliveries,
      jobs,
      waitingByLabels,
      runners: {
        online: live.online,
        offline: live.total - live.online,
        idle: live.online - live.active,
        active: live.active,
      },
    };
  }
}
