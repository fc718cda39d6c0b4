import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CronSpecError, parseCronSpec, parseGoDuration } from './cron-spec.ts';

const at = (iso: string): number => Date.parse(iso);
const iso = (ms: number): string => new Date(ms).toISOString();

/** The first `count` firings after `fromIso`. */
function firings(spec: string, fromIso: string, count: number, timezone?: string): string[] {
  const parsed = parseCronSpec(spec, timezone);
  const out: string[] = [];
  let cursor = at(fromIso);
  for (let i = 0; i < count; i += 1) {
    cursor = parsed.next(cursor);
    out.push(iso(cursor));
  }
  return out;
}

test('five fields read in UTC by default, strictly after the given instant', () => {
  assert.deepEqual(firings('* * * * *', '2026-01-01T10:00:00Z', 2), [
    '2026-01-01T10:01:00.000Z',
    '2026-01-01T10:02:00.000Z',
  ]);
  assert.deepEqual(firings('30 2 * * *', '2026-01-01T10:00:00Z', 1), ['2026-01-02T02:30:00.000Z']);
  assert.deepEqual(firings('*/15 * * * *', '2026-01-01T10:07:30Z', 2), [
    '2026-01-01T10:15:00.000Z',
    '2026-01-01T10:30:00.000Z',
  ]);
});

test('names, ? and the Vixie day rule (OR when both day fields are restricted)', () => {
  // 2026-01-05 is a Monday.
  assert.deepEqual(firings('0 0 * * mon', '2026-01-01T00:00:00Z', 1), ['2026-01-05T00:00:00.000Z']);
  assert.deepEqual(firings('0 0 ? JAN MON', '2026-01-01T00:00:00Z', 1), ['2026-01-05T00:00:00.000Z']);
  assert.deepEqual(firings('0 0 3 * mon', '2026-01-01T00:00:00Z', 2), [
    '2026-01-03T00:00:00.000Z',
    '2026-01-05T00:00:00.000Z',
  ]);
});

test('descriptors', () => {
  const from = '2026-03-15T10:20:00Z';
  assert.deepEqual(firings('@hourly', from, 1), ['2026-03-15T11:00:00.000Z']);
  assert.deepEqual(firings('@daily', from, 1), ['2026-03-16T00:00:00.000Z']);
  assert.deepEqual(firings('@midnight', from, 1), ['2026-03-16T00:00:00.000Z']);
  assert.deepEqual(firings('@weekly', from, 1), ['2026-03-22T00:00:00.000Z']);
  assert.deepEqual(firings('@monthly', from, 1), ['2026-04-01T00:00:00.000Z']);
  assert.deepEqual(firings('@yearly', from, 1), ['2027-01-01T00:00:00.000Z']);
  assert.deepEqual(firings('@annually', from, 1), ['2027-01-01T00:00:00.000Z']);
});

test('@every takes a Go duration, whole seconds, at least one second', () => {
  assert.deepEqual(firings('@every 1h30m', '2026-01-01T00:00:00.400Z', 2), [
    '2026-01-01T01:30:00.000Z',
    '2026-01-01T03:00:00.000Z',
  ]);
  assert.deepEqual(firings('@every 1.5s', '2026-01-01T00:00:00Z', 1), ['2026-01-01T00:00:01.000Z']);
  assert.equal(parseGoDuration('90s'), 90_000);
  assert.equal(parseGoDuration('1h2m3s'), 3_723_000);
  assert.equal(parseGoDuration('300ms'), 300);
  assert.equal(parseGoDuration('1d'), null);
  for (const bad of ['@every', '@every 500ms', '@every 5', '@every -1m', '@every 1d'])
    assert.throws(() => parseCronSpec(bad), CronSpecError, bad);
});

test('TZ= and CRON_TZ= select the zone; the timezone: key wins over them', () => {
  // 09:00 in Tokyo (UTC+9, no DST) is 00:00 UTC.
  assert.deepEqual(firings('TZ=Asia/Tokyo 0 9 * * *', '2026-01-01T12:00:00Z', 1), ['2026-01-02T00:00:00.000Z']);
  assert.deepEqual(firings('CRON_TZ=Asia/Tokyo 0 9 * * *', '2026-01-01T12:00:00Z', 1), ['2026-01-02T00:00:00.000Z']);
  assert.deepEqual(firings('0 9 * * *', '2026-01-01T12:00:00Z', 1, 'Asia/Tokyo'), ['2026-01-02T00:00:00.000Z']);
  assert.deepEqual(firings('TZ=UTC 0 9 * * *', '2026-01-01T12:00:00Z', 1, 'Asia/Tokyo'), ['2026-01-02T00:00:00.000Z']);
  assert.equal(parseCronSpec('TZ=Europe/Paris @daily').timeZone, 'Europe/Paris');
  assert.throws(() => parseCronSpec('TZ=Mars/Olympus 0 9 * * *'), /unknown time zone "Mars\/Olympus"/);
  assert.throws(() => parseCronSpec('0 9 * * *', 'Nowhere/At_All'), CronSpecError);
});

test('DST spring forward: a skipped wall-clock time does not fire that day (Forgejo)', () => {
  // America/New_York jumps from 02:00 to 03:00 on 2024-03-10.
  assert.deepEqual(firings('30 2 * * *', '2024-03-09T12:00:00Z', 2, 'America/New_York'), [
    '2024-03-11T06:30:00.000Z',
    '2024-03-12T06:30:00.000Z',
  ]);
  // Every minute: nothing between 02:00 and 03:00 local, no burst after the jump.
  assert.deepEqual(firings('TZ=America/New_York * * * * *', '2024-03-10T06:58:00Z', 3), [
    '2024-03-10T06:59:00.000Z',
    '2024-03-10T07:00:00.000Z',
    '2024-03-10T07:01:00.000Z',
  ]);
});

test('DST fall back: a repeated wall-clock time fires twice (Forgejo)', () => {
  // America/New_York repeats 01:00-02:00 on 2024-11-03 (EDT 05:00Z-06:00Z, then EST 06:00Z-07:00Z).
  assert.deepEqual(firings('30 1 * * *', '2024-11-02T12:00:00Z', 3, 'America/New_York'), [
    '2024-11-03T05:30:00.000Z',
    '2024-11-03T06:30:00.000Z',
    '2024-11-04T06:30:00.000Z',
  ]);
});

test('specs Forgejo rejects are rejected with a message naming them', () => {
  for (const bad of [
    '* * * *',
    '* * * * * *',
    '0 0 * * * 2026',
    '',
    '@reboot',
    '@fortnightly',
    '61 * * * *',
    '* 24 * * *',
    '0 0 L * *',
    '0 0 15W * *',
    '0 0 * * MON#2',
    '0 0 1 * +MON',
    'x * * * *',
  ])
    assert.throws(() => parseCronSpec(bad), CronSpecError, JSON.stringify(bad));
  assert.throws(() => parseCronSpec('* * * *'), /invalid cron spec "\* \* \* \*": expected exactly 5 fields, got 4/);
});
