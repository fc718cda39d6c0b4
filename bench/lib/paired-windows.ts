// A ratio of two servers' throughput that a shared, loaded machine cannot
// skew much: both servers run as child processes, the load generator in a
// third (load-child.ts), and the measurement windows alternate between the
// baseline and the server under test in the same minutes (B G, G B, B G, …),
// so a change of the machine's load hits both sides of a pair alike. The
// figure is the median of the pairs' ratios. Each window also reads the
// server's CPU time from /proc, so a figure comes with each side's CPU per
// request, which the machine's load distorts far less than requests per second.
import os from 'node:os';
import type { Measurement, MeasureOptions } from './autocannon.ts';
import { measureInChild } from './load-child.ts';
import { processCpuSeconds } from './process-cpu.ts';
import type { ScenarioContext } from './scenario.ts';

export interface Side {
  label: string;
  /** The server's process id (its CPU is read from /proc). */
  pid: number;
  request: Omit<MeasureOptions, 'durationSec' | 'onProgress'>;
}

export interface Window extends Measurement {
  /** Server CPU (user + system) per answered request, microseconds. */
  cpuUsPerRequest: number;
}

export interface PairedResult {
  baseline: Window[];
  measured: Window[];
  /** measured.rps / baseline.rps, per pair. */
  ratios: number[];
  medianRatio: number;
  /** The 1-minute load average at the start and at the end. */
  loadAverage: [number, number];
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

async function window(side: Side, durationSec: number): Promise<Window> {
  const cpuBefore = await processCpuSeconds(side.pid);
  const result = await measureInChild({ ...side.request, durationSec });
  const cpu = (await processCpuSeconds(side.pid)) - cpuBefore;
  return { ...result, cpuUsPerRequest: (cpu * 1e6) / Math.max(1, result.total) };
}

export async function pairedWindows(
  ctx: ScenarioContext,
  baseline: Side,
  measured: Side,
  pairs: number,
): Promise<PairedResult> {
  const loadStart = os.loadavg()[0] as number;
  ctx.log(`warming up ${baseline.label} and ${measured.label} (${ctx.warmupSec} s each)…`);
  await window(baseline, ctx.warmupSec);
  await window(measured, ctx.warmupSec);
  const result: PairedResult = {
    baseline: [],
    measured: [],
    ratios: [],
    medianRatio: 0,
    loadAverage: [loadStart, 0],
  };
  for (let i = 0; i < pairs; i++) {
    const order = i % 2 === 0 ? [baseline, measured] : [measured, baseline];
    const windows = new Map<Side, Window>();
    for (const side of order) {
      ctx.log(`pair ${i + 1}/${pairs}: measuring ${side.label} (${ctx.durationSec} s)…`);
      windows.set(side, await window(side, ctx.durationSec));
    }
    const b = windows.get(baseline) as Window;
    const m = windows.get(measured) as Window;
    result.baseline.push(b);
    result.measured.push(m);
    result.ratios.push(m.rps / b.rps);
    ctx.log(
      `pair ${i + 1}/${pairs}: ${baseline.label} ${Math.round(b.rps)} req/s (${Math.round(b.cpuUsPerRequest)} µs CPU/req), ` +
        `${measured.label} ${Math.round(m.rps)} req/s (${Math.round(m.cpuUsPerRequest)} µs CPU/req), ` +
        `ratio ${(m.rps / b.rps).toFixed(2)}; load average ${os.loadavg()[0]?.toFixed(1)}`,
    );
  }
  result.medianRatio = median(result.ratios);
  result.loadAverage[1] = os.loadavg()[0] as number;
  return result;
}
