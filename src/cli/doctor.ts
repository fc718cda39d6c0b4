// `gantry doctor`: checks what a Gantry installation needs (configuration,
// data folder, database, git, the secret key, the HTTP port) and says, for
// each problem, what to do. It changes nothing: no migration, no key file, no
// database file is created. Checks run side by side, each under a deadline,
// and one that fails or hangs never stops the others.
import { ConfigError } from '../config.ts';
import type { Config } from '../config.ts';
import type { BaseContext, DoctorContext } from './doctor-checks/context.ts';
import {
  dataFolderCheck,
  dataPermissionsCheck,
  diskSpaceCheck,
  keyFilePermissionsCheck,
  repositoriesFolderCheck,
} from './doctor-checks/data-folder.ts';
import {
  databaseCheck,
  openForInspection,
  postgresVersionCheck,
  sqliteJournalModeCheck,
} from './doctor-checks/database.ts';
import type { InspectedDatabase } from './doctor-checks/database.ts';
import { gitInitCheck, gitVersionCheck } from './doctor-checks/git.ts';
import { httpPortCheck, probePort, rootUrlCheck } from './doctor-checks/http-port.ts';
import { migrationsCheck, readMigrationStatus } from './doctor-checks/migrations.ts';
import { formatJson, formatLines, redactResult, redactor, secretsOf } from './doctor-checks/report.ts';
import { fail, once, runCheck } from './doctor-checks/result.ts';
import type { Check, CheckResult } from './doctor-checks/result.ts';
import { encryptedValuesCheck, inspectKeys, secretKeyCheck, storedValuesFor } from './doctor-checks/secret-key.ts';
import type { KeyInspection } from './doctor-checks/secret-key.ts';
import { sqliteIntegrityCheck } from './doctor-checks/sqlite-integrity.ts';

export const DEFAULT_CHECK_TIMEOUT_SECONDS = 10;

export interface DoctorOptions {
  json?: boolean;
  /** Deadline of each check, in seconds. */
  timeoutSeconds?: number;
  print?: (text: string) => void;
}

export interface DoctorOutcome {
  exitCode: number;
  results: CheckResult[];
  /** A check ran out of time: its work may still hold the process (a connect, a file system call). */
  timedOut: boolean;
}

/** Checks that need nothing from the configuration: they run even when it does not parse. */
const STANDALONE_CHECKS: Check<BaseContext>[] = [gitVersionCheck, gitInitCheck];

function checksFor(config: Config): Check<DoctorContext>[] {
  const databaseChecks =
    config.databaseUrl === null ? [sqliteIntegrityCheck, sqliteJournalModeCheck] : [postgresVersionCheck];
  return [
    dataFolderCheck,
    diskSpaceCheck,
    keyFilePermissionsCheck,
    dataPermissionsCheck,
    repositoriesFolderCheck,
    databaseCheck,
    migrationsCheck,
    ...databaseChecks,
    ...STANDALONE_CHECKS,
    secretKeyCheck,
    encryptedValuesCheck,
    httpPortCheck,
    rootUrlCheck,
  ];
}

function createContext(config: Config, timeoutMs: number): DoctorContext & { close(): Promise<void> } {
  let opened: InspectedDatabase | null = null;
  let keys: KeyInspection | null = null;
  const ctx: DoctorContext & { close(): Promise<void> } = {
    config,
    timeoutMs,
    database: once(async () => (opened = await openForInspection(config))),
    migrations: once(async () => readMigrationStatus((await ctx.database()).db)),
    keys: () => (keys ??= inspectKeys(config)),
    storedValues: once(() => storedValuesFor(ctx)),
    localServer: once(() => probePort(config.httpAddr, config.httpPort, Math.max(500, timeoutMs - 500))),
    close: async () => {
      await opened?.close();
    },
  };
  return ctx;
}

function configurationResult(error: unknown): CheckResult {
  if (error instanceof ConfigError) {
    return {
      check: 'configuration',
      ...fail(
        error.message,
        `set ${error.key} to a valid value, or unset it for the default (see Configuration in the README)`,
      ),
    };
  }
  throw error;
}

type RanCheck = CheckResult & { timedOut?: boolean };

async function checkInstallation(config: Config, timeoutMs: number): Promise<RanCheck[]> {
  const where = config.databaseUrl === null ? 'SQLite in the data folder' : 'PostgreSQL (GANTRY_DATABASE_URL)';
  const ctx = createContext(config, timeoutMs);
  try {
    const ran = await Promise.all(checksFor(config).map((check) => runCheck(check, ctx, timeoutMs)));
    return [
      { check: 'configuration', status: 'ok', found: `parsed; data folder ${config.dataDir}, database ${where}` },
      ...ran,
    ];
  } finally {
    // Bounded: a connection stuck in a hung connect must not keep doctor from answering.
    await Promise.race([ctx.close().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
  }
}

/** Runs every check; prints the report; the exit code is 0 when nothing failed, 1 otherwise. */
export async function runDoctor(loadConfig: () => Config, options: DoctorOptions = {}): Promise<DoctorOutcome> {
  const print = options.print ?? ((text: string) => console.log(text));
  const timeoutMs = Math.round((options.timeoutSeconds ?? DEFAULT_CHECK_TIMEOUT_SECONDS) * 1000);

  let config: Config | null = null;
  let results: RanCheck[];
  try {
    config = loadConfig();
    results = await checkInstallation(config, timeoutMs);
  } catch (error) {
    if (config !== null) throw error;
    const base: BaseContext = { timeoutMs };
    results = [
      configurationResult(error),
      ...(await Promise.all(STANDALONE_CHECKS.map((check) => runCheck(check, base, timeoutMs)))),
    ];
  }

  const redact = redactor(secretsOf(config));
  const shown = results.map(({ check, status, found, fix }) =>
    redactResult({ check, status, found, ...(fix !== undefined ? { fix } : {}) }, redact),
  );
  print(options.json === true ? formatJson(shown) : formatLines(shown).join('\n'));
  return {
    exitCode: shown.some((r) => r.status === 'fail') ? 1 : 0,
    results: shown,
    timedOut: results.some((r) => r.timedOut === true),
  };
}
