// The HTTP port: free to listen on, or already served by a running Gantry
// (which answers /api/healthz with {"status": "pass"|"fail"}). And when a
// Gantry runs here, whether GANTRY_ROOT_URL (the public URL, often a reverse
// proxy) reaches one. Warnings only: doctor may well run beside the server.
import net from 'node:net';
import type { DoctorContext } from './context.ts';
import { CheckSkipped, messageOf, ok, warn } from './result.ts';
import type { Check, Finding } from './result.ts';

export type PortState =
  | { kind: 'any' }
  | { kind: 'free' }
  | { kind: 'denied'; detail: string }
  | { kind: 'gantry'; healthy: boolean; url: string }
  | { kind: 'other'; detail: string };

type Health = { gantry: true; healthy: boolean } | { gantry: false; detail: string };

/** Asks `url` (…/api/healthz) whether a Gantry answers. */
export async function askHealth(url: string, timeoutMs: number): Promise<Health> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: 'manual' });
    const body = (await response.json().catch(() => null)) as { status?: unknown } | null;
    if (body !== null && (body.status === 'pass' || body.status === 'fail'))
      return { gantry: true, healthy: response.status === 200 && body.status === 'pass' };
    return { gantry: false, detail: `it answered HTTP ${response.status} to ${url}, not Gantry's health check` };
  } catch (error) {
    const cause = (error as { cause?: unknown }).cause;
    return { gantry: false, detail: `${url} did not answer over HTTP (${messageOf(cause ?? error)})` };
  }
}

function tryListen(host: string, port: number): Promise<NodeJS.ErrnoException | null> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', (error: NodeJS.ErrnoException) => resolve(error));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(null)));
  });
}

/** Where a local client reaches a server listening on `addr`. */
function localHost(addr: string): string {
  if (addr === '0.0.0.0' || addr === '') return '127.0.0.1';
  if (addr === '::') return '[::1]';
  return net.isIPv6(addr) ? `[${addr}]` : addr;
}

export async function probePort(addr: string, port: number, timeoutMs: number): Promise<PortState> {
  if (port === 0) return { kind: 'any' };
  const error = await tryListen(addr, port);
  if (error === null) return { kind: 'free' };
  if (error.code !== 'EADDRINUSE') return { kind: 'denied', detail: messageOf(error) };
  const url = `http://${localHost(addr)}:${port}/api/healthz`;
  const health = await askHealth(url, timeoutMs);
  return health.gantry ? { kind: 'gantry', healthy: health.healthy, url } : { kind: 'other', detail: health.detail };
}

export const httpPortCheck: Check<DoctorContext> = {
  name: 'http port',
  onTimeout: { status: 'warn', fix: 'something holds the port but does not answer: find it with `ss -ltnp`' },
  async run(ctx): Promise<Finding> {
    const { httpAddr, httpPort } = ctx.config;
    const state = await ctx.localServer();
    switch (state.kind) {
      case 'any':
        return ok('GANTRY_HTTP_PORT is 0: a free port is picked at start');
      case 'free':
        return ok(`port ${httpPort} on ${httpAddr} is free`);
      case 'gantry':
        return state.healthy
          ? ok(`port ${httpPort} is served by a running Gantry (healthy)`)
          : warn(
              `port ${httpPort} is served by a running Gantry that reports its database unreachable`,
              "see that server's log; the database checks above tell what is wrong",
            );
      case 'denied':
        return warn(
          `cannot listen on ${httpAddr}:${httpPort}: ${state.detail}`,
          'ports below 1024 need privileges: use a higher GANTRY_HTTP_PORT behind a reverse proxy (see Production deployment in the README), or check GANTRY_HTTP_ADDR',
        );
      case 'other':
        return warn(
          `port ${httpPort} is in use by another program: ${state.detail}`,
          'stop that program or set GANTRY_HTTP_PORT to a free port',
        );
    }
  },
};

export const rootUrlCheck: Check<DoctorContext> = {
  name: 'root url',
  onTimeout: { status: 'warn', fix: 'GANTRY_ROOT_URL does not answer in time: check the reverse proxy and DNS' },
  async run(ctx): Promise<Finding> {
    const state = await ctx.localServer();
    if (state.kind !== 'gantry')
      throw new CheckSkipped(`not checked: no Gantry runs on port ${ctx.config.httpPort} here`);
    const url = new URL('api/healthz', ctx.config.rootUrl).href;
    const health = await askHealth(url, Math.max(500, ctx.timeoutMs - 500));
    if (health.gantry) return ok(`${ctx.config.rootUrl} reaches a Gantry`);
    return warn(
      `GANTRY_ROOT_URL ${ctx.config.rootUrl} does not reach a Gantry from this host: ${health.detail}`,
      'set GANTRY_ROOT_URL to the URL users and runners reach Gantry at, and check the reverse proxy forwards it (ignore this if that URL is only reachable from elsewhere)',
    );
  },
};
