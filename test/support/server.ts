// startTestServer(): a real Gantry on a free port, with a fresh data folder and
// a fresh database (SQLite file, or a scratch PostgreSQL database), plus the
// fixtures every API test needs: users, tokens, clients.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createClient, createConfig } from '@llamaduck/forgejo-ts/client';
import pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/deps.ts';
import { startServer } from '../../src/main.ts';
import type { RunningServer } from '../../src/main.ts';
import type { User } from '../../src/models/users.ts';
import { createScratchPgDatabase } from './pg-database.ts';
import { freePort } from './free-port.ts';

export type TestDialect = 'sqlite' | 'postgres';

/** The databases this run covers (set by scripts/run-tests.ts; SQLite alone when run directly). */
export function testDialects(): TestDialect[] {
  const listed = (process.env.GANTRY_TEST_DATABASES ?? 'sqlite').split(',').map((s) => s.trim());
  return listed.filter((d): d is TestDialect => d === 'sqlite' || d === 'postgres');
}

export type ForgejoClient = ReturnType<typeof createClient>;

export interface TestUser {
  user: User;
  name: string;
  password: string;
  /** A token with the `all` scope. */
  token: string;
  /** forgejo-ts client authenticated with `token`. */
  client: ForgejoClient;
}

export interface TestServer {
  url: string;
  apiUrl: string;
  rootUrl: string;
  dialect: TestDialect;
  dataDir: string;
  server: RunningServer;
  /** A site administrator created at start. */
  admin: TestUser;
  anonymous: ForgejoClient;
  createUser(name: string, options?: { admin?: boolean }): Promise<TestUser>;
  /** A token of `user` with the given scopes. */
  tokenFor(user: TestUser, scopes: string[]): Promise<string>;
  clientWith(authorization: string | null): ForgejoClient;
  /** Raw HTTP against /api/v1 (for what the client cannot express). */
  api(
    method: string,
    apiPath: string,
    options?: {
      token?: string;
      authorization?: string;
      body?: unknown;
      rawBody?: string;
      headers?: Record<string, string>;
    },
  ): Promise<ApiResponse>;
  stop(): Promise<void>;
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

let counter = 0;

/**
 * Password hashing cost (log2 N) of test servers: GANTRY_PASSWORD_HASH_COST
 * from the environment (scripts/run-tests.ts sets 14 for every test process
 * and the Gantry processes they spawn), else 14. Production defaults to 17.
 */
export const TEST_PASSWORD_HASH_COST = process.env.GANTRY_PASSWORD_HASH_COST ?? '14';

export interface TestServerOptions {
  /** Write the server's log (JSON lines) to this file instead of discarding it. */
  logFile?: string;
}

export async function startTestServer(
  dialect: TestDialect,
  env: Record<string, string> = {},
  options: TestServerOptions = {},
): Promise<TestServer> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-test-'));
  let scratch: { url: string; drop(): Promise<void> } | null = null;
  if (dialect === 'postgres') {
    const adminUrl = process.env.GANTRY_TEST_PG_URL;
    if (!adminUrl) throw new Error('GANTRY_TEST_PG_URL is not set: run the tests through `npm test`');
    scratch = await createScratchPgDatabase(adminUrl);
  }
  // The root URL must name the real port, so the port is chosen before start.
  const port = await freePort();
  const config = loadConfig({
    GANTRY_DATA_DIR: dataDir,
    GANTRY_HTTP_ADDR: '127.0.0.1',
    GANTRY_HTTP_PORT: String(port),
    GANTRY_ROOT_URL: `http://127.0.0.1:${port}/`,
    GANTRY_LOG_LEVEL: process.env.GANTRY_TEST_LOG_LEVEL ?? 'silent',
    // The lowest password cost (N=2^14, not the default 2^17): tests create and
    // sign in many users on small machines. See TEST_PASSWORD_HASH_COST.
    GANTRY_PASSWORD_HASH_COST: TEST_PASSWORD_HASH_COST,
    ...(scratch ? { GANTRY_DATABASE_URL: scratch.url } : {}),
    ...env,
  });
  const server = await startServer(
    config,
    options.logFile ? { logger: createLogger(config, pino.destination({ dest: options.logFile, sync: true })) } : {},
  );
  const rootUrl = config.rootUrl;
  const apiUrl = `${server.url}/api/v1`;

  const clientWith = (authorization: string | null): ForgejoClient =>
    createClient(createConfig({ baseURL: apiUrl, headers: authorization ? { Authorization: authorization } : {} }));

  const tokenFor = async (user: TestUser, scopes: string[]): Promise<string> => {
    counter += 1;
    const created = await server.deps.services.accessTokens.create(
      user.user,
      `t${counter}-${scopes.join('_').replace(/[^a-z_-]/g, '')}`,
      scopes,
    );
    return created.secret;
  };

  const createUser = async (name: string, options: { admin?: boolean } = {}): Promise<TestUser> => {
    const password = `pw-${name}-12345`;
    const user = await server.deps.services.accounts.createUser({
      username: name,
      email: `${name}@example.com`,
      password,
      isAdmin: options.admin ?? false,
      mustChangePassword: false,
    });
    const partial = { user, name, password, token: '', client: clientWith(null) };
    const token = await tokenFor(partial, ['all']);
    return { ...partial, token, client: clientWith(`token ${token}`) };
  };

  const api: TestServer['api'] = async (method, apiPath, options = {}) => {
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (options.token) headers.authorization = `token ${options.token}`;
    if (options.authorization) headers.authorization = options.authorization;
    let body: string | undefined = options.rawBody;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const response = await fetch(`${apiUrl}${apiPath}`, { method, headers, body });
    const text = await response.text();
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    return { status: response.status, headers: response.headers, text, json };
  };

  const admin = await createUser('root', { admin: true });
  return {
    url: server.url,
    apiUrl,
    rootUrl,
    dialect,
    dataDir,
    server,
    admin,
    anonymous: clientWith(null),
    createUser,
    tokenFor,
    clientWith,
    api,
    stop: async () => {
      await server.stop();
      if (scratch) await scratch.drop();
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}

export function basicAuth(name: string, password: string): string {
  return `Basic ${Buffer.from(`${name}:${password}`).toString('base64')}`;
}
