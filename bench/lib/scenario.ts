// What a scenario is: a named async function that sets up whatever it measures,
// measures it, and returns rows for the report. Scenarios register themselves
// in bench/scenarios/index.ts.

export type BenchDatabase = 'sqlite' | 'postgres';

/** A goal for one metric: its ratio (or raw value) must be at least / at most `threshold`. */
export interface Target {
  of: 'ratio' | 'value';
  kind: 'atLeast' | 'atMost';
  threshold: number;
}

export interface Metric {
  /** e.g. "rps", "p99 latency (ms)". */
  metric: string;
  /** The measurement of Gantry. */
  value: number;
  /** The same measurement of the baseline (null: no baseline). */
  baseline: number | null;
  /** Usually value / baseline (null: not meaningful for this metric). */
  ratio: number | null;
  target: Target | null;
  /** Decimals shown for value and baseline (default: 0 from 100 up, else 2). */
  decimals?: number;
}

export interface ScenarioContext {
  /** The scenario's name (for messages). */
  readonly name: string;
  /** Seconds per measurement (GANTRY_BENCH_DURATION). */
  readonly durationSec: number;
  /** Seconds of warm-up load before each measurement. */
  readonly warmupSec: number;
  readonly database: BenchDatabase;
  /** A progress line on stderr, prefixed with "[bench] <scenario>:". */
  log(message: string): void;
  /** null on SQLite; on PostgreSQL the URL of a fresh database, dropped after the scenario. */
  databaseUrl(): Promise<string | null>;
  /** Runs `cleanup` after the scenario, whether it succeeded or threw (last registered, first run). */
  defer(cleanup: () => Promise<void> | void): void;
}

export interface Scenario {
  /** Short kebab-case name, used by GANTRY_BENCH_ONLY. */
  name: string;
  description: string;
  run(ctx: ScenarioContext): Promise<Metric[]>;
}

export function targetMet(metric: Metric): boolean | null {
  const { target } = metric;
  if (!target) return null;
  const actual = target.of === 'ratio' ? metric.ratio : metric.value;
  if (actual === null || !Number.isFinite(actual)) return false;
  return target.kind === 'atLeast' ? actual >= target.threshold : actual <= target.threshold;
}
