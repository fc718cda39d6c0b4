// N real `gantry web` processes that share one PostgreSQL database, one data
// folder and one secret key, behind nginx (round robin): the scale-out
// deployment the README describes. The first administrator and its token are
// made with the CLI, as an operator would.
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './free-port.ts';
import { GANTRY } from './gantry-process.ts';
import { startNginx } from './nginx.ts';
import { TEST_PASSWORD_HASH_COST } from './server.ts';
import type { NginxProxy } from './nginx.ts';

const run = promisify(execFile);
const STOP_DEADLINE_MS = 20_000;
/** Starting through tsx and migrating can take long on a busy 2-core machine. */
const START_DEADLINE_MS = 120_000;
const OUTPUT_LIMIT = 200_000;

export const FLEET_ADMIN = { name: 'root', password: 'fleet-root-p4ss' } as const;

export interface FleetProcess {
  /** host:port as nginx's access log names it. */
  address: string;
  /** Direct URL of this process (bypassing nginx). */
  url: string;
  child: ChildProcess;
  /** What the process wrote to stdout and stderr (JSON log lines), capped. */
  output(): string;
}

export interface GantryFleet {
  /** The nginx URL every client should use (also GANTRY_ROOT_URL). */
  url: string;
  processes: FleetProcess[];
  nginx: NginxProxy;
  dataDir: string;
  /** A token with the `all` scope of the site administrator FLEET_ADMIN. */
  adminToken: string;
  /** Every process's output, for failure messages. */
  output(): string;
  stop(): Promise<void>;
}

export interface StartFleetOptions {
  processes: number;
  /** postgres://… of the database the processes share. */
  databaseUrl: string;
  /** More environment for every process (e.g. GANTRY_WEBHOOK_ALLOWED_HOSTS). */
  env?: Record<string, string>;
}

/** Resolves once `url` answers /api/healthz with 200; rejects if the process exits or the deadline passes. */
async function waitForHealthy(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + START_DEADLINE_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`gantry web at ${url} exited early (${child.exitCode})`);
    try {
      if ((await fetch(`${url}/api/healthz`)).status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`gantry web at ${url} did not answer /api/healthz within ${START_DEADLINE_MS / 1000} s`);
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  // SIGTERM: Gantry finishes in-flight requests and its workers, then exits.
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_DEADLINE_MS);
  await exited(child);
  clearTimeout(timer);
}

export async function startGantryFleet(options: StartFleetOptions): Promise<GantryFleet> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-fleet-'));
  // nginx's port goes into GANTRY_ROOT_URL, so every port is chosen first.
  const nginxPort = await freePort();
  const url = `http://127.0.0.1:${nginxPort}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    GANTRY_DATA_DIR: dataDir,
    GANTRY_DATABASE_URL: options.databaseUrl,
    GANTRY_ROOT_URL: `${url}/`,
    GANTRY_HTTP_ADDR: '127.0.0.1',
    // One key for all: a secret one process encrypts, another decrypts for a job.
    GANTRY_SECRET_KEY: 'scale-out-fleet-key-0123456789abcdef',
    GANTRY_LOG_LEVEL: 'warn',
    GANTRY_PASSWORD_HASH_COST: TEST_PASSWORD_HASH_COST,
    ...options.env,
  };
  const processes: FleetProcess[] = [];
  let nginx: NginxProxy | null = null;
  const onExit = (): void => {
    for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  };
  process.on('exit', onExit);
  const output = (): string =>
    processes.map((p, i) => `--- gantry ${i} (${p.address}) ---\n${p.output().slice(-4000)}`).join('\n');

  const stop = async (): Promise<void> => {
    await nginx?.stop();
    await Promise.all(processes.map((p) => stopProcess(p.child)));
    process.off('exit', onExit);
    await fs.rm(dataDir, { recursive: true, force: true });
  };

  try {
    // Started together: their migrations at start must also be safe side by side.
    const ports = await Promise.all(Array.from({ length: options.processes }, () => freePort()));
    for (const port of ports) {
      const child = spawn(process.execPath, [GANTRY, 'web'], {
        env: { ...env, GANTRY_HTTP_PORT: String(port) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let text = '';
      const keep = (chunk: Buffer): void => {
        text += chunk.toString();
        if (text.length > OUTPUT_LIMIT) text = text.slice(-OUTPUT_LIMIT / 2);
      };
      child.stdout?.on('data', keep);
      child.stderr?.on('data', keep);
      processes.push({ address: `127.0.0.1:${port}`, url: `http://127.0.0.1:${port}`, child, output: () => text });
    }
    await Promise.all(processes.map((p) => waitForHealthy(p.url, p.child)));
    nginx = await startNginx({ port: nginxPort, upstreams: processes.map((p) => p.address) });

    const cliEnv = { ...env, GANTRY_HTTP_PORT: '0' };
    await run(
      process.execPath,
      [
        GANTRY,
        'admin',
        'user',
        'create',
        '--username',
        FLEET_ADMIN.name,
        '--password',
        FLEET_ADMIN.password,
        '--email',
        'root@fleet.invalid',
        '--admin',
        '--must-change-password=false',
      ],
      { env: cliEnv },
    );
    const { stdout } = await run(
      process.execPath,
      [
        GANTRY,
        'admin',
        'user',
        'generate-access-token',
        '--username',
        FLEET_ADMIN.name,
        '--token-name',
        'fleet',
        '--scopes',
        'all',
        '--raw',
      ],
      {
        env: cliEnv,
      },
    );
    return { url, processes, nginx, dataDir, adminToken: stdout.trim(), output, stop };
  } catch (error) {
    const text = output();
    await stop();
    throw new Error(
      `could not start ${options.processes} Gantry process(es) behind nginx: ${error instanceof Error ? error.message : String(error)}\n${text}`,
      { cause: error },
    );
  }
}
