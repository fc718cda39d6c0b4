// One description of every setting: parsed once at start, validated, frozen and
// passed down. The same table generates the configuration reference (README).
import { isIP } from 'node:net';
import path from 'node:path';
import {
  DEFAULT_PASSWORD_HASH_COST,
  MAX_PASSWORD_HASH_COST,
  MIN_PASSWORD_HASH_COST,
} from './modules/crypto/password.ts';

export interface Config {
  /** Folder for the SQLite database, git repositories, logs and the generated key. */
  readonly dataDir: string;
  readonly httpAddr: string;
  readonly httpPort: number;
  /** Public URL with a trailing slash; used in html_url, clone_url and error bodies. */
  readonly rootUrl: string;
  /** Unset: SQLite at <dataDir>/gantry.db. */
  readonly databaseUrl: string | null;
  /** GANTRY_DATABASE_MAX_CONNECTIONS: the PostgreSQL pool's size. */
  readonly databaseMaxConnections: number;
  /** GANTRY_DATABASE_PREPARED_STATEMENTS: statements each PostgreSQL connection prepares at most (0: none). */
  readonly databasePreparedStatements: number;
  /** Unset: generated on first start and kept in <dataDir>/secret.key (rotated keys in <dataDir>/secret-keys/). */
  readonly secretKey: string | null;
  /** Older keys, for decrypting values not yet re-encrypted by `gantry admin rotate-secret-key`. */
  readonly secretKeyPrevious: readonly string[];
  readonly webhookAllowedHosts: string;
  /** Whole-attempt deadline of one webhook delivery, in milliseconds. */
  readonly webhookDeliverTimeoutMs: number;
  /** Attempts per webhook delivery, the first included (1 = never retry). */
  readonly webhookMaxAttempts: number;
  /** Deliveries one process sends at the same time. */
  readonly webhookConcurrency: number;
  /** Finished deliveries older than this many days are deleted (0 keeps them forever). */
  readonly webhookRetentionDays: number;
  /** Unset: GET /metrics answers 404. Set: it answers to `Authorization: Bearer <token>`. */
  readonly metricsToken: string | null;
  /** log2 of scrypt's N for new password hashes (17: OWASP's minimum); lower only for tests. */
  readonly passwordHashCost: number;
  /** Failed password sign-ins of one account within 5 minutes that lock its password sign-in for 15 (0: no limit). */
  readonly loginMaxFailures: number;
  /** Requests per minute per client IP (0: unlimited). */
  readonly rateLimitPerIp: number;
  /** Requests per minute per access token, runner or task token (0: unlimited). */
  readonly rateLimitPerToken: number;
  /** Reverse proxies (addresses, CIDRs, `loopback`…) whose X-Forwarded-For names the client; empty: none. */
  readonly trustedProxies: readonly string[];
  /** Largest request head (request line and headers) in bytes (larger: 431). */
  readonly headerLimitBytes: number;
  /** API requests: the whole body must arrive within this many ms of the headers (else 408, connection closed). */
  readonly httpRequestTimeoutMs: number;
  /** Every request: the request line and headers must arrive within this many ms (else 408). */
  readonly httpHeadersTimeoutMs: number;
  /** An idle keep-alive connection is closed after this many ms. */
  readonly httpKeepAliveTimeoutMs: number;
  /** Open connections per process (0: unlimited); beyond it a new connection is closed at once. */
  readonly httpMaxConnections: number;
  /** Git smart HTTP and the runner protocol: ms a request body may go without a byte arriving. */
  readonly httpTransferIdleTimeoutMs: number;
  /** Git smart HTTP and the runner protocol: the whole body within this many ms (0: no bound). */
  readonly httpTransferTimeoutMs: number;
  /** Largest git push (pack bytes received) in bytes. */
  readonly gitMaxPushBytes: number;
  /** Largest log one Actions task may write, in bytes; lines beyond it are dropped. */
  readonly actionsLogMaxBytes: number;
  readonly actionsLogMaxRequestBytes: number;
  /** Largest workflow file read, in bytes; a larger one gives a failed run (push) or a 400 (dispatch). */
  readonly actionsMaxWorkflowBytes: number;
  /** Most jobs one run may have, matrix legs counted one by one. */
  readonly actionsMaxJobsPerRun: number;
  /** Most bytes of workflow payload the jobs of one run may carry together. */
  readonly actionsMaxRunPayloadBytes: number;
  /**
   * Test seam (GANTRY_TEST_SCHEDULER_CLOCK), null in production: the
   * scheduler's clock runs `speed` times faster than real time from the
   * instant `anchorMs`, so a test sees minutes of cron ticks in seconds.
   */
  readonly testSchedulerClock: { readonly anchorMs: number; readonly speed: number } | null;
  /** Days an artifact is kept unless its upload asks for fewer or more (Forgejo's ARTIFACT_RETENTION_DAYS). */
  readonly artifactRetentionDays: number;
  /** Largest artifact in bytes. */
  readonly artifactMaxBytes: number;
  /** Most bytes the artifacts of one run may take together. */
  readonly artifactMaxRunBytes: number;
  /** Labels of the runner `gantry web` starts by itself; '' (the default): none. */
  readonly embeddedRunnerLabels: string;
  /** Jobs the embedded runner runs at the same time. */
  readonly embeddedRunnerCapacity: number;
  /** `gantry runner daemon`: ms running jobs may go on after SIGTERM before they are cancelled. */
  readonly runnerShutdownTimeoutMs: number;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  readonly bodyLimitBytes: number;
  readonly defaultPagingNum: number;
  readonly maxResponseItems: number;
}

