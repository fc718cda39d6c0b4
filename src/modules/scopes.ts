// Access-token scopes as Forgejo defines them (models/auth/access_token_scope.go):
// `all`, `public-only`, and read/write per category; write implies read.

export const SCOPE_CATEGORIES = [
  'activitypub',
  'admin',
  'misc',
  'notification',
  'organization',
  'package',
  'issue',
  'repository',
  'user',
] as const;
export type ScopeCategory = (typeof SCOPE_CATEGORIES)[number];
export type ScopeLevel = 'read' | 'write';

export interface AccessTokenScope {
  readonly all: boolean;
  readonly publicOnly: boolean;
  readonly levels: ReadonlyMap<ScopeCategory, ScopeLevel>;
}

export class InvalidScopeError extends Error {
  constructor(readonly scope: string) {
    super(`invalid access token scope: ${scope}`);
  }
}

const CATEGORY_SET: ReadonlySet<string> = new Set(SCOPE_CATEGORIES);

/** Parses scope strings (each may itself be comma-separated) into a normalised scope. */
export function parseScopes(items: readonly string[]): AccessTokenScope {
  let all = false;
  let publicOnly = false;
  const levels = new Map<ScopeCategory, ScopeLevel>();
  for (const raw of items.join(',').split(',')) {
    const item = raw.trim();
    if (item === '') continue;
    if (item === 'all') {
      all = true;
      continue;
    }
    if (item === 'public-only') {
      publicOnly = true;
      continue;
    }
    const match = /^(read|write):([a-z]+)$/.exec(item);
    if (!match || !CATEGORY_SET.has(match[2] as string)) throw new InvalidScopeError(item);
    const category = match[2] as ScopeCategory;
    const level = match[1] as ScopeLevel;
    if (levels.get(category) !== 'write') levels.set(category, level);
  }
  if (!all && SCOPE_CATEGORIES.every((c) => levels.get(c) === 'write')) all = true;
  if (all) levels.clear();
  return { all, publicOnly, levels };
}

/** The normalised list in Forgejo's canonical order (what the API shows). */
export function scopeToList(scope: AccessTokenScope): string[] {
  const list: string[] = [];
  if (scope.publicOnly) list.push('public-only');
  if (scope.all) {
    list.push('all');
    return list;
  }
  for (const category of SCOPE_CATEGORIES) {
    const level = scope.levels.get(category);
    if (level) list.push(`${level}:${category}`);
  }
  return list;
}

export function isEmptyScope(scope: AccessTokenScope): boolean {
  return !scope.all && scope.levels.size === 0;
}

export function scopeAllows(scope: AccessTokenScope, category: ScopeCategory, level: ScopeLevel): boolean {
  if (scope.all) return true;
  const granted = scope.levels.get(category);
  return granted === 'write' || (granted === 'read' && level === 'read');
}

export function serializeScope(scope: AccessTokenScope): string {
  return scopeToList(scope).join(',');
}
