// How doctor's findings are shown: one line per check for people, or JSON for
// scripts. Every string passes through the redactor first, so a secret that
// slipped into an error message (a driver quoting the connection string, say)
// is never printed.
import type { Config } from '../../config.ts';
import type { CheckResult, CheckStatus } from './result.ts';

const LABELS: Record<CheckStatus, string> = { ok: 'ok', warn: 'warn', fail: 'FAIL', skip: 'skip' };

/** The configured values that must never appear in output. */
export function secretsOf(config: Config | null, env: Record<string, string | undefined> = process.env): string[] {
  const secrets: string[] = [];
  const databaseUrl = config?.databaseUrl ?? env.GANTRY_DATABASE_URL;
  if (databaseUrl) {
    try {
      const url = new URL(databaseUrl);
      if (url.password) secrets.push(url.password, decodeURIComponent(url.password));
      const queryPassword = url.searchParams.get('password');
      if (queryPassword) secrets.push(queryPassword);
    } catch {
      // Not a URL (the configuration says so): whatever it holds may be a password.
      secrets.push(databaseUrl);
    }
  }
  if (config) {
    if (config.secretKey) secrets.push(config.secretKey);
    secrets.push(...config.secretKeyPrevious);
    if (config.metricsToken) secrets.push(config.metricsToken);
  } else {
    for (const key of ['GANTRY_SECRET_KEY', 'GANTRY_SECRET_KEY_PREVIOUS', 'GANTRY_METRICS_TOKEN']) {
      const value = env[key]?.trim();
      if (value) secrets.push(value, ...value.split(',').map((v) => v.trim()));
    }
  }
  // Longest first, so a secret containing another is replaced whole.
  return [...new Set(secrets.filter((s) => s !== ''))].sort((a, b) => b.length - a.length);
}

export function redactor(secrets: readonly string[]): (text: string) => string {
  return (text) => secrets.reduce((out, secret) => out.split(secret).join('***'), text);
}

export function redactResult(result: CheckResult, redact: (text: string) => string): CheckResult {
  return { ...result, found: redact(result.found), ...(result.fix !== undefined ? { fix: redact(result.fix) } : {}) };
}

export interface Summary {
  ok: number;
  warn: number;
  fail: number;
  skip: number;
}

export function summarize(results: readonly CheckResult[]): Summary {
  const summary: Summary = { ok: 0, warn: 0, fail: 0, skip: 0 };
  for (const r of results) summary[r.status] += 1;
  return summary;
}

export function formatLines(results: readonly CheckResult[]): string[] {
  const width = Math.max(...results.map((r) => r.check.length));
  const lines = results.map((r) => {
    const line = `${LABELS[r.status].padEnd(4)}  ${r.check.padEnd(width)}  ${r.found}`;
    return r.fix === undefined ? line : `${line} → ${r.fix}`;
  });
  const s = summarize(results);
  lines.push(
    '',
    `${s.fail === 0 ? 'no problems that stop Gantry' : `${s.fail} problem(s) to fix`}: ${s.ok} ok, ${s.warn} warning(s), ${s.fail} failure(s)${s.skip > 0 ? `, ${s.skip} skipped` : ''}`,
  );
  return lines;
}

export function formatJson(results: readonly CheckResult[]): string {
  const summary = summarize(results);
  return JSON.stringify({ ok: summary.fail === 0, summary, checks: results }, null, 2);
}
