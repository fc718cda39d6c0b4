// A real Gantry, in this process, on a free loopback port with a throwaway data
// folder (and the given PostgreSQL database, if any). stop() removes the folder.
import { rmSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../src/config.ts';
import { startServer } from '../../src/main.ts';
import type { RunningServer } from '../../src/main.ts';
import { freePort } from '../../test/support/free-port.ts';

export interface GantryServer {
  url: string;
  server: RunningServer;
  deps: RunningServer['deps'];
  dataDir: string;
  stop(): Promise<void>;
}

export interface StartGantryOptions {
  /** postgres://… of a database to use; null or absent: SQLite in the data folder. */
  databaseUrl?: string | null;
  logLevel?: string;
  /** More GANTRY_* settings, e.g. GANTRY_WEBHOOK_ALLOWED_HOSTS. */
  env?: Readonly<Record<string, string>>;
}

export async function startGantryServer(options: StartGantryOptions = {}): Promise<GantryServer> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-bench-'));
  // Last resort when the run is interrupted before stop().
  const removeOnExit = (): void => rmSync(dataDir, { recursive: true, force: true });
  process.on('exit', removeOnExit);
  const cleanup = async (): Promise<void> => {
    process.off('exit', removeOnExit);
    await fs.rm(dataDir, { recursive: true, force: true });
  };

  let server: RunningServer;
  try {
    // The root URL names the real port, so the port is chosen before start.
    const port = await freePort();
    const config = loadConfig({
      GANTRY_DATA_DIR: dataDir,
      GANTRY_HTTP_ADDR: '127.0.0.1',
      GANTRY_HTTP_PORT: String(port),
      GANTRY_ROOT_URL: `http://127.0.0.1:${port}/`,
      GANTRY_LOG_LEVEL: options.logLevel ?? 'warn',
      ...(options.databaseUrl ? { GANTRY_DATABASE_URL: options.databaseUrl } : {}),
      ...options.env,
    });
    server = await startServer(config);
  } catch (error) {
    await cleanup();
    throw error;
  }

  let stopping: Promise<void> | null = null;
  return {
    url: server.url,
    server,
    deps: server.deps,
    dataDir,
    stop(): Promise<void> {
      stopping ??= (async () => {
        try {
          await server.stop();
        } finally {
          await cleanup();
        }
      })();
      return stopping;
    },
  };
}
