// The one results table printed at the end of a run, and its JSON twin.
import type { Metric, Target } from './scenario.ts';
import { targetMet } from './scenario.ts';

export interface ScenarioOutcome {
  scenario: string;
  metrics: Metric[];
  /** Set when the scenario threw. */
  error: string | null;
  elapsedSec: number;
}

const COLUMNS = ['scenario', 'metric', 'value', 'baseline', 'ratio', 'target'] as const;
const RIGHT_ALIGNED = new Set<string>(['value', 'baseline', 'ratio']);
const MAX_ERROR_WIDTH = 100;

function formatNumber(value: number | null, decimals?: number): string {
  if (value === null) return '—';
  if (!Number.isFinite(value)) return String(value);
  const digits = decimals ?? (Math.abs(value) >= 100 ? 0 : 2);
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function formatTarget(target: Target | null): string {
  if (!target) return '';
  const op = target.kind === 'atLeast' ? '≥' : '≤';
  const digits = target.of === 'ratio' ? 2 : Number.isInteger(target.threshold) ? 0 : 2;
  return `${target.of === 'ratio' ? '' : 'value '}${op} ${target.threshold.toFixed(digits)}`;
}

function targetCell(metric: Metric): string {
  const met = targetMet(metric);
  if (met === null) return '';
  return `${formatTarget(metric.target)} ${met ? 'met' : 'MISSED'}`;
}

function firstLine(text: string): string {
  const line = text.split('\n')[0] ?? '';
  return line.length > MAX_ERROR_WIDTH ? `${line.slice(0, MAX_ERROR_WIDTH - 1)}…` : line;
}

interface Row {
  cells: string[];
  /** Failure rows carry a message, not numbers: no right alignment. */
  text: boolean;
}

function tableRows(outcomes: readonly ScenarioOutcome[]): Row[] {
  const rows: Row[] = [];
  for (const outcome of outcomes) {
    for (const m of outcome.metrics) {
      const cells = [
        outcome.scenario,
        m.metric,
        formatNumber(m.value, m.decimals),
        m.baseline === null ? '' : formatNumber(m.baseline, m.decimals),
        m.ratio === null ? '' : formatNumber(m.ratio, 2),
        targetCell(m),
      ];
      rows.push({ cells, text: false });
    }
    if (outcome.error !== null)
      rows.push({ cells: [outcome.scenario, 'FAILED', firstLine(outcome.error), '', '', ''], text: true });
  }
  return rows;
}

/** Padded columns separated by " | ", with a header and a rule. */
export function formatTable(outcomes: readonly ScenarioOutcome[]): string {
  const rows = tableRows(outcomes);
  const widths = COLUMNS.map((name, i) => Math.max(name.length, ...rows.map((row) => (row.cells[i] ?? '').length)));
  const line = ({ cells, text }: Row): string =>
    cells
      .map((cell, i) => {
        const width = widths[i] ?? 0;
        return !text && RIGHT_ALIGNED.has(COLUMNS[i] as string) ? cell.padStart(width) : cell.padEnd(width);
      })
      .join(' | ')
      .trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('-|-');
  return [line({ cells: [...COLUMNS], text: true }), rule, ...rows.map(line)].join('\n');
}

export interface ResultsFile {
  generatedAt: string;
  node: string;
  platform: string;
  cpus: number;
  database: string;
  durationSec: number;
  scenarios: Array<{
    name: string;
    ok: boolean;
    error: string | null;
    elapsedSec: number;
    metrics: Array<{
      metric: string;
      value: number;
      baseline: number | null;
      ratio: number | null;
      target: Target | null;
      targetLabel: string;
      met: boolean | null;
    }>;
  }>;
}

export function resultsJson(outcomes: readonly ScenarioOutcome[], meta: Omit<ResultsFile, 'scenarios'>): ResultsFile {
  return {
    ...meta,
    scenarios: outcomes.map((o) => ({
      name: o.scenario,
      ok: o.error === null,
      error: o.error,
      elapsedSec: o.elapsedSec,
      metrics: o.metrics.map((m) => ({
        metric: m.metric,
        value: m.value,
        baseline: m.baseline,
        ratio: m.ratio,
        target: m.target,
        targetLabel: formatTarget(m.target),
        met: targetMet(m),
      })),
    })),
  };
}
