// measure(): one autocannon run against a URL, reduced to the numbers the report
// needs. The load generator runs in a worker thread, so it does not share the
// event loop with a server under test in this process; load-child.ts runs it
// in a process of its own.
import autocannon from 'autocannon';
import type { Result } from 'autocannon';

export interface MeasureOptions {
  url: string;
  headers?: Record<string, string>;
  /** Seconds of load. */
  durationSec: number;
  /** Concurrent connections (default 10). */
  connections?: number;
  /** Default GET. */
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  body?: string;
  /** Called about every two seconds with the elapsed seconds, so a long run shows it is alive. */
  onProgress?: (elapsedSec: number, totalSec: number) => void;
}

export interface Measurement {
  /** Mean requests per second. */
  rps: number;
  /** Latency percentiles, milliseconds. */
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
  /** Requests answered in the whole run. */
  total: number;
}

export class MeasurementError extends Error {}

const PROGRESS_EVERY_SEC = 2;

export async function measure(options: MeasureOptions): Promise<Measurement> {
  const { url, headers = {}, durationSec, connections = 10, onProgress, method = 'GET', body } = options;
  const started = Date.now();
  const timer = onProgress
    ? setInterval(
        () => onProgress(Math.min(durationSec, Math.round((Date.now() - started) / 1000)), durationSec),
        PROGRESS_EVERY_SEC * 1000,
      )
    : null;
  let result: Result;
  try {
    result = await autocannon({
      url,
      headers,
      method,
      body,
      duration: durationSec,
      connections,
      pipelining: 1,
      workers: 1,
    });
  } finally {
    if (timer) clearInterval(timer);
  }
  // A benchmark of error responses (or of a server dropping connections) measures nothing.
  if (result.non2xx > 0 || result.errors > 0) {
    const codes = Object.entries(result.statusCodeStats)
      .map(([code, stat]) => `${code}×${stat.count}`)
      .join(', ');
    throw new MeasurementError(
      `${url}: ${result.non2xx} non-2xx responses and ${result.errors} errors (${result.timeouts} timeouts) ` +
        `out of ${result.requests.sent} requests${codes ? `; status codes: ${codes}` : ''}`,
    );
  }
  if (result.requests.total === 0) throw new MeasurementError(`${url}: no request completed in ${durationSec} s`);
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors,
    non2xx: result.non2xx,
    total: result.requests.total,
  };
}

/** A short warm-up, then the measurement, with progress lines. */
export async function measureWithWarmup(
  ctx: { warmupSec: number; durationSec: number; log(message: string): void },
  label: string,
  options: Omit<MeasureOptions, 'durationSec' | 'onProgress'>,
): Promise<Measurement> {
  ctx.log(`warming up ${label} (${ctx.warmupSec} s)…`);
  await measure({ ...options, durationSec: ctx.warmupSec });
  ctx.log(`measuring ${label} (${ctx.durationSec} s)…`);
  const result = await measure({
    ...options,
    durationSec: ctx.durationSec,
    onProgress: (elapsed, total) => ctx.log(`measuring ${label}… ${elapsed}/${total} s`),
  });
  ctx.log(`${label}: ${Math.round(result.rps)} req/s, p99 ${result.p99} ms`);
  return result;
}
