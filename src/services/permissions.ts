// Who may do what with a repository or an organization: Forgejo's access modes
// (models/perm/access/repo_permission.go) computed from ownership, the Owners
// team, team grants (per unit) and collaborations, and who may know that an
// account exists (restricted users see only what they belong to).
import { AccessMode } from '../modules/access-mode.ts';
import type { Db } from '../models/database.ts';
import { findCollaboratorMode } from '../models/repos.ts';
import type { Repository, RepositoryAccess } from '../models/repos.ts';
import {
  isOrganizationMember,
  isOrganizationOwner,
  teamsGrantingRepo,
  userInRepoCreatingTeam,
} from '../models/orgs.ts';
import { PERMISSION_UNITS, teamUnitMode } from '../modules/team-units.ts';
import type { PermissionUnit } from '../modules/team-units.ts';
import type { AccountAccess, User } from '../models/users.ts';

/**
 * What an actor may do with one repository: Forgejo's Permission. `units`
 * is null where every unit has the repository-wide `mode` (users' own
 * repositories, owners, anonymous callers); in an organization's repository
 * it holds each unit's level (a unit left out is none).
 */
export interface RepoPermission {
  mode: number;
  units: Readonly<Partial<Record<PermissionUnit, number>>> | null;
}

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

  /**
   * Whether the actor may know that an account exists (Forgejo:
   * models/organization/org.go HasOrgOrUserVisible). Anonymous callers see
   * public accounts; everyone signed in sees themselves; site admins see
   * all. A private organization, and for a restricted user every other
   * account (public users and public or limited organizations too), is seen
   * only by its members.
   */
  async canSeeAccount(actor: Actor, account: AccountAccess): Promise<boolean> {
    const doer = actor.doer;
    if (!doer) return account.visibility === 'public';
    if (this.isSiteAdmin(actor) || doer.id === account.id) return true;
    if (account.visibility === 'private' || doer.restricted) {
      // A user account has no members, so this is false for it.
      return account.isOrganization && (await isOrganizationMember(this.db, account.id, doer.id));
    }
    return true;
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

  /** The actor's repository-wide access mode (none means: may not know it exists). */
  async repoAccessMode(actor: Actor, repo: RepositoryAccess, owner: AccountAccess): Promise<number> {
    return (await this.repoPermission(actor, repo, owner)).mode;
  }

  /**
   * The actor's permission on a repository, following Forgejo's
   * GetUserRepoPermission (models/perm/access/repo_permission.go):
   *
   * - anonymous callers read public repositories of public owners;
   * - an owner the actor may not see (canSeeAccount) hides its repositories,
   *   except from their collaborators;
   * - the repository's owner and site admins are owners; so are members of a
   *   team with admin level or more;
   * - otherwise the level is the highest of: read for a public repository
   *   (not for restricted users), the collaboration, the granting teams;
   * - in an organization, each unit then gets its own level: a
   *   collaborator's level on every unit, raised by each granting team's
   *   level for that unit (its `units_map`); a unit no team grants is
   *   readable in a public repository, except by restricted users.
   */
  async repoPermission(actor: Actor, repo: RepositoryAccess, owner: AccountAccess): Promise<RepoPermission> {
    if (actor.taskRepoId !== undefined) {
      // A task token writes its own repository and reads public ones, nothing more.
      if (actor.taskRepoId === repo.id) return { mode: AccessMode.write, units: null };
      return {
        mode: !repo.isPrivate && owner.visibility === 'public' ? AccessMode.read : AccessMode.none,
        units: null,
      };
    }
    const doer = actor.doer;
    // Site admins and the owner see every account they could be asked about: no visibility check needed.
    if (doer && (this.isSiteAdmin(actor) || doer.id === repo.ownerId)) return { mode: AccessMode.owner, units: null };
    if (!doer && repo.isPrivate) return NO_ACCESS;
    const collaboratorMode = doer ? await findCollaboratorMode(this.db, repo.id, doer.id) : null;
    if (collaboratorMode === null && !(await this.canSeeAccount(actor, owner))) return NO_ACCESS;
    if (!doer) return { mode: AccessMode.read, units: null };

    let mode: number = !doer.restricted && !repo.isPrivate ? AccessMode.read : AccessMode.none;
    mode = Math.max(mode, collaboratorMode ?? AccessMode.none);
    if (!owner.isOrganization) return { mode, units: null };

    const teams = await teamsGrantingRepo(this.db, owner.id, doer.id, repo.id);
    // A team with admin access (the Owners team among them) makes its members repository owners.
    if (teams.some((team) => team.authorize >= AccessMode.admin)) return { mode: AccessMode.owner, units: null };
    for (const team of teams) mode = Math.max(mode, team.authorize);

    const units: Partial<Record<PermissionUnit, number>> = {};
    for (const unit of enabledUnits(repo)) {
      let level: number = collaboratorMode !== null ? mode : AccessMode.none;
      let granted = false;
      for (const team of teams) {
        const teamMode = teamUnitMode(team, unit);
        if (teamMode > AccessMode.none) {
          level = Math.max(level, teamMode);
          granted = true;
        }
      }
      if (!granted && collaboratorMode === null && !repo.isPrivate && !doer.restricted) level = AccessMode.read;
      if (level > AccessMode.none) units[unit] = level;
    }
    return { mode, units };
  }
}

const NO_ACCESS: RepoPermission = Object.freeze({ mode: AccessMode.none, units: null });

/** Forgejo's repo.Units: `code` always, the other units while switched on. */
function enabledUnits(repo: Pick<Repository, 'units'>): PermissionUnit[] {
  return PERMISSION_UNITS.filter((unit) => unit === 'code' || repo.units[unit]);
}

/** The level on one unit (Permission.UnitAccessMode); a switched-off unit is none. */
export function unitAccessMode(
  permission: RepoPermission,
  repo: Pick<Repository, 'units'>,
  unit: PermissionUnit,
): number {
  if (unit !== 'code' && !repo.units[unit]) return AccessMode.none;
  return permission.units === null ? permission.mode : (permission.units[unit] ?? AccessMode.none);
}

/** Whether the repository exists for the actor (Permission.HasAccess): read on at least one unit. */
export function hasRepoAccess(permission: RepoPermission): boolean {
  if (permission.units === null) return permission.mode >= AccessMode.read;
  return Object.values(permission.units).some((level) => level >= AccessMode.read);
}
