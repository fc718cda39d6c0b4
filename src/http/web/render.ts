// Server-side rendering of the console's pages with Eta. `autoEscape` is on,
// so `<%= x %>` HTML-escapes: log lines, branch names and commit messages are
// attacker-controlled and reach the page only through it. `<%~ %>` (raw) is
// used for one thing only: the layout inserting the page body Eta rendered.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Eta } from 'eta';
import type { FastifyReply } from 'fastify';
import { statusName } from '../../modules/actions-status.ts';
import type { User } from '../../models/users.ts';

// Beside this module, or beside the bundle in dist/ (scripts/build.mjs copies them there).
const TEMPLATES = path.join(path.dirname(fileURLToPath(import.meta.url)), 'templates');

const eta = new Eta({ views: TEMPLATES, autoEscape: true, cache: true, defaultExtension: '.eta' });

/** What every page gets besides its own data (the layout reads it). */
export interface PageChrome {
  title: string;
  /**
   * The root URL's path without its last slash: '' at a host's root, `/ci`
   * for GANTRY_ROOT_URL `https://host/ci/`. Every link, form and script of a
   * page starts with it; the proxy strips it before Gantry routes the request
   * (the README's sub-path example), as Forgejo's AppSubURL works.
   */
  site: string;
  doer: User | null;
  /** The CSRF token forms of this page carry as `_csrf`. */
  csrf: string;
  flash: { kind: 'info' | 'error'; message: string } | null;
}

/** Helpers the templates call (formatting only: no rule lives here). */
export const view = {
  status: (status: number): string => statusName(status),
  shortSha: (sha: string): string => sha.slice(0, 10),
  /** `refs/heads/x` → `x`; tags keep their name; anything else as is. */
  refName: (ref: string): string => ref.replace(/^refs\/(heads|tags)\//, ''),
  /** A duration in seconds as `1h 2m 3s`. */
  duration: (seconds: number): string => {
    if (!(seconds > 0)) return '0s';
    const h = Math.floor(seconds / 3600);
    const m = Math.floor((seconds % 3600) / 60);
    const s = Math.floor(seconds % 60);
    return [h > 0 ? `${h}h` : '', m > 0 ? `${m}m` : '', `${s}s`].filter(Boolean).join(' ');
  },
  /** How long ago a unix time was, coarsely (`3 minutes ago`). */
  age: (unix: number, nowSec: number): string => {
    if (!(unix > 0)) return '';
    const d = Math.max(0, nowSec - unix);
    const units: Array<[number, string]> = [
      [86400, 'day'],
      [3600, 'hour'],
      [60, 'minute'],
    ];
    for (const [size, name] of units) {
      const n = Math.floor(d / size);
      if (n >= 1) return `${n} ${name}${n === 1 ? '' : 's'} ago`;
    }
    return 'just now';
  },
  /** A run's time spent, over all its attempts (Forgejo's ActionRun.Duration). */
  runDuration: (run: { started: number; stopped: number; previousDuration: number }, nowSec: number): number => {
    const current = run.started > 0 ? (run.stopped >= run.started ? run.stopped : nowSec) - run.started : 0;
    return run.previousDuration + Math.max(0, current);
  },
  jobDuration: (job: { started: number; stopped: number }, nowSec: number): number =>
    job.started > 0 ? Math.max(0, (job.stopped >= job.started ? job.stopped : nowSec) - job.started) : 0,
  /** A size in bytes as `512 B`, `1.5 KiB`, `20.0 MiB` (binary units, as Forgejo's FileSize). */
  bytes: (size: number): string => {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let value = size;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) {
      value /= 1024;
      unit += 1;
    }
    return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
  },
  iso: (unix: number): string => (unix > 0 ? new Date(unix * 1000).toISOString() : ''),
};

/** Renders `template` inside the layout and sends it as the answer (status 200 unless set before). */
export function sendPage(
  reply: FastifyReply,
  template: string,
  chrome: PageChrome,
  data: Record<string, unknown> = {},
): FastifyReply {
  const html = eta.render(template, { ...data, chrome, view, nowSec: Math.floor(Date.now() / 1000) });
  return reply.type('text/html; charset=utf-8').send(html);
}

/** PageChrome.site of a root URL. */
export function sitePrefix(rootUrl: string): string {
  return new URL(rootUrl).pathname.replace(/\/+$/, '');
}

/** The redirect after a POST (303: the browser follows with GET). */
export function seeOther(reply: FastifyReply, location: string): FastifyReply {
  return reply.code(303).header('location', location).send();
}

/** A same-site path to go back to after sign-in; anything else (another host, `//x`, `/\x`) is the home page. */
export function safeRedirectTarget(raw: unknown): string {
  if (typeof raw !== 'string' || !raw.startsWith('/') || raw.startsWith('//') || raw.startsWith('/\\')) return '/';
  return raw;
}
