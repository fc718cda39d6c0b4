// The `gantry` command: web (the server), migrate, doctor, and Forgejo-compatible
// admin commands that work against the database while the server runs.
import { Command, InvalidArgumentError } from 'commander';
import { ConfigError, loadConfig } from '../config.ts';
import type { Config } from '../config.ts';
import { GANTRY_VERSION } from '../deps.ts';
import { runServerUntilSignal } from '../main.ts';
import { migrateCommand } from './migrate.ts';
import { adminUserCreate, adminGenerateAccessToken } from './admin-user.ts';
import { rotateSecretKey } from './rotate-secret-key.ts';
import { CliError } from './cli-error.ts';
import { DEFAULT_LABELS, runnerDaemon, runnerOneJob, runnerRegister } from './runner.ts';
import { DEFAULT_CHECK_TIMEOUT_SECONDS, runDoctor } from './doctor.ts';
import { restrictUmask } from '../modules/private-files.ts';

/** Parses Forgejo-style boolean flags: `--flag`, `--flag=false`, `--flag true`. */
export function parseBoolFlag(value: string | undefined): boolean {
  if (value === undefined) return true;
  const lower = value.toLowerCase();
  if (['true', '1', 'yes', 'on', 't'].includes(lower)) return true;
  if (['false', '0', 'no', 'off', 'f'].includes(lower)) return false;
  throw new InvalidArgumentError(`expected true or false, got "${value}"`);
}

function parsePositiveInt(value: string): number {
  if (!/^\d+$/.test(value) || Number(value) < 1)
    throw new InvalidArgumentError(`expected a whole number of at least 1, got "${value}"`);
  return Number(value);
}

function configWith(overrides: Record<string, string | undefined>): Config {
  const env = { ...process.env };
  for (const [key, value] of Object.entries(overrides)) if (value !== undefined) env[key] = value;
  return loadConfig(env);
}

