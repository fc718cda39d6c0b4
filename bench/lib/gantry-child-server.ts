// A real `gantry web` in a child process (the production build, which
// bench/run.ts builds once per run, as `npm start` runs it), on a free loopback port with a
// throwaway data folder (and the given PostgreSQL database, if any), for
// scenarios whose clients must not share a process (and its one thread) with
// the server they measure. `seed` runs against the database and data folder
// before the process starts (createDeps in this process, closed again), so
// what it makes (users, tokens, repositories) is there when the server is.
// GANTRY_BENCH_CPU_PROF=<folder>: the child writes a V8 CPU profile there
// when it stops (node --cpu-prof). GANTRY_BENCH_NODE_ARGS: more options for
// the child's node, space-separated (e.g. `--log-deopt --log-code
// --logfile=<file>` to see what V8 optimizes while a scenario runs).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { createDeps } from '../../src/deps.ts';
import type { Deps } from '../../src/deps.ts';
import { openDatabase } from '../../src/models/database.ts';
import type { DatabaseHandle } from '../../src/models/database.ts';
import { freePort } from '../../test/support/free-port.ts';
import { GantryChild } from '../../test/support/gantry-child.ts';
import type { ScenarioContext } from './scenario.ts';

export interface GantryChildServer<T> {
  url: string;
  /** The child's process id (for /proc readings). */
  pid: number;
  /** What `seed` returned. */
  seeded: T;
  /** The server's database, opened in this process (for counts before and after a measurement); close it. */
  openDatabase(): DatabaseHandle;
  /** A graceful stop (SIGTERM), so a CPU profile is written; throws when it does not exit 0. */
  stop(): Promise<void>;
}

export async function startGantryChild<T>(
  ctx: ScenarioContext,
  seed: (deps: Deps) => Promise<T>,
  env: Readonly<Record<string, string>> = {},
  /** More options for the child's node (after GANTRY_BENCH_CPU_PROF's and GANTRY_BENCH_NODE_ARGS'). */
  nodeArgs: readonly string[] = [],
): Promise<GantryChildServer<T>> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-bench-child-'));
  ctx.defer(() => fs.rm(dataDir, { recursive: true, force: true }));
  const databaseUrl = await ctx.databaseUrl();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const settings: Record<string, string> = {
    GANTRY_DATA_DIR: dataDir,
    GANTRY_HTTP_ADDR: '127.0.0.1',
    GANTRY_HTTP_PORT: String(port),
    GANTRY_ROOT_URL: `${url}/`,
    GANTRY_LOG_LEVEL: 'warn',
    ...(databaseUrl ? { GANTRY_DATABASE_URL: databaseUrl } : {}),
    ...env,
  };
  const deps = await createDeps(loadConfig(settings), { logger: pino({ level: 'silent' }) });
  let seeded: T;
  try {
    seeded = await seed(deps);
  } finally {
    await deps.close();
  }
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...settings };
  if (!databaseUrl) delete childEnv.GANTRY_DATABASE_URL;
  const profileDir = process.env.GANTRY_BENCH_CPU_PROF?.trim();
  const child = new GantryChild(url, childEnv, [
    ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(profileDir)}`] : []),
    ...(process.env.GANTRY_BENCH_NODE_ARGS ?? '').split(/\s+/).filter(Boolean),
    ...nodeArgs,
  ]);
  ctx.defer(() => child.kill9());
  await child.start();
  const pid = child.pid;
  if (pid === undefined) throw new Error('gantry web has no pid');
  if (profileDir) ctx.log(`gantry web (pid ${pid}) writes its CPU profile to ${profileDir} when it stops`);
  return {
    url,
    pid,
    seeded,
    openDatabase: () => openDatabase({ databaseUrl, dataDir, maxConnections: 1 }),
    async stop() {
      const code = await child.stop();
      if (code !== 0) throw new Error(`gantry web exited with ${code} on SIGTERM:\n${child.tail()}`);
    },
  };
}