type Env = Record<string, string | undefined>;

export class ConfigError extends Error {
  constructor(
    readonly key: string,
    detail: string,
  ) {
    super(`invalid configuration: ${key}: ${detail}`);
  }
}

interface Setting {
  key: string;
  description: string;
  default: string;
}

/** The documented settings, in the order the configuration reference lists them. */
export const SETTINGS: readonly Setting[] = [
  {
    key: 'GANTRY_DATA_DIR',
    description: 'Data folder (SQLite database, git repositories, logs, generated key).',
    default: './data',
  },
  { key: 'GANTRY_HTTP_ADDR', description: 'Address the HTTP server listens on.', default: '0.0.0.0' },
  { key: 'GANTRY_HTTP_PORT', description: 'TCP port of the HTTP server (0 picks a free one).', default: '3000' },
  {
    key: 'GANTRY_ROOT_URL',
    description: 'Public URL of this server, used in links and clone URLs.',
    default: 'http://localhost:<port>/',
  },
  {
    key: 'GANTRY_DATABASE_URL',
    description: 'Unset: SQLite at <data>/gantry.db. postgres://user:pass@host:port/db: PostgreSQL.',
    default: '',
  },
  {
    key: 'GANTRY_DATABASE_MAX_CONNECTIONS',
    description:
      "PostgreSQL connections each process keeps at most (a runner fleet's claims and reports run on them in parallel). More helps only when the database server has the cores to run them (on 2 shared cores 20 claimed fewer jobs per second than 10); mind its max_connections across processes. Ignored on SQLite.",
    default: '10',
  },
  {
    key: 'GANTRY_DATABASE_PREPARED_STATEMENTS',
    description:
      'Statements each PostgreSQL connection prepares at most: a statement run a few times is prepared once per connection, and the server parses and plans it no more. 0 turns this off (behind a pooler in transaction mode that cannot keep prepared statements, e.g. pgbouncer before 1.21 or with max_prepared_statements = 0). Ignored on SQLite.',
    default: '200',
  },
  {
    key: 'GANTRY_SECRET_KEY',
    description:
      'Key that encrypts secrets at rest (any string of 32+ characters). Unset: generated into <data>/secret.key (mode 0600); `gantry admin rotate-secret-key` adds keys in <data>/secret-keys/.',
    default: '',
  },
  {
    key: 'GANTRY_SECRET_KEY_PREVIOUS',
    description:
      'Comma-separated older keys, used only to decrypt values stored before GANTRY_SECRET_KEY changed; `gantry admin rotate-secret-key` re-encrypts them, then they can be removed.',
    default: '',
  },
  {
    key: 'GANTRY_WEBHOOK_ALLOWED_HOSTS',
    description: 'Hosts webhooks may be delivered to (external, private, loopback, *, CIDRs, host globs).',
    default: 'external',
  },
  {
    key: 'GANTRY_WEBHOOK_DELIVER_TIMEOUT',
    description: 'Seconds one webhook delivery attempt may take (connect, send, response).',
    default: '5',
  },
  {
    key: 'GANTRY_WEBHOOK_MAX_ATTEMPTS',
    description:
      'Attempts per webhook delivery, the first included; retries back off exponentially (8: about 19 hours).',
    default: '8',
  },
  {
    key: 'GANTRY_WEBHOOK_CONCURRENCY',
    description: 'Webhook deliveries each Gantry process sends at the same time.',
    default: '8',
  },
  {
    key: 'GANTRY_WEBHOOK_RETENTION_DAYS',
    description:
      'Finished webhook deliveries (and their attempts) older than this many days are deleted; 0 keeps them forever.',
    default: '7',
  },
  {
    key: 'GANTRY_METRICS_TOKEN',
    description:
      'Enables `GET /metrics` (Prometheus text format), answered only to `Authorization: Bearer <token>`. Unset: /metrics answers 404.',
    default: '',
  },
  {
    key: 'GANTRY_PASSWORD_HASH_COST',
    description:
      "Cost of password hashing: log2 of scrypt's N (r=8, p=1), 14 to 20; 17 is OWASP's minimum (about 128 MiB and 0.3–0.5 s of CPU per sign-in). Lower only for tests. Stored hashes below the cost are rehashed at the next successful sign-in.",
    default: '17',
  },
  {
    key: 'GANTRY_LOGIN_MAX_FAILURES',
    description:
      'Failed password sign-ins of one account (basic auth, on every route) within 5 minutes that lock its password sign-in for 15 minutes (429 with Retry-After; tokens still work); 0: no limit. Counted per process.',
    default: '10',
  },
  {
    key: 'GANTRY_RATE_LIMIT_PER_IP',
    description:
      'Requests per minute one client IP may make (429 with Retry-After beyond it); 0: unlimited. Counted per process.',
    default: '0',
  },
  {
    key: 'GANTRY_RATE_LIMIT_PER_TOKEN',
    description:
      'Requests per minute one access token, runner or task token may make (429 with Retry-After beyond it); 0: unlimited. Counted per process.',
    default: '0',
  },
  {
    key: 'GANTRY_TRUSTED_PROXIES',
    description:
      'Comma-separated addresses or CIDRs (or `loopback`, `linklocal`, `uniquelocal`) of reverse proxies in front of Gantry: a request from one of them is counted (rate limits) and logged under the client address its X-Forwarded-For names. Unset: the connecting address is the client, X-Forwarded-For is ignored.',
    default: '',
  },
  {
    key: 'GANTRY_HEADER_LIMIT',
    description: 'Largest request line plus headers in bytes (larger: 431).',
    default: '16384',
  },
  {
    key: 'GANTRY_HTTP_REQUEST_TIMEOUT',
    description:
      'Seconds an API request body may take to arrive after its headers (slower: 408 and the connection is closed). Git and the runner protocol use the two transfer settings instead.',
    default: '30',
  },
  {
    key: 'GANTRY_HTTP_HEADERS_TIMEOUT',
    description:
      'Seconds the request line and headers of any request may take to arrive, from the first byte (or from connecting) (slower: 408 and the connection is closed).',
    default: '20',
  },
  {
    key: 'GANTRY_HTTP_KEEPALIVE_TIMEOUT',
    description:
      "Seconds an idle keep-alive connection stays open; keep it above a reverse proxy's upstream keepalive_timeout, so the proxy closes idle connections first.",
    default: '75',
  },
  {
    key: 'GANTRY_HTTP_MAX_CONNECTIONS',
    description:
      'Open connections each process accepts (idle keep-alive and runner long polls included); a connection beyond it is closed at once, unanswered. 0: unlimited.',
    default: '4096',
  },
  {
    key: 'GANTRY_HTTP_TRANSFER_IDLE_TIMEOUT',
    description:
      'Git pushes and fetches and the runner protocol: seconds a request body may go without a byte arriving (then the connection is closed).',
    default: '60',
  },
  {
    key: 'GANTRY_HTTP_TRANSFER_TIMEOUT',
    description:
      'Git pushes and fetches and the runner protocol: seconds the whole request body may take (then the connection is closed); 0: no bound.',
    default: '3600',
  },
  {
    key: 'GANTRY_GIT_MAX_PUSH_SIZE',
    description: 'Largest git push in bytes (larger: refused, nothing is written).',
    default: '2147483648',
  },
  {
    key: 'GANTRY_ACTIONS_LOG_MAX_SIZE',
    description: 'Largest log of one Actions task in bytes; later lines are dropped and a notice is appended.',
    default: '134217728',
  },
  {
    key: 'GANTRY_ACTIONS_LOG_MAX_REQUEST_SIZE',
    description:
      "Most bytes (after gzip) read from one runner's UpdateLog; its rows are stored in batches as they arrive, so memory stays flat. Past it, the rows read so far are stored and acknowledged and the runner sends the rest in its next call.",
    default: '268435456',
  },
  {
    key: 'GANTRY_ACTIONS_MAX_WORKFLOW_SIZE',
    description:
      'Largest workflow file in bytes; a push of a larger one gets a failed run that says so, a dispatch of it a 400.',
    default: '1048576',
  },
  {
    key: 'GANTRY_ACTIONS_MAX_JOBS_PER_RUN',
    description:
      'Most jobs one run may have, each matrix combination counted (at most 10000); a workflow that expands to more gets a failed run (push) or a 400 (dispatch).',
    default: '256',
  },
  {
    key: 'GANTRY_ACTIONS_MAX_RUN_PAYLOAD_SIZE',
    description:
      'Most bytes of workflow payload (the YAML each job hands its runner) all jobs of one run may carry together; beyond it: a failed run (push) or a 400 (dispatch).',
    default: '16777216',
  },
  {
    key: 'GANTRY_TEST_SCHEDULER_CLOCK',
    description:
      'Tests only, never in production: `<anchor Unix ms>:<speed>` makes the schedule clock run `speed` (1 to 3600) times faster from that instant (every process of a test gets the same value).',
    default: '',
  },
  {
    key: 'GANTRY_ARTIFACT_RETENTION_DAYS',
    description:
      "Days an Actions artifact is kept when its upload names no retention (an upload's own `retention-days` wins); then its files are deleted and it shows as expired.",
    default: '90',
  },
  {
    key: 'GANTRY_ARTIFACT_MAX_SIZE',
    description:
      'Largest Actions artifact in bytes, as uploaded (a v4 zip; the files of a v3 artifact as sent, gzip-packed or not); bytes beyond it are refused with 413 (v3: 403).',
    default: '10737418240',
  },
  {
    key: 'GANTRY_ARTIFACT_MAX_RUN_SIZE',
    description:
      'Most bytes the artifacts of one workflow run may take together; beyond it uploads are refused with 413 (v3: 403).',
    default: '53687091200',
  },
  {
    key: 'GANTRY_EMBEDDED_RUNNER_LABELS',
    description:
      'Labels (`name` or `name:host`, comma-separated) of a runner that `gantry web` starts by itself, registered for the whole instance; it runs jobs on this host as the user Gantry runs as (see Embedded runner). Unset: no embedded runner.',
    default: '',
  },
  {
    key: 'GANTRY_EMBEDDED_RUNNER_CAPACITY',
    description: 'Jobs the embedded runner runs at the same time.',
    default: '1',
  },
  {
    key: 'GANTRY_RUNNER_SHUTDOWN_TIMEOUT',
    description:
      'Seconds `gantry runner daemon` lets running jobs go on after SIGTERM or SIGINT before it cancels them (kills their steps, runs `if: always()` steps) and reports them; 0 cancels at once (shutdown_timeout of forgejo-runner).',
    default: '0',
  },
  { key: 'GANTRY_LOG_LEVEL', description: 'fatal, error, warn, info, debug, trace or silent.', default: 'info' },
  {
    key: 'GANTRY_BODY_LIMIT',
    description: 'Largest accepted request body in bytes (larger: 413).',
    default: '1048576',
  },
  { key: 'GANTRY_DEFAULT_PAGING_NUM', description: 'Page size of lists when no limit is given.', default: '30' },
  { key: 'GANTRY_MAX_RESPONSE_ITEMS', description: 'Largest page size a client may ask for.', default: '50' },
];

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

