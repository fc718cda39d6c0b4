// Who may do what with a repository or an organization: Forgejo's access modes
// (models/perm/access/repo_permission.go) computed from ownership, the Owners
// team, team grants and collaborations.
import { AccessMode } from '../modules/access-mode.ts';
import type { Db } from '../models/database.ts';
import { findCollaboratorMode } from '../models/repos.ts';
import type { Repository } from '../models/repos.ts';
import { isOrganizationMember, isOrganizationOwner, teamsGrantingRepo, userInRepoCreatingTeam } from '../models/orgs.ts';
import type { User } from '../models/users.ts';

export interface Actor {
  doer: User | null;
  /** False for tokens that must not use site-admin powers (public-only). */
  allowAdminOverride: boolean;
  /** A running task's token: write access to this repository only. */
  taskRepoId?: number;
}

export class PermissionService {
  constructor(private readonly db: Db) {}

  isSiteAdmin(actor: Actor): boolean {
    return actor.doer !== null && actor.doer.isAdmin && actor.allowAdminOverride;
  }

  /** Whether the actor may know that an account exists (Forgejo: IsUserVisibleToViewer / HasOrgOrUserVisible). */
  async canSeeAccount(actor: Actor, account: User): Promise<boolean> {
    if (account.visibility === 'public') return true;
    const doer = actor.doer;
    if (!doer) return false;
    if (account.visibility === 'limited' || this.isSiteAdmin(actor) || doer.id === account.id) return true;
    return account.isOrganization && (await isOrganizationMember(this.db, account.id, doer.id));
  }

  async isOrgOwner(actor: Actor, org: User): Promise<boolean> {
    if (this.isSiteAdmin(actor)) return true;
    return actor.doer !== null && (await isOrganizationOwner(this.db, org.id, actor.doer.id));
  }

  async isOrgMember(actor: Actor, org: User): Promise<boolean> {
    if (this.isSiteAdmin(actor)) return true;
    return actor.doer !== null && (await isOrganizationMember(this.db, org.id, actor.doer.id));
  }

  /** Forgejo's CanCreateOrgRepo: site admins and members of a team with can_create_org_repo (Owners has it). */
  async canCreateOrgRepo(actor: Actor, org: User): Promise<boolean> {
    if (this.isSiteAdmin(actor)) return true;
    return actor.doer !== null && (await userInRepoCreatingTeam(this.db, org.id, actor.doer.id));
  }

  /** The actor's access mode on a repository (none means: may not know it exists). */
  async repoAccessMode(actor: Actor, repo: Repository, owner: User): Promise<number> {
    if (actor.taskRepoId !== undefined) {
      if (actor.taskRepoId === repo.id) return AccessMode.write;
      return !repo.isPrivate && owner.visibility === 'public' ? AccessMode.read : AccessMode.none;
    }
    const doer = actor.doer;
    if (this.isSiteAdmin(actor)) return AccessMode.owner;
    if (doer && doer.id === repo.ownerId) return AccessMode.owner;
    let mode: number = AccessMode.none;
    if (doer && owner.isOrganization) {
      if (await isOrganizationOwner(this.db, owner.id, doer.id)) return AccessMode.owner;
      for (const team of await teamsGrantingRepo(this.db, owner.id, doer.id, repo.id)) {
        // A team with admin access makes its members repository owners.
        if (team.authorize >= AccessMode.admin) return AccessMode.owner;
        mode = Math.max(mode, team.authorize);
      }
    }
    if (doer) mode = Math.max(mode, (await findCollaboratorMode(this.db, repo.id, doer.id)) ?? AccessMode.none);
    if (mode === AccessMode.none && !repo.isPrivate && (await this.canSeeAccount(actor, owner))) mode = AccessMode.read;
    return mode;
  }
}
