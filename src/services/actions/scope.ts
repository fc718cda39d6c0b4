// The one abstraction that lets the same rules serve the user, organization and
// repository scopes of Actions data (Forgejo: ownerID/repoID pairs). The HTTP
// layer builds a scope from what its guards loaded; services only see this.
import type { Repository } from '../../models/repos.ts';
import type { User } from '../../models/users.ts';

export type ActionsScopeKind = 'user' | 'org' | 'repo';

export interface ActionsScope {
  readonly kind: ActionsScopeKind;
  /** The user or organization id; 0 for a repository scope. */
  readonly ownerId: number;
  /** The repository id; 0 for a user or organization scope. */
  readonly repoId: number;
}

export function userScope(user: User): ActionsScope {
  return { kind: 'user', ownerId: user.id, repoId: 0 };
}

export function orgScope(org: User): ActionsScope {
  return { kind: 'org', ownerId: org.id, repoId: 0 };
}

export function repoScope(repo: Repository): ActionsScope {
  return { kind: 'repo', ownerId: 0, repoId: repo.id };
}

/** The scope of an account's own data, whether it is a user or an organization. */
export function accountScope(account: User): ActionsScope {
  return account.isOrganization ? orgScope(account) : userScope(account);
}

/**
 * Associated data of a secret's ciphertext: its place. A ciphertext copied to
 * another row (scope or name) fails to decrypt instead of leaking there.
 */
export function secretAssociatedData(ownerId: number, repoId: number, name: string): string {
  return `secret:${ownerId}:${repoId}:${name}`;
}