export function buildCli(): Command {
  const program = new Command('gantry')
    .description("Gantry: a CI control plane speaking Forgejo's API")
    .version(GANTRY_VERSION);
  program.option('--data-dir <dir>', 'data folder (GANTRY_DATA_DIR)');

  const globalOverrides = () => ({ GANTRY_DATA_DIR: program.opts<{ dataDir?: string }>().dataDir });

  program
    .command('web')
    .description('run the HTTP server (API, git over HTTP, runner protocol)')
    .option('-p, --port <port>', 'TCP port (GANTRY_HTTP_PORT)')
    .option('--addr <address>', 'listen address (GANTRY_HTTP_ADDR)')
    .action(async (opts: { port?: string; addr?: string }) => {
      await runServerUntilSignal(
        configWith({ ...globalOverrides(), GANTRY_HTTP_PORT: opts.port, GANTRY_HTTP_ADDR: opts.addr }),
      );
    });

  program
    .command('migrate')
    .description('apply pending database migrations and exit')
    .action(async () => migrateCommand(configWith(globalOverrides())));

  program
    .command('doctor')
    .description(
      'check the configuration, data folder, database, git, secret key and HTTP port, and say what to fix (changes nothing)',
    )
    .option('--json', 'print the results as JSON')
    .option('--timeout <seconds>', 'deadline of each check', parsePositiveInt, DEFAULT_CHECK_TIMEOUT_SECONDS)
    .action(async (opts: { json?: boolean; timeout: number }) => {
      const outcome = await runDoctor(() => configWith(globalOverrides()), {
        json: opts.json,
        timeoutSeconds: opts.timeout,
      });
      process.exitCode = outcome.exitCode;
      // A check that ran out of time may leave a hung connect or file system call behind: do not wait for it.
      if (outcome.timedOut) process.exit(outcome.exitCode);
    });

  const runner = program
    .command('runner')
    .description("run Actions jobs on this machine (a client of an instance's runner protocol)");
  runner
    .command('register')
    .description('register this machine as a runner and write the runner file')
    .option('--no-interactive', 'take everything from the flags (the only mode)')
    .option('--instance <url>', 'root URL of the Gantry (or Forgejo) instance')
    .option('--token <token>', 'runner registration token')
    .option('--name <name>', 'runner name (default: the host name)')
    .option('--labels <list>', 'comma-separated labels, name or name:host', DEFAULT_LABELS)
    .option('--runner-file <path>', 'where to write the runner file', '.runner')
    .action(async (opts) => runnerRegister(opts));
  runner
    .command('daemon')
    .description('run jobs from the instance until stopped (SIGTERM lets running jobs finish, then cancels them)')
    .option('--runner-file <path>', 'the runner file written by register', '.runner')
    .option('--capacity <n>', 'jobs run at the same time', parsePositiveInt, 1)
    .option('--workdir <dir>', 'parent folder of the per-job folders (default ~/.cache/gantry-runner)')
    .action(async (opts: { runnerFile: string; capacity: number; workdir?: string }) =>
      runnerDaemon(configWith(globalOverrides()), opts),
    );
  runner
    .command('one-job')
    .description("run the one waiting job with this handle, then exit (Forgejo's FetchSingleTask, for autoscalers)")
    .requiredOption('--handle <uuid>', 'the job handle (see GET …/actions/runners/jobs)')
    .option('--runner-file <path>', 'the runner file written by register', '.runner')
    .option('--workdir <dir>', 'parent folder of the job folder (default ~/.cache/gantry-runner)')
    .action(async (opts: { handle: string; runnerFile: string; workdir?: string }) =>
      runnerOneJob(configWith(globalOverrides()), opts),
    );

  const admin = program.command('admin').description('administration commands');
  const user = admin.command('user').description('manage users');
  user
    .command('create')
    .description('create a user')
    .option('--username <name>', 'user name')
    .option('--name <name>', 'user name (deprecated alias of --username)')
    .requiredOption('--email <email>', 'e-mail address')
    .option('--password <password>', 'password (at least 8 characters)')
    .option('--random-password', 'generate a random password and print it')
    .option('--admin [bool]', 'make the user a site administrator', parseBoolFlag)
    .option(
      '--must-change-password [bool]',
      'force a password change at first login (default: true, false for the first user)',
      parseBoolFlag,
    )
    .option('--restricted [bool]', 'make the user restricted', parseBoolFlag)
    .option('--fullname <name>', 'full name')
    .option('--access-token', 'also create an access token with all scopes and print it')
    .action(async (opts) => adminUserCreate(configWith(globalOverrides()), opts));
  user
    .command('generate-access-token')
    .description('create an access token for a user')
    .requiredOption('-u, --username <name>', 'user name')
    .option('-t, --token-name <name>', 'token name', 'gitea-admin')
    .option('--scopes <scopes>', 'comma-separated scopes', 'all')
    .option('--raw', 'print only the token')
    .action(async (opts) => adminGenerateAccessToken(configWith(globalOverrides()), opts));

  admin
    .command('rotate-secret-key')
    .description(
      'encrypt secrets at rest with a new key and re-encrypt every stored secret with it (servers keep running)',
    )
    .option(
      '--resume',
      'finish an interrupted rotation: re-encrypt what still uses older keys, without creating a new key',
    )
    .option('--prune', 'afterwards, delete key files that no stored secret needs any more')
    .option('--batch-size <n>', 'secrets re-encrypted per transaction', parsePositiveInt, 500)
    .option('--max-batches <n>', 'stop after n batches (finish later with --resume)', parsePositiveInt)
    .action(async (opts: { resume?: boolean; prune?: boolean; batchSize: number; maxBatches?: number }) => {
      await rotateSecretKey(configWith(globalOverrides()), opts);
    });

  return program;
}

export async function runCli(argv: string[]): Promise<void> {
  // Admin commands may create the data folder, the database or a key: owner-only, as the server does.
  restrictUmask();
  try {
    await buildCli().parseAsync(argv);
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`gantry: ${error.message}`);
      process.exitCode = 2;
      return;
    }
    if (error instanceof CliError) {
      console.error(`gantry: ${error.message}`);
      process.exitCode = 1;
      return;
    }
    throw error;
  }
}
