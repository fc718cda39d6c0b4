// A second `gantry web` process beside a test server: the same data folder
// and database, so tests can show what two processes of one deployment do
// together (races for claims, groups, reports through either process).
// A process of its own, not a second server in the test's process: two
// SQLite servers in one process would block each other's event loop on the
// database's file lock.
import { freePort } from './free-port.ts';
import { GantryChild } from './gantry-child.ts';
import type { TestServer } from './server.ts';

export interface SecondProcessOptions {
  /** Settings beside the shared ones (e.g. the test server's GANTRY_SECRET_KEY). */
  env?: Record<string, string>;
  /** Its own URL as GANTRY_ROOT_URL, instead of the test server's. */
  ownRootUrl?: boolean;
}

/** Starts the second process; the caller stops it (`stop()`) before the test server. */
export async function startSecondProcess(s: TestServer, options: SecondProcessOptions = {}): Promise<GantryChild> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    GANTRY_DATA_DIR: s.dataDir,
    GANTRY_HTTP_ADDR: '127.0.0.1',
    GANTRY_HTTP_PORT: String(port),
    GANTRY_ROOT_URL: options.ownRootUrl ? `${url}/` : s.rootUrl,
    GANTRY_LOG_LEVEL: 'warn',
    ...options.env,
  };
  // The test server's database, whatever the environment says.
  const databaseUrl = s.server.deps.config.databaseUrl;
  if (databaseUrl) env.GANTRY_DATABASE_URL = databaseUrl;
  else delete env.GANTRY_DATABASE_URL;
  const child = new GantryChild(url, env);
  await child.start();
  return child;
}
