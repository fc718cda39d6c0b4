// `npm run bench`: runs the scenarios listed in bench/scenarios/index.ts, prints
// one results table on stdout (progress goes to stderr) and writes the same
// results to .bench/results.json. Exits non-zero if a scenario threw.
//
//   GANTRY_BENCH_DURATION  seconds per measurement (default 10)
//   GANTRY_BENCH_ONLY      comma-separated scenario names (default: all)
//   GANTRY_BENCH_DB        sqlite (default) or postgres (a throwaway cluster)
//   GANTRY_BENCH_CPU_PROF  a folder: the `gantry web` children write CPU profiles there
//
// The `gantry web` children run the production build, as `npm start` does:
// dist/ is built once at the start of the run (and their profiles are mapped
// back to the sources at its end).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runGantryChildrenFrom } from '../test/support/gantry-child.ts';
import { startPgCluster } from '../test/support/pg-cluster.ts';
import type { PgCluster } from '../test/support/pg-cluster.ts';
import { createScratchPgDatabase } from '../test/support/pg-database.ts';
import { BUILT_BUNDLE, buildGantry } from '../test/support/production-build.ts';
import { mapProfilesToSources } from './lib/cpu-profile-sources.ts';
import { formatTable, resultsJson } from './lib/report.ts';
import type { ScenarioOutcome } from './lib/report.ts';
import type { BenchDatabase, Scenario, ScenarioContext } from './lib/scenario.ts';
import { SCENARIOS } from './scenarios/index.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const RESULTS_FILE = path.join(ROOT, '.bench', 'results.json');
const WARMUP_SEC = 2;

class UsageError extends Error {}

function log(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

interface Options {
  durationSec: number;
  only: string[] | null;
  database: BenchDatabase;
}

function readOptions(env: NodeJS.ProcessEnv): Options {
  const rawDuration = env.GANTRY_BENCH_DURATION?.trim() || '10';
  const durationSec = Number(rawDuration);
  if (!Number.isInteger(durationSec) || durationSec < 1) {
    throw new UsageError(`GANTRY_BENCH_DURATION must be a whole number of seconds ≥ 1, got "${rawDuration}"`);
  }
  const rawDb = (env.GANTRY_BENCH_DB?.trim() || 'sqlite').toLowerCase();
  if (rawDb !== 'sqlite' && rawDb !== 'postgres')
    throw new UsageError(`GANTRY_BENCH_DB must be sqlite or postgres, got "${rawDb}"`);
  const only = env.GANTRY_BENCH_ONLY?.trim()
    ? env.GANTRY_BENCH_ONLY.split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : null;
  return { durationSec, only, database: rawDb };
}

function selectScenarios(only: string[] | null): Scenario[] {
  if (only === null) return [...SCENARIOS];
  const known = new Set(SCENARIOS.map((s) => s.name));
  const unknown = only.filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new UsageError(
      `GANTRY_BENCH_ONLY names unknown scenarios: ${unknown.join(', ')} (known: ${[...known].join(', ')})`,
    );
  }
  return SCENARIOS.filter((s) => only.includes(s.name));
}

function errorText(error: unknown): string {
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}

async function runScenario(scenario: Scenario, options: Options, cluster: PgCluster | null): Promise<ScenarioOutcome> {
  const cleanups: Array<() => Promise<void> | void> = [];
  const ctx: ScenarioContext = {
    name: scenario.name,
    durationSec: options.durationSec,
    warmupSec: WARMUP_SEC,
    database: options.database,
    log: (message) => log(`${scenario.name}: ${message}`),
    async databaseUrl() {
      if (!cluster) return null;
      const scratch = await createScratchPgDatabase(cluster.url);
      cleanups.push(() => scratch.drop());
      return scratch.url;
    },
    defer(cleanup) {
      cleanups.push(cleanup);
    },
  };

  const started = Date.now();
  log(`${scenario.name}: ${scenario.description}`);
  let outcome: ScenarioOutcome;
  try {
    const metrics = await scenario.run(ctx);
    outcome = { scenario: scenario.name, metrics, error: null, elapsedSec: 0 };
  } catch (error) {
    log(`${scenario.name}: FAILED: ${errorText(error)}`);
    outcome = {
      scenario: scenario.name,
      metrics: [],
      error: error instanceof Error ? error.message : String(error),
      elapsedSec: 0,
    };
  }
  for (const cleanup of cleanups.reverse()) {
    try {
      await cleanup();
    } catch (error) {
      log(`${scenario.name}: cleanup failed: ${errorText(error)}`);
    }
  }
  outcome.elapsedSec = Math.round((Date.now() - started) / 100) / 10;
  log(`${scenario.name}: ${outcome.error === null ? 'done' : 'failed'} in ${outcome.elapsedSec} s`);
  return outcome;
}

async function main(): Promise<number> {
  let options: Options;
  let scenarios: Scenario[];
  try {
    options = readOptions(process.env);
    scenarios = selectScenarios(options.only);
  } catch (error) {
    if (error instanceof UsageError) {
      log(error.message);
      return 2;
    }
    throw error;
  }
  log(
    `${scenarios.length} scenario(s) on ${options.database}, ${options.durationSec} s per measurement (+${WARMUP_SEC} s warm-up)`,
  );

  log('building dist/ (npm run build) for the gantry web children…');
  runGantryChildrenFrom(await buildGantry());

  let cluster: PgCluster | null = null;
  const outcomes: ScenarioOutcome[] = [];
  try {
    if (options.database === 'postgres') {
      log('starting a throwaway PostgreSQL cluster…');
      cluster = await startPgCluster({ log: (line) => log(`postgres: ${line}`) });
    }
    for (const scenario of scenarios) outcomes.push(await runScenario(scenario, options, cluster));
  } finally {
    if (cluster) await cluster.stop();
  }

  const profileDir = process.env.GANTRY_BENCH_CPU_PROF?.trim();
  if (profileDir) {
    const mapped = await mapProfilesToSources(path.resolve(profileDir), BUILT_BUNDLE);
    if (mapped > 0) log(`${mapped} CPU profile(s) in ${profileDir} mapped from dist/ to the sources`);
  }

  process.stdout.write(`${formatTable(outcomes)}\n`);

  const results = resultsJson(outcomes, {
    generatedAt: new Date().toISOString(),
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    cpus: os.availableParallelism(),
    database: options.database,
    durationSec: options.durationSec,
  });
  await fs.mkdir(path.dirname(RESULTS_FILE), { recursive: true });
  await fs.writeFile(RESULTS_FILE, `${JSON.stringify(results, null, 2)}\n`);
  log(`results written to ${path.relative(process.cwd(), RESULTS_FILE) || RESULTS_FILE}`);

  const failed = outcomes.filter((o) => o.error !== null).map((o) => o.scenario);
  if (failed.length > 0) {
    log(`failed: ${failed.join(', ')}`);
    return 1;
  }
  return 0;
}

// Ctrl-C: exit through process.exit so the 'exit' hooks stop PostgreSQL and remove temp folders.
process.once('SIGINT', () => {
  log('interrupted');
  process.exit(130);
});

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    log(`error: ${errorText(error)}`);
    process.exitCode = 1;
  },
);
