// Name rules for users, organizations, teams and repositories, as Forgejo applies
// them (modules/validation, models/user/user.go, models/repo/repo.go).

const USERNAME = /^[\da-zA-Z][-.\w]*$/;
const USERNAME_BAD_SEQUENCE = /[-._]{2,}|[-._]$/;

/** Forgejo's `Username` binding rule (and its 40-character limit is checked separately). */
export function isValidUsername(name: string): boolean {
  return USERNAME.test(name) && !USERNAME_BAD_SEQUENCE.test(name);
}

const RESERVED_USERNAMES: ReadonlySet<string> = new Set([
  '.',
  '..',
  '.well-known',
  'admin',
  'api',
  'assets',
  'attachments',
  'avatar',
  'avatars',
  'captcha',
  'commits',
  'debug',
  'devtest',
  'error',
  'explore',
  'favicon.ico',
  'ghost',
  'issues',
  'login',
  'manifest.json',
  'metrics',
  'milestones',
  'new',
  'notifications',
  'org',
  'pulls',
  'raw',
  'repo',
  'repo-avatars',
  'robots.txt',
  'search',
  'serviceworker.js',
  'ssh_info',
  'swagger.v1.json',
  'user',
  'v2',
  'gitea-actions',
  'forgejo-actions',
]);
const RESERVED_USERNAME_PATTERNS = ['*.keys', '*.gpg', '*.rss', '*.atom', '*.png'];

const RESERVED_REPO_NAMES: ReadonlySet<string> = new Set(['.', '..', '-']);
const RESERVED_REPO_PATTERNS = ['*.git', '*.wiki', '*.rss', '*.atom'];

export type NameProblem = { kind: 'reserved'; name: string } | { kind: 'pattern'; pattern: string };

function matchSuffixPattern(lowerName: string, patterns: readonly string[]): string | null {
  for (const pattern of patterns) {
    if (lowerName.endsWith(pattern.slice(1))) return pattern;
  }
  return null;
}

export function usernameProblem(name: string): NameProblem | null {
  const lower = name.toLowerCase();
  if (RESERVED_USERNAMES.has(lower)) return { kind: 'reserved', name };
  const pattern = matchSuffixPattern(lower, RESERVED_USERNAME_PATTERNS);
  return pattern ? { kind: 'pattern', pattern } : null;
}

/** Forgejo's `AlphaDashDot` rule. */
export function isAlphaDashDot(name: string): boolean {
  return /^[-.\w]+$/.test(name);
}

export function repoNameProblem(name: string): NameProblem | null {
  const lower = name.toLowerCase();
  if (RESERVED_REPO_NAMES.has(lower)) return { kind: 'reserved', name };
  const pattern = matchSuffixPattern(lower, RESERVED_REPO_PATTERNS);
  return pattern ? { kind: 'pattern', pattern } : null;
}

/** The message Forgejo shows for a reserved name or pattern. */
export function describeNameProblem(problem: NameProblem): string {
  return problem.kind === 'reserved'
    ? `name is reserved [name: ${problem.name}]`
    : `name pattern is not allowed [pattern: ${problem.pattern}]`;
}

const EMAIL =
  /^[\w.!#$%&'*+/=?^`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/;

export function isValidEmail(email: string): boolean {
  return email.length <= 254 && EMAIL.test(email);
}