function read(env: Env, key: string): string | undefined {
  const value = env[key];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function readInt(env: Env, key: string, fallback: number, min: number, max: number): number {
  const raw = read(env, key);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(key, `must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(key, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

const PROXY_RANGE_NAMES: ReadonlySet<string> = new Set(['loopback', 'linklocal', 'uniquelocal']);

/** What Fastify's trustProxy (proxy-addr) accepts: addresses, CIDRs, and its named ranges. */
function parseTrustedProxies(raw: string | undefined): readonly string[] {
  const entries = (raw ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  for (const entry of entries) {
    const [address = '', prefix, ...rest] = entry.split('/');
    const family = isIP(address);
    const maxPrefix = family === 6 ? 128 : 32;
    const valid =
      PROXY_RANGE_NAMES.has(entry) ||
      (family !== 0 &&
        rest.length === 0 &&
        (prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= maxPrefix)));
    if (!valid)
      throw new ConfigError(
        'GANTRY_TRUSTED_PROXIES',
        `"${entry}" is not an IP address, a CIDR (10.0.0.0/8) or loopback, linklocal, uniquelocal`,
      );
  }
  return Object.freeze(entries);
}

function parseRootUrl(raw: string | undefined, port: number): string {
  const value = raw ?? `http://localhost:${port}/`;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError('GANTRY_ROOT_URL', `must be an absolute http(s) URL, got "${value}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError('GANTRY_ROOT_URL', `must use http or https, got "${url.protocol}"`);
  }
  url.search = '';
  url.hash = '';
  return url.href.endsWith('/') ? url.href : `${url.href}/`;
}

function parseTestSchedulerClock(raw: string | undefined): Config['testSchedulerClock'] {
  if (raw === undefined) return null;
  const match = /^(\d+):(\d+)$/.exec(raw);
  const speed = Number(match?.[2]);
  if (match === null || speed < 1 || speed > 3600)
    throw new ConfigError('GANTRY_TEST_SCHEDULER_CLOCK', 'must be <anchor Unix ms>:<speed 1-3600>');
  return Object.freeze({ anchorMs: Number(match[1]), speed });
}

function parseDatabaseUrl(raw: string | undefined): string | null {
  if (raw === undefined) return null;
  if (!/^postgres(ql)?:\/\//.test(raw)) {
    throw new ConfigError('GANTRY_DATABASE_URL', 'must start with postgres:// (leave it unset for SQLite)');
  }
  try {
    new URL(raw);
  } catch {
    throw new ConfigError('GANTRY_DATABASE_URL', 'is not a valid URL');
  }
  return raw;
}

/** Reads the environment (flags are merged into it by the CLI) once, failing fast with the key at fault. */
export function loadConfig(env: Env = process.env, cwd: string = process.cwd()): Readonly<Config> {
  const httpPort = readInt(env, 'GANTRY_HTTP_PORT', 3000, 0, 65535);
  const secretKey = read(env, 'GANTRY_SECRET_KEY') ?? null;
  if (secretKey !== null && secretKey.length < 32) {
    throw new ConfigError('GANTRY_SECRET_KEY', 'must be at least 32 characters (e.g. `openssl rand -base64 32`)');
  }
  const secretKeyPrevious = (read(env, 'GANTRY_SECRET_KEY_PREVIOUS') ?? '')
    .split(',')
    .map((k) => k.trim())
    .filter((k) => k !== '');
  if (secretKeyPrevious.some((k) => k.length < 32)) {
    throw new ConfigError('GANTRY_SECRET_KEY_PREVIOUS', 'every key must be at least 32 characters');
  }
  const logLevel = (read(env, 'GANTRY_LOG_LEVEL') ?? 'info') as Config['logLevel'];
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError('GANTRY_LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);
  }
  const defaultPagingNum = readInt(env, 'GANTRY_DEFAULT_PAGING_NUM', 30, 1, 10_000);
  const maxResponseItems = readInt(env, 'GANTRY_MAX_RESPONSE_ITEMS', 50, 1, 10_000);
  if (defaultPagingNum > maxResponseItems) {
    throw new ConfigError(
      'GANTRY_DEFAULT_PAGING_NUM',
      `must not exceed GANTRY_MAX_RESPONSE_ITEMS (${maxResponseItems})`,
    );
  }
  return Object.freeze({
    dataDir: path.resolve(cwd, read(env, 'GANTRY_DATA_DIR') ?? './data'),
    httpAddr: read(env, 'GANTRY_HTTP_ADDR') ?? '0.0.0.0',
    httpPort,
    rootUrl: parseRootUrl(read(env, 'GANTRY_ROOT_URL'), httpPort),
    databaseUrl: parseDatabaseUrl(read(env, 'GANTRY_DATABASE_URL')),
    databaseMaxConnections: readInt(env, 'GANTRY_DATABASE_MAX_CONNECTIONS', 10, 1, 1000),
    databasePreparedStatements: readInt(env, 'GANTRY_DATABASE_PREPARED_STATEMENTS', 200, 0, 10_000),
    secretKey,
    secretKeyPrevious: Object.freeze(secretKeyPrevious),
    webhookAllowedHosts: read(env, 'GANTRY_WEBHOOK_ALLOWED_HOSTS') ?? 'external',
    webhookDeliverTimeoutMs: readInt(env, 'GANTRY_WEBHOOK_DELIVER_TIMEOUT', 5, 1, 300) * 1000,
    webhookMaxAttempts: readInt(env, 'GANTRY_WEBHOOK_MAX_ATTEMPTS', 8, 1, 20),
    webhookConcurrency: readInt(env, 'GANTRY_WEBHOOK_CONCURRENCY', 8, 1, 256),
    webhookRetentionDays: readInt(env, 'GANTRY_WEBHOOK_RETENTION_DAYS', 7, 0, 3650),
    metricsToken: read(env, 'GANTRY_METRICS_TOKEN') ?? null,
    passwordHashCost: readInt(
      env,
      'GANTRY_PASSWORD_HASH_COST',
      DEFAULT_PASSWORD_HASH_COST,
      MIN_PASSWORD_HASH_COST,
      MAX_PASSWORD_HASH_COST,
    ),
    loginMaxFailures: readInt(env, 'GANTRY_LOGIN_MAX_FAILURES', 10, 0, 1_000_000),
    rateLimitPerIp: readInt(env, 'GANTRY_RATE_LIMIT_PER_IP', 0, 0, 10_000_000),
    rateLimitPerToken: readInt(env, 'GANTRY_RATE_LIMIT_PER_TOKEN', 0, 0, 10_000_000),
    trustedProxies: parseTrustedProxies(read(env, 'GANTRY_TRUSTED_PROXIES')),
    headerLimitBytes: readInt(env, 'GANTRY_HEADER_LIMIT', 16 * 1024, 1024, 1024 * 1024),
    httpRequestTimeoutMs: readInt(env, 'GANTRY_HTTP_REQUEST_TIMEOUT', 30, 1, 3600) * 1000,
    httpHeadersTimeoutMs: readInt(env, 'GANTRY_HTTP_HEADERS_TIMEOUT', 20, 1, 600) * 1000,
    httpKeepAliveTimeoutMs: readInt(env, 'GANTRY_HTTP_KEEPALIVE_TIMEOUT', 75, 1, 3600) * 1000,
    httpMaxConnections: readInt(env, 'GANTRY_HTTP_MAX_CONNECTIONS', 4096, 0, 1_000_000),
    httpTransferIdleTimeoutMs: readInt(env, 'GANTRY_HTTP_TRANSFER_IDLE_TIMEOUT', 60, 1, 3600) * 1000,
    httpTransferTimeoutMs: readInt(env, 'GANTRY_HTTP_TRANSFER_TIMEOUT', 3600, 0, 7 * 86400) * 1000,
    gitMaxPushBytes: readInt(env, 'GANTRY_GIT_MAX_PUSH_SIZE', 2 * 1024 ** 3, 1024, 1024 ** 4),
    actionsLogMaxBytes: readInt(env, 'GANTRY_ACTIONS_LOG_MAX_SIZE', 128 * 1024 ** 2, 1024, 1024 ** 4),
    actionsLogMaxRequestBytes: readInt(
      env,
      'GANTRY_ACTIONS_LOG_MAX_REQUEST_SIZE',
      256 * 1024 ** 2,
      1024 ** 2,
      1024 ** 4,
    ),
    actionsMaxWorkflowBytes: readInt(env, 'GANTRY_ACTIONS_MAX_WORKFLOW_SIZE', 1024 ** 2, 1024, 64 * 1024 ** 2),
    actionsMaxJobsPerRun: readInt(env, 'GANTRY_ACTIONS_MAX_JOBS_PER_RUN', 256, 1, 10_000),
    actionsMaxRunPayloadBytes: readInt(env, 'GANTRY_ACTIONS_MAX_RUN_PAYLOAD_SIZE', 16 * 1024 ** 2, 1024, 1024 ** 3),
    testSchedulerClock: parseTestSchedulerClock(read(env, 'GANTRY_TEST_SCHEDULER_CLOCK')),
    artifactRetentionDays: readInt(env, 'GANTRY_ARTIFACT_RETENTION_DAYS', 90, 1, 36_500),
    artifactMaxBytes: readInt(env, 'GANTRY_ARTIFACT_MAX_SIZE', 10 * 1024 ** 3, 1024, 1024 ** 5),
    artifactMaxRunBytes: readInt(env, 'GANTRY_ARTIFACT_MAX_RUN_SIZE', 50 * 1024 ** 3, 1024, 1024 ** 5),
    embeddedRunnerLabels: read(env, 'GANTRY_EMBEDDED_RUNNER_LABELS') ?? '',
    embeddedRunnerCapacity: readInt(env, 'GANTRY_EMBEDDED_RUNNER_CAPACITY', 1, 1, 256),
    runnerShutdownTimeoutMs: readInt(env, 'GANTRY_RUNNER_SHUTDOWN_TIMEOUT', 0, 0, 7 * 86400) * 1000,
    logLevel,
    bodyLimitBytes: readInt(env, 'GANTRY_BODY_LIMIT', 1024 * 1024, 1024, 1024 * 1024 * 1024),
    defaultPagingNum,
    maxResponseItems,
  });
}
