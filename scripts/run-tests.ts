// Test runner: picks the databases to test against (starting a throwaway
// PostgreSQL cluster when it can), then runs node's built-in test runner over
// explicit file paths. Usage:
//   node --import tsx scripts/run-tests.ts [--sqlite-only] [files or dirs…]

import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findPgBinaries, startPgCluster } from '../test/support/pg-cluster.ts';
import type { PgCluster } from '../test/support/pg-cluster.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULT_TEST_ROOTS = ['test', 'src', 'bench'];
const TEST_FILE = /\.test\.ts$/;

interface Options {
  sqliteOnly: boolean;
  targets: string[];
}

interface DatabaseSetup {
  databases: string;
  pgUrl: string | undefined;
  cluster: PgCluster | undefined;
}

class UsageError extends Error {}

function say(line: string): void {
  console.log(`[run-tests] ${line}`);
}

function parseArgs(argv: string[]): Options {
  const options: Options = { sqliteOnly: false, targets: [] };
  let onlyTargets = false;
  for (const arg of argv) {
    if (onlyTargets || !arg.startsWith('--')) options.targets.push(arg);
    else if (arg === '--') onlyTargets = true;
    else if (arg === '--sqlite-only') options.sqliteOnly = true;
    else throw new UsageError(`unknown option ${arg}; usage: run-tests.ts [--sqlite-only] [files or dirs…]`);
  }
  return options;
}

function walkTestFiles(dir: string, out: string[]): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) walkTestFiles(path, out);
    else if (entry.isFile() && TEST_FILE.test(entry.name)) out.push(path);
  }
}

// Node 20's --test does not expand globs, so every file is passed explicitly,
// as a path relative to the repo root (the child's cwd).
function collectTestFiles(targets: string[]): string[] {
  const found: string[] = [];
  if (targets.length === 0) {
    for (const root of DEFAULT_TEST_ROOTS) {
      const dir = join(repoRoot, root);
      if (statSync(dir, { throwIfNoEntry: false })?.isDirectory()) walkTestFiles(dir, found);
    }
  } else {
    for (const target of targets) {
      const path = resolve(target);
      const stat = statSync(path, { throwIfNoEntry: false });
      if (!stat) throw new UsageError(`no such file or directory: ${target}`);
      if (stat.isDirectory()) walkTestFiles(path, found);
      else found.push(path);
    }
  }
  return [...new Set(found.map((file) => relative(repoRoot, file)))].sort();
}

function concurrency(): number {
  const raw = process.env.GANTRY_TEST_CONCURRENCY ?? '2';
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError(`GANTRY_TEST_CONCURRENCY must be a positive integer, got "${raw}"`);
  return n;
}

async function setupDatabases(options: Options): Promise<DatabaseSetup> {
  if (options.sqliteOnly) return { databases: 'sqlite', pgUrl: undefined, cluster: undefined };

  const preset = process.env.GANTRY_TEST_DATABASES;
  if (preset !== undefined) return { databases: preset, pgUrl: process.env.GANTRY_TEST_PG_URL, cluster: undefined };

  const externalUrl = process.env.GANTRY_TEST_PG_URL;
  if (externalUrl) return { databases: 'sqlite,postgres', pgUrl: externalUrl, cluster: undefined };

  if (findPgBinaries()) {
    const cluster = await startPgCluster({ log: (line) => say(`pg: ${line}`) });
    return { databases: 'sqlite,postgres', pgUrl: cluster.url, cluster };
  }

  if (process.env.CI === 'true') {
    throw new Error(
      'PostgreSQL binaries (initdb, pg_ctl) not found; install postgresql (Debian: apt-get install postgresql) ' +
        'or set GANTRY_TEST_PG_URL. Refusing to run CI against SQLite only.',
    );
  }
  say('WARNING: PostgreSQL binaries (initdb, pg_ctl) not found; testing SQLite only. Install postgresql to test both.');
  return { databases: 'sqlite', pgUrl: undefined, cluster: undefined };
}

function childEnv(setup: DatabaseSetup): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, GANTRY_TEST_DATABASES: setup.databases };
  // Password hashing at the lowest cost (production: 17, about 0.4 s and 128 MiB
  // per hash): the tests create and sign in many users, and every Gantry
  // process a test spawns inherits this. A test of the cost itself sets its own.
  env.GANTRY_PASSWORD_HASH_COST ??= '14';
  // A stale URL from the caller's shell must not sneak PostgreSQL into a SQLite-only run.
  if (setup.pgUrl === undefined) delete env.GANTRY_TEST_PG_URL;
  else env.GANTRY_TEST_PG_URL = setup.pgUrl;
  return env;
}

function waitForExit(child: ChildProcess): Promise<number> {
  return new Promise((resolveExit) => {
    child.on('error', (error) => {
      say(`could not start the test runner: ${error.message}`);
      resolveExit(1);
    });
    child.on('close', (code) => resolveExit(code ?? 1));
  });
}

async function main(): Promise<number> {
  const started = Date.now();
  let child: ChildProcess | undefined;
  let signalled: NodeJS.Signals | undefined;

  // Installed before the cluster starts, so an early Ctrl-C still ends with
  // the cluster stopped rather than with node's default immediate exit.
  const onSignal = (signal: NodeJS.Signals): void => {
    signalled = signal;
    if (child && child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let setup: DatabaseSetup | undefined;
  try {
    const options = parseArgs(process.argv.slice(2));
    const files = collectTestFiles(options.targets);
    if (files.length === 0) throw new UsageError('no test files found');
    const n = concurrency();

    setup = await setupDatabases(options);
    if (signalled) return 1;

    say(
      `databases: ${setup.databases}; ${files.length} test file(s); concurrency ${n}` +
        (setup.pgUrl ? `; PostgreSQL at ${setup.pgUrl}` : ''),
    );
    child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--test',
        `--test-concurrency=${n}`,
        '--test-reporter=spec',
        '--test-reporter-destination=stdout',
        ...files,
      ],
      { cwd: repoRoot, stdio: 'inherit', env: childEnv(setup) },
    );
    const code = await waitForExit(child);
    // The child may exit 0 after a forwarded SIGINT; an interrupted run still failed.
    return signalled && code === 0 ? 1 : code;
  } catch (error) {
    say(`ERROR: ${error instanceof Error ? error.message : String(error)}`);
    return error instanceof UsageError ? 2 : 1;
  } finally {
    await setup?.cluster?.stop();
    say(`finished in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
}

process.exit(await main());
