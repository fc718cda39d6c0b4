// The slice of autocannon@8's API the benchmarks use (the package ships no types
// and @types/autocannon is not a dependency).
declare module 'autocannon' {
  import type { EventEmitter } from 'node:events';

  export interface Options {
    url: string;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    /** Seconds. */
    duration?: number;
    connections?: number;
    pipelining?: number;
    /** Seconds before a request counts as a timeout. */
    timeout?: number;
    /** Run the load generator in this many worker threads. */
    workers?: number;
    amount?: number;
  }

  /** Percentiles of a histogram, as autocannon reports them. */
  export interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p99: number;
    p99_9: number;
  }

  export interface Result {
    url: string;
    /** Seconds actually measured. */
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    resets: number;
    '2xx': number;
    statusCodeStats: Record<string, { count: number }>;
    /** Milliseconds. */
    latency: Histogram;
    /** Requests per second samples; `total` is the completed request count. */
    requests: Histogram & { sent: number };
    throughput: Histogram;
  }

  export type Instance = EventEmitter & { stop(): void };

  export default function autocannon(opts: Options): Instance & PromiseLike<Result>;
  export default function autocannon(opts: Options, cb: (err: Error | null, result: Result) => void): Instance;
}
