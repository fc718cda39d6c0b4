// The composition root: everything the program needs, built once from the
// configuration and passed down. Nothing below reads the environment.
import { readFileSync } from 'node:fs';
import { sql } from 'kysely';
import pino from 'pino';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { systemClock } from './modules/clock.ts';
import type { Clock } from './modules/clock.ts';
import { openKeyRing } from './modules/crypto/key-ring.ts';
import { REDACTED, serializeRequest } from './modules/log-redaction.ts';
import { migrateToLatest, openDatabase } from './models/database.ts';
import type { DatabaseHandle } from './models/database.ts';
import { createServices } from './services/index.ts';
import type { Services } from './services/index.ts';

export interface Deps {
  config: Config;
  version: string;
  logger: Logger;
  clock: Clock;
  database: DatabaseHandle;
  services: Services;
  checkDatabase(): Promise<void>;
  close(): Promise<void>;
}

export const GANTRY_VERSION: string = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export interface CreateDepsOptions {
  clock?: Clock;
  logger?: Logger;
  /** Run pending migrations first (the server does; `gantry migrate` does it explicitly). */
  migrate?: boolean;
}

// Headers that carry credentials never reach the log. The request serializer
// logs no headers at all; this covers anything that logs them anyway.
const REDACT = [
  'req.headers.authorization',
  'req.headers["proxy-authorization"]',
  'req.headers.cookie',
  'req.headers["x-runner-token"]',
  'req.headers["x-runner-request-key"]',
  'req.headers["x-forgejo-otp"]',
  'req.headers["x-gitea-otp"]',
  'req.headers.sudo',
  'res.headers["set-cookie"]',
];

/**
 * The process logger: JSON lines to stdout, or to `destination` (tests capture
 * it in a file). Fastify adds the request id (`reqId`) to every line it logs
 * for a request; `req` is serialized without credentials (log-redaction.ts).
 */
export function createLogger(config: Config, destination?: pino.DestinationStream): Logger {
  const options = { level: config.logLevel, redact: { paths: REDACT, censor: REDACTED }, serializers: { req: serializeRequest } };
  return destination ? pino(options, destination) : pino(options);
}

export async function createDeps(config: Config, options: CreateDepsOptions = {}): Promise<Deps> {
  const logger = options.logger ?? createLogger(config);
  const clock = options.clock ?? systemClock;
  const database = openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    onConnectionError: (error) => logger.warn({ err: error }, 'database connection dropped; the pool reconnects'),
  });
  try {
    if (options.migrate !== false) {
      const report = await migrateToLatest(database.db);
      if (report.applied.length > 0) logger.info({ migrations: report.applied }, 'applied database migrations');
    }
    const { ring } = openKeyRing(
      { dataDir: config.dataDir, configuredKey: config.secretKey, previousKeys: config.secretKeyPrevious },
      { onRefreshError: (error) => logger.warn({ err: error }, 'could not re-read the secret keys; the keys in memory stay in use') },
    );
    const services = createServices(config, database.db, clock, ring, logger);
    await services.gitRepositories.prepare();
    return {
      config,
      version: GANTRY_VERSION,
      logger,
      clock,
      database,
      services,
      checkDatabase: async () => {
        await sql`select 1`.execute(database.db);
      },
      close: async () => {
        await services.gitRepositories.close();
        await database.destroy();
      },
    };
  } catch (error) {
    await database.destroy();
    throw error;
  }
}
