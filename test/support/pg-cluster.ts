// Throwaway PostgreSQL cluster for tests: initdb into a temp dir, start it on
// a free loopback port, and tear it all down again. No system service, no
// password, no state shared with anything else on the machine.

import { execFileSync, spawn } from 'node:child_process';
import { accessSync, constants as fsConstants, readdirSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { chown, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import pg from 'pg';
import { freePort } from './free-port.ts';

export interface PgCluster {
  url: string;
  stop(): Promise<void>;
}

export interface PgBinaries {
  initdb: string;
  pg_ctl: string;
  postgres: string;
}

export interface StartPgClusterOptions {
  log?: (line: string) => void;
}

const CONNECT_DEADLINE_MS = 20_000;
const PG_CTL_WAIT_SECONDS = '60';

function isExecutable(file: string): boolean {
  try {
    accessSync(file, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

// pg_ctl finds `postgres` next to its own resolved path, so we resolve
// symlinks (e.g. /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb)
// and require the three binaries to live together in the real bin dir.
function binariesIn(binDir: string): PgBinaries | null {
  const bins = {
    initdb: join(binDir, 'initdb'),
    pg_ctl: join(binDir, 'pg_ctl'),
    postgres: join(binDir, 'postgres'),
  };
  return Object.values(bins).every(isExecutable) ? bins : null;
}

function fromPath(): PgBinaries | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const initdb = join(dir, 'initdb');
    if (!isExecutable(initdb)) continue;
    const found = binariesIn(dirname(realpathSync(initdb)));
    if (found) return found;
  }
  return null;
}

function compareVersionsDesc(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const diff = (pb[i] ?? 0) - (pa[i] ?? 0);
    if (diff !== 0) return diff;
  }
  return 0;
}

// Debian/Ubuntu keep the server binaries off PATH, one dir per major version.
function fromDebianLayout(): PgBinaries | null {
  const root = '/usr/lib/postgresql';
  let versions: string[];
  try {
    versions = readdirSync(root).filter((v) => /^\d+(\.\d+)*$/.test(v));
  } catch {
    return null;
  }
  for (const version of versions.sort(compareVersionsDesc)) {
    const found = binariesIn(join(root, version, 'bin'));
    if (found) return found;
  }
  return null;
}

export function findPgBinaries(): PgBinaries | null {
  return fromPath() ?? fromDebianLayout();
}

interface RunAs {
  user: string;
  uid: number;
  gid: number;
  // Turns [cmd, ...args] into the argv that runs it as `user`.
  wrap(argv: string[]): string[];
}

function lookupUser(name: string): { uid: number; gid: number } | null {
  try {
    const line = execFileSync('getent', ['passwd', name], { encoding: 'utf8' }).trim();
    const [, , uid, gid] = line.split(':');
    if (uid === undefined || gid === undefined) return null;
    return { uid: Number(uid), gid: Number(gid) };
  } catch {
    return null;
  }
}

function findCommand(name: string): string | null {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  for (const dir of dirs) {
    if (dir && isExecutable(join(dir, name))) return join(dir, name);
  }
  return null;
}

// initdb and pg_ctl refuse to run as root, so as root we drop to an
// unprivileged account for every PostgreSQL command.
function resolveRunAs(): RunAs | null {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return null;

  const user = lookupUser('postgres') ? 'postgres' : 'nobody';
  const ids = lookupUser(user);
  if (!ids) throw new Error(`running as root, but neither "postgres" nor "nobody" exists to run PostgreSQL as`);

  const runuser = findCommand('runuser');
  if (runuser) return { user, ...ids, wrap: (argv) => [runuser, '-u', user, '--', ...argv] };

  const setpriv = findCommand('setpriv');
  if (setpriv) {
    return {
      user,
      ...ids,
      wrap: (argv) => [setpriv, `--reuid=${ids.uid}`, `--regid=${ids.gid}`, '--init-groups', '--', ...argv],
    };
  }
  throw new Error('running as root, but neither runuser nor setpriv is available to drop privileges for initdb/pg_ctl');
}

function execArgv(argv: string[], cwd: string, detached = false): Promise<string> {
  const [cmd, ...args] = argv;
  if (cmd === undefined) return Promise.reject(new Error('empty command'));
  return new Promise((resolve, reject) => {
    // detached: the postmaster then lives in its own session, so a Ctrl-C on
    // the terminal doesn't kill it behind our back; stop() owns its lifetime.
    const child = spawn(cmd, args, { cwd, detached, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.on('error', (error) => reject(new Error(`${argv.join(' ')}: ${error.message}`)));
    child.on('close', (code, signal) => {
      if (code === 0) resolve(output);
      else reject(new Error(`${argv.join(' ')} exited with ${signal ?? `code ${code}`}\n${output}`.trimEnd()));
    });
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// pg_ctl -w already waits for readiness; this also proves that TCP (not just
// the Unix socket) is accepting connections from this process.
async function waitForConnection(url: string): Promise<void> {
  const deadline = Date.now() + CONNECT_DEADLINE_MS;
  let lastError: unknown;
  while (Date.now() < deadline) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
    try {
      await client.connect();
      await client.query('select 1');
      await client.end();
      return;
    } catch (error) {
      lastError = error;
      await client.end().catch(() => {});
      await sleep(200);
    }
  }
  throw new Error(`PostgreSQL did not accept connections within ${CONNECT_DEADLINE_MS} ms: ${String(lastError)}`);
}

function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

function logTail(logFile: string, lines = 40): string {
  try {
    return readFileSync(logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no pg.log)';
  }
}

export async function startPgCluster(opts: StartPgClusterOptions = {}): Promise<PgCluster> {
  const log = opts.log ?? (() => {});
  const bins = findPgBinaries();
  if (!bins) {
    throw new Error('PostgreSQL binaries (initdb, pg_ctl, postgres) not found on PATH or in /usr/lib/postgresql/*/bin');
  }
  const runAs = resolveRunAs();
  const wrap = (argv: string[]): string[] => (runAs ? runAs.wrap(argv) : argv);

  const baseDir = await mkdtemp(join(tmpdir(), 'gantry-pg-'));
  const dataDir = join(baseDir, 'data');
  const socketDir = join(baseDir, 'sock');
  const logFile = join(baseDir, 'pg.log');

  const stopArgv = wrap([bins.pg_ctl, '-D', dataDir, '-m', 'immediate', 'stop']);
  let stopped = false;
  // Synchronous last resort so a crashing or process.exit()-ing test run
  // doesn't leave a postmaster and its data dir behind.
  const onExit = (): void => {
    if (stopped) return;
    stopped = true;
    const [cmd, ...args] = stopArgv;
    try {
      execFileSync(cmd as string, args, { cwd: baseDir, stdio: 'ignore' });
    } catch {
      // already down
    }
    rmSync(baseDir, { recursive: true, force: true });
  };

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    process.off('exit', onExit);
    const started = Date.now();
    try {
      await execArgv(stopArgv, baseDir);
    } catch (error) {
      // Expected when the server died on its own or never started.
      log(`pg_ctl stop: ${String(error).split('\n')[0]}`);
    }
    await rm(baseDir, { recursive: true, force: true }).catch((error: unknown) => {
      log(`could not remove ${baseDir}: ${String(error)}`);
    });
    log(`PostgreSQL stopped in ${Date.now() - started} ms`);
  };

  process.on('exit', onExit);

  try {
    const started = Date.now();
    await mkdir(socketDir);
    if (runAs) {
      // Only baseDir and socketDir exist yet; initdb creates the rest as runAs.user.
      await chown(baseDir, runAs.uid, runAs.gid);
      await chown(socketDir, runAs.uid, runAs.gid);
      await assertUsableBy(runAs, baseDir, wrap);
    }

    log(`initdb (${bins.initdb}) in ${dataDir}${runAs ? ` as ${runAs.user}` : ''}`);
    await execArgv(
      wrap([bins.initdb, '-D', dataDir, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8', '--locale=C']),
      baseDir,
    );

    const port = await freePort();
    // pg_ctl hands -o to /bin/sh when it launches the postmaster, so the one
    // path in it (from TMPDIR, which may contain anything) is shell-quoted.
    const serverOptions = [
      `-p ${port}`,
      `-k ${shellQuote(socketDir)}`,
      '-c listen_addresses=127.0.0.1',
      '-c fsync=off',
      '-c synchronous_commit=off',
      '-c full_page_writes=off',
      '-c max_connections=300',
    ].join(' ');
    log(`pg_ctl start on 127.0.0.1:${port}`);
    await execArgv(
      wrap([bins.pg_ctl, '-w', '-t', PG_CTL_WAIT_SECONDS, '-D', dataDir, '-l', logFile, '-o', serverOptions, 'start']),
      baseDir,
      true,
    );

    const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
    await waitForConnection(url);
    log(`PostgreSQL ready at ${url} in ${Date.now() - started} ms`);
    return { url, stop };
  } catch (error) {
    const tail = logTail(logFile);
    await stop();
    const message = error instanceof Error ? error.message : String(error);
    throw new Error(`could not start a throwaway PostgreSQL cluster: ${message}\n--- pg.log (tail) ---\n${tail}`, {
      cause: error,
    });
  }
}

// Fails early (and readably) if TMPDIR is somewhere the unprivileged user
// cannot reach, e.g. under /root.
async function assertUsableBy(runAs: RunAs, dir: string, wrap: (argv: string[]) => string[]): Promise<void> {
  try {
    await execArgv(wrap(['test', '-w', dir]), '/');
  } catch {
    throw new Error(
      `${dir} is not writable by user "${runAs.user}"; point TMPDIR at a directory it can reach (e.g. /tmp)`,
    );
  }
}
