// One `on: schedule` entry, parsed: Forgejo's cron dialect (F15
// models/actions/schedule_spec.go over github.com/gdgvda/cron) on top of the
// `croner` library, which does the calendar arithmetic.
//
// Contract:
// - `parseCronSpec(text, timezone?)` accepts exactly what Forgejo accepts:
//   five fields (minute hour day-of-month month day-of-week, names `jan`…,
//   `sun`…, `?` as `*`), the descriptors `@yearly @annually @monthly @weekly
//   @daily @midnight @hourly`, `@every <Go duration>`, each optionally after
//   `TZ=<zone>` or `CRON_TZ=<zone>`. A `timezone:` key next to `cron:` wins
//   over the inline zone (Forgejo's ScheduleSpec.Parse). No zone: UTC, not the
//   server's zone. Anything else (4 or 6 fields, croner's `L`, `W`, `#`, `+`
//   extensions, an unknown zone) throws a CronSpecError whose message names
//   the spec and is safe to show.
// - `next(afterMs)` is the first firing instant strictly after `afterMs`.
//   Day-of-month and day-of-week restrict together as in Vixie cron: OR when
//   both are restricted, AND when one is `*`.
// - DST, as Forgejo's tests pin it: a wall-clock time skipped by the spring
//   jump does not fire that day; a time that occurs twice in autumn fires
//   twice. An instant fires exactly when its wall-clock time in the zone
//   matches. Croner treats a pattern with one fixed value in each of its
//   second, minute and hour fields as a "fixed-time job" (moved after a gap,
//   run once in an overlap); every pattern here is given croner's optional
//   seconds field as `*/60` — second 0, but a step — which makes croner treat
//   it as an "interval job", whose DST rule is exactly the one above.
// - `@every d` fires every d after the previous firing (robfig/cron's
//   ConstantDelaySchedule, which Forgejo's library keeps): d is rounded down
//   to whole seconds and must be at least one second.
import { Cron } from 'croner';

export class CronSpecError extends Error {
  override readonly name = 'CronSpecError';
}

export interface CronSpec {
  /** The text as written in the workflow (it becomes `github.event.schedule`). */
  readonly text: string;
  /** The IANA zone the fields are read in; `UTC` by default. */
  readonly timeZone: string;
  /** The first firing instant strictly after `afterMs`, in Unix milliseconds. */
  next(afterMs: number): number;
}

const DESCRIPTORS: Readonly<Record<string, string>> = {
  '@yearly': '0 0 1 1 *',
  '@annually': '0 0 1 1 *',
  '@monthly': '0 0 1 * *',
  '@weekly': '0 0 * * 0',
  '@daily': '0 0 * * *',
  '@midnight': '0 0 * * *',
  '@hourly': '0 * * * *',
};

const MONTH_NAMES = /\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\b/gi;
const DAY_NAMES = /\b(sun|mon|tue|wed|thu|fri|sat)\b/gi;
/** What a field may hold once names are replaced: numbers, `*`, `?`, lists, ranges, steps. */
const FIELD = /^[0-9*?,/-]+$/;

// Go's time.ParseDuration units, in milliseconds.
const DURATION_UNITS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};
const DURATION_PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
/** A bound far beyond any schedule (Go's durations stop near 292 years). */
const MAX_EVERY_MS = 100 * 366 * 24 * 3_600_000;

/** Go's time.ParseDuration for the positive durations `@every` takes (`1h30m`, `90s`, `1.5h`). */
export function parseGoDuration(text: string): number | null {
  if (text === '' || text === '0') return text === '0' ? 0 : null;
  let total = 0;
  let at = 0;
  while (at < text.length) {
    DURATION_PART.lastIndex = at;
    const part = DURATION_PART.exec(text);
    if (part === null) return null;
    total += Number(part[1]) * (DURATION_UNITS[part[2] as string] as number);
    at = DURATION_PART.lastIndex;
  }
  return total;
}

function isKnownZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

function fail(text: string, reason: string): never {
  throw new CronSpecError(`invalid cron spec ${JSON.stringify(text)}: ${reason}`);
}

class EverySpec implements CronSpec {
  constructor(
    readonly text: string,
    readonly timeZone: string,
    private readonly everyMs: number,
  ) {}

  next(afterMs: number): number {
    // Whole seconds, as robfig's ConstantDelaySchedule: the next firing lands on a second boundary.
    return Math.floor(afterMs / 1000) * 1000 + this.everyMs;
  }
}

class CalendarSpec implements CronSpec {
  constructor(
    readonly text: string,
    readonly timeZone: string,
    private readonly cron: Cron,
  ) {}

  next(afterMs: number): number {
    const next = this.cron.nextRun(new Date(afterMs));
    // A pattern that can never match (e.g. `0 0 31 2 *`) is refused at parse time; this is a guard.
    if (next === null) return Number.POSITIVE_INFINITY;
    return next.getTime();
  }
}

/** Parses one `cron:` value (and its `timezone:` key); throws CronSpecError. */
export function parseCronSpec(text: string, timezone?: string): CronSpec {
  let rest = text.trim();
  let zone = 'UTC';
  const prefix = /^(?:CRON_TZ|TZ)=(\S+)\s+/.exec(rest);
  if (prefix !== null) {
    zone = prefix[1] as string;
    rest = rest.slice(prefix[0].length).trim();
  }
  if (timezone !== undefined && timezone.trim() !== '') zone = timezone.trim();
  if (!isKnownZone(zone)) fail(text, `unknown time zone ${JSON.stringify(zone)}`);
  if (rest === '') fail(text, 'empty spec');

  if (rest.startsWith('@every')) {
    const durationText = rest.slice('@every'.length).trim();
    const ms = parseGoDuration(durationText);
    if (ms === null || !/^@every\s/.test(rest)) fail(text, `invalid duration ${JSON.stringify(durationText)}`);
    const everyMs = Math.floor(ms / 1000) * 1000;
    if (everyMs < 1000) fail(text, 'the interval of @every must be at least 1s');
    if (everyMs > MAX_EVERY_MS) fail(text, 'the interval of @every is too long');
    return new EverySpec(text, zone, everyMs);
  }

  let fields = rest;
  if (rest.startsWith('@')) {
    const expanded = DESCRIPTORS[rest.toLowerCase()];
    if (expanded === undefined) fail(text, `unknown descriptor ${JSON.stringify(rest)}`);
    fields = expanded;
  }
  const parts = fields.split(/\s+/);
  if (parts.length !== 5) fail(text, `expected exactly 5 fields, got ${parts.length}`);
  const [minute, hour, dom, month, dow] = parts as [string, string, string, string, string];
  const named = [minute, hour, dom, month.replace(MONTH_NAMES, '1'), dow.replace(DAY_NAMES, '1')];
  if (!named.every((field) => FIELD.test(field))) fail(text, 'a field holds an unsupported character');

  let cron: Cron;
  try {
    // `*/60`: croner's seconds field, second 0 only, and a step (see the header: DST).
    // sloppyRanges: `5/10` means 5-59/10, as in robfig/cron and Vixie cron.
    cron = new Cron(`*/60 ${parts.join(' ')}`, { mode: '6-part', timezone: zone, sloppyRanges: true });
  } catch (error) {
    fail(text, error instanceof Error ? error.message.replace(/^CronPattern: /, '') : String(error));
  }
  const spec = new CalendarSpec(text, zone, cron);
  // A pattern that never fires (31 February) is refused rather than stored as never due.
  if (!Number.isFinite(spec.next(Date.UTC(2000, 0, 1)))) fail(text, 'the spec never fires');
  return spec;
}
