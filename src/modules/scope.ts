// Where Actions data, runners and webhooks belong: the instance, a user, an
// organization or a repository. One type for the whole codebase, so the same
// rules serve every scope as Forgejo's do (its ownerID/repoID pairs in
// models/actions/runner.go, variable.go, models/secret/secret.go,
// models/webhook/webhook.go).
//
// Every Scope also carries its storage columns, Forgejo's convention for the
// (owner_id, repo_id) pair of a row: (0, 0) the instance, (owner, 0) a user or
// an organization, (0, repo) a repository. Model functions take only those
// columns (ScopeColumns), which any Scope is, and which a stored row gives back
// without knowing whether its owner is a user or an organization.

/** The (owner_id, repo_id) pair of a scoped row. */
export interface ScopeColumns {
  readonly ownerId: number;
  readonly repoId: number;
}

export type Scope =
  | { readonly kind: 'instance'; readonly ownerId: 0; readonly repoId: 0 }
  | { readonly kind: 'user' | 'org'; readonly ownerId: number; readonly repoId: 0 }
  /** repoOwnerId: the repository's owner, whose scope the repository inherits from. */
  | { readonly kind: 'repo'; readonly ownerId: 0; readonly repoId: number; readonly repoOwnerId: number };

export const INSTANCE_SCOPE: Scope = { kind: 'instance', ownerId: 0, repoId: 0 };

export function userScope(user: { readonly id: number }): Scope {
  return { kind: 'user', ownerId: user.id, repoId: 0 };
}

export function orgScope(org: { readonly id: number }): Scope {
  return { kind: 'org', ownerId: org.id, repoId: 0 };
}

export function repoScope(repo: { readonly id: number; readonly ownerId: number }): Scope {
  return { kind: 'repo', ownerId: 0, repoId: repo.id, repoOwnerId: repo.ownerId };
}

/** Just the storage columns (a plain pair, e.g. for a map key or an insert). */
export function scopeColumns(scope: ScopeColumns): ScopeColumns {
  return { ownerId: scope.ownerId, repoId: scope.repoId };
}
