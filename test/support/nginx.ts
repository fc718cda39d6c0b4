// nginx from the machine's packages as a round-robin reverse proxy in front of
// Gantry processes, for scale-out tests and benchmarks. It runs in the
// foreground as the current user, with every path (pid, logs, temp files) in a
// throwaway folder, and writes an access log naming the upstream that served
// each request, so a test can count what each process answered.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { accessSync, constants as fsConstants, readFileSync, rmSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './free-port.ts';

/** Why nginx-backed tests cannot run here, or null when they can. */
export function nginxMissingReason(): string | null {
  return findNginx() === null ? 'nginx is not installed (Debian: apt-get install nginx-light)' : null;
}

/**
 * Why an nginx-backed test should be skipped here, or false. Under CI (the
 * `CI` variable set) never: .ci/run installs nginx, and CI must not pass by
 * skipping; a missing nginx then fails the test when it starts nginx.
 */
export function nginxSkipReason(): string | false {
  const missing = nginxMissingReason();
  return missing !== null && process.env.CI === undefined ? missing : false;
}

/** The nginx binary on PATH or in the sbin folders Debian puts it in (not on a user's PATH). */
export function findNginx(): string | null {
  const dirs = [...(process.env.PATH ?? '').split(path.delimiter), '/usr/sbin', '/usr/local/sbin', '/sbin'];
  for (const dir of dirs) {
    if (!dir) continue;
    const file = path.join(dir, 'nginx');
    try {
      accessSync(file, fsConstants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return null;
}

export interface NginxConfigOptions {
  /** The folder holding pid, logs and temp files. */
  dir: string;
  /** The loopback port nginx listens on. */
  port: number;
  /** host:port of each Gantry process, served in turn (round robin). */
  upstreams: readonly string[];
  /**
   * Serve Gantry under this path (`/ci/`), stripped before the request is
   * passed on, as for GANTRY_ROOT_URL `http://host/ci/` (the README's
   * sub-path example); default `/`.
   */
  subPath?: string;
}

/**
 * The proxy configuration: what the README's production example shows, plus
 * the paths that keep this nginx out of /var and /run. Each setting that
 * Gantry depends on says why.
 */
export function nginxConfig({ dir, port, upstreams, subPath = '/' }: NginxConfigOptions): string {
  const at = (name: string) => JSON.stringify(path.join(dir, name));
  // As root, nginx would run its workers as `nobody`, who cannot enter the
  // private temp folder; running them as the current user keeps it private.
  const user =
    typeof process.getuid === 'function' && process.getuid() === 0 ? `user ${os.userInfo().username};\n` : '';
  return `${user}daemon off;
worker_processes 1;
pid ${at('nginx.pid')};
lock_file ${at('nginx.lock')};
error_log ${at('error.log')} warn;

events {
  worker_connections 4096;
}

http {
  client_body_temp_path ${at('client_body')};
  proxy_temp_path ${at('proxy')};
  fastcgi_temp_path ${at('fastcgi')};
  uwsgi_temp_path ${at('uwsgi')};
  scgi_temp_path ${at('scgi')};

  # Tab-separated: which process served the request, and its status.
  log_format upstreams '$upstream_addr\t$status\t$request_method\t$request_uri\t$request_time';
  access_log ${at('access.log')} upstreams;

  upstream gantry {
${upstreams.map((address) => `    server ${address};`).join('\n')}
    keepalive 64;
    # Below Gantry's own keep-alive (72 s): nginx, not Gantry, closes an idle
    # connection, so a request is never sent on one Gantry is closing.
    keepalive_timeout 60s;
  }

  server {
    listen 127.0.0.1:${port};
    # git pushes can be large: Gantry enforces GANTRY_GIT_MAX_PUSH_SIZE itself.
    client_max_body_size 0;

    location ${subPath} {
      # With a URI after the upstream, nginx replaces the matched prefix with it: /ci/x reaches Gantry as /x.
      proxy_pass http://gantry${subPath === '/' ? '' : '/'};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $http_host;
      # Stream git packs both ways instead of spooling them to disk first.
      proxy_request_buffering off;
      proxy_buffering off;
      # Runners long-poll FetchTask and git transfers can take long.
      proxy_read_timeout 3600s;
      proxy_send_timeout 3600s;
    }
  }
}
`;
}

export interface AccessLogEntry {
  /** host:port of the process that answered ('-' when none did, e.g. the client left first). */
  upstream: string;
  status: number;
  method: string;
  uri: string;
  seconds: number;
}

export interface NginxProxy {
  /** http://127.0.0.1:<port>, without a trailing slash. */
  url: string;
  port: number;
  dir: string;
  readAccessLog(): Promise<AccessLogEntry[]>;
  /** The error log's text (for failure messages). */
  errorLog(): string;
  stop(): Promise<void>;
}

export interface StartNginxOptions {
  upstreams: readonly string[];
  /** Listen on this port (it must be free); default: a free one. */
  port?: number;
  /** Resolves once the proxy answers this path with 200 (default /api/healthz under subPath). */
  readyPath?: string;
  /** NginxConfigOptions.subPath. */
  subPath?: string;
}

const READY_DEADLINE_MS = 30_000;
const STOP_DEADLINE_MS = 10_000;

function parseAccessLog(text: string): AccessLogEntry[] {
  const entries: AccessLogEntry[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const [upstream = '', status = '', method = '', uri = '', seconds = ''] = line.split('\t');
    entries.push({ upstream, status: Number(status), method, uri, seconds: Number(seconds) });
  }
  return entries;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

export async function startNginx(options: StartNginxOptions): Promise<NginxProxy> {
  const binary = findNginx();
  if (binary === null) throw new Error(nginxMissingReason() ?? 'nginx not found');
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-nginx-'));
  const port = options.port ?? (await freePort());
  const confFile = path.join(dir, 'nginx.conf');
  const readyPath = options.readyPath ?? `${(options.subPath ?? '/').replace(/\/$/, '')}/api/healthz`;
  await fs.writeFile(confFile, nginxConfig({ dir, port, upstreams: options.upstreams, subPath: options.subPath }));
  const errorLogFile = path.join(dir, 'error.log');
  const errorLog = (): string => {
    try {
      return readFileSync(errorLogFile, 'utf8');
    } catch {
      return '(no error log)';
    }
  };

  // -e: the error log before the configuration is read (nginx ≥ 1.19.5), or it opens /var/log/nginx.
  const child = spawn(binary, ['-p', dir, '-c', confFile, '-e', errorLogFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const spawned = new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });

  // The master stops its workers on SIGTERM; a test run that dies first must not leave them behind.
  const onExit = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', onExit);

  let stopping: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      process.off('exit', onExit);
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), STOP_DEADLINE_MS);
        await exited(child);
        clearTimeout(timer);
      }
      await fs.rm(dir, { recursive: true, force: true });
    })();
    return stopping;
  };

  const url = `http://127.0.0.1:${port}`;
  try {
    await spawned;
    const deadline = Date.now() + READY_DEADLINE_MS;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`nginx exited (${child.exitCode}): ${output}\n${errorLog()}`);
      try {
        if ((await fetch(`${url}${readyPath}`)).status === 200) break;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline)
        throw new Error(`nginx did not answer within ${READY_DEADLINE_MS} ms: ${output}\n${errorLog()}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    url,
    port,
    dir,
    readAccessLog: async () => parseAccessLog(await fs.readFile(path.join(dir, 'access.log'), 'utf8')),
    errorLog,
    stop,
  };
}
