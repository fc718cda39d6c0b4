// Organizations, their teams and memberships.
import { AppError } from '../modules/errors.ts';
import type { Clock } from '../modules/clock.ts';
import { AccessMode, accessModeName } from '../modules/access-mode.ts';
import { minUnitAccessMode, parseAccessModeInput } from '../modules/team-units.ts';
import { isAlphaDashDot } from '../modules/names.ts';
import type { Db } from '../models/database.ts';
import { isUniqueViolation } from '../models/database.ts';
import {
  OWNER_TEAM_NAME,
  addTeamMember,
  countOwnedRepositories,
  countTeamMembers,
  findTeamById,
  findTeamByName,
  insertTeam,
  isTeamMember,
  removeTeamMember,
} from '../models/orgs.ts';
import type { Team } from '../models/orgs.ts';
import { deleteAccount, findAccountByName, insertAccount } from '../models/users.ts';
import type { User, Visibility } from '../models/users.ts';
import { AccountService } from './accounts.ts';
import type { DomainEvents } from './events.ts';

export interface CreateOrgInput {
  username: string;
  fullName?: string;
  email?: string;
  description?: string;
  website?: string;
  location?: string;
  visibility?: Visibility;
  repoAdminChangeTeamAccess?: boolean;
}

export interface CreateTeamInput {
  name: string;
  description?: string;
  permission?: string;
  includesAllRepositories?: boolean;
  canCreateOrgRepo?: boolean;
  units?: string[];
  unitsMap?: Record<string, string>;
}

export class OrgService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly events: DomainEvents,
  ) {}

  /** Creates the organization with its Owners team, the creator its first member. */
  async create(creator: User, input: CreateOrgInput): Promise<User> {
    AccountService.checkUsableName(input.username);
    try {
      return await this.db.transaction().execute(async (tx) => {
        if (await findAccountByName(tx, input.username))
          throw AppError.unprocessable(`user already exists [name: ${input.username}]`);
        const nowSec = this.clock.nowSec();
        const org = await insertAccount(tx, {
          name: input.username,
          fullName: input.fullName,
          email: input.email,
          description: input.description,
          website: input.website,
          location: input.location,
          visibility: input.visibility,
          repoAdminChangeTeamAccess: input.repoAdminChangeTeamAccess,
          isOrganization: true,
          nowSec,
        });
        const owners = await insertTeam(tx, {
          orgId: org.id,
          name: OWNER_TEAM_NAME,
          description: '',
          authorize: AccessMode.owner,
          includesAllRepositories: true,
          canCreateOrgRepo: true,
          units: {},
          nowSec,
        });
        await addTeamMember(tx, owners, creator.id);
        return org;
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw AppError.unprocessable(`user already exists [name: ${input.username}]`);
      throw error;
    }
  }

  /** Deleting an organization that still owns repositories would orphan them: refused. */
  async delete(org: User): Promise<void> {
    // Teams, memberships, Actions data, runners and hooks go with it (services/owner-deletion.ts).
    await this.events.transaction(this.db, async (tx) => {
      if ((await countOwnedRepositories(tx, org.id)) > 0) {
        throw AppError.conflict(
          `user still has ownership of repositories [uid: ${org.id}]; delete or transfer them first`,
        );
      }
      await this.events.record(tx, { type: 'account.deleted', account: org });
      await deleteAccount(tx, org.id);
    });
  }

  async createTeam(org: User, input: CreateTeamInput): Promise<Team> {
    if (!isAlphaDashDot(input.name)) throw AppError.unprocessable('[Name]: AlphaDashDot');
    if (input.name.length > 255) throw AppError.unprocessable('[Name]: MaxSize');
    // Forgejo (routers/api/v1/org/team.go CreateTeam): an unknown or absent
    // permission is "none"; below admin, a units map sets the team's level to
    // its lowest unit level above none (none when every unit is none).
    let authorize = parseAccessModeInput(input.permission ?? '');
    const unitsMap = input.unitsMap ?? {};
    if (authorize < AccessMode.admin && Object.keys(unitsMap).length > 0) authorize = minUnitAccessMode(unitsMap);
    const units =
      Object.keys(unitsMap).length > 0
        ? unitsMap
        : Object.fromEntries((input.units ?? []).map((u) => [u, accessModeName(authorize)]));
    try {
      return await this.db.transaction().execute(async (tx) => {
        if (await findTeamByName(tx, org.id, input.name))
          throw AppError.unprocessable(`team already exists [org_id: ${org.id}, name: ${input.name}]`);
        return insertTeam(tx, {
          orgId: org.id,
          name: input.name,
          description: input.description ?? '',
          authorize,
          includesAllRepositories: input.includesAllRepositories ?? false,
          canCreateOrgRepo: input.canCreateOrgRepo ?? false,
          units,
          nowSec: this.clock.nowSec(),
        });
      });
    } catch (error) {
      if (isUniqueViolation(error))
        throw AppError.unprocessable(`team already exists [org_id: ${org.id}, name: ${input.name}]`);
      throw error;
    }
  }

  async findTeam(id: number): Promise<Team | null> {
    return findTeamById(this.db, id);
  }

  async addMember(team: Team, user: User): Promise<void> {
    if (user.isOrganization) throw AppError.unprocessable(`${user.name} is an organization, not a user`);
    await this.db.transaction().execute((tx) => addTeamMember(tx, team, user.id));
  }

  /** The last member of the Owners team cannot leave: the organization would be unmanageable. */
  async removeMember(team: Team, user: User): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      if (!(await isTeamMember(tx, team.id, user.id))) return;
      if (team.lowerName === OWNER_TEAM_NAME.toLowerCase() && (await countTeamMembers(tx, team.id)) <= 1) {
        throw AppError.conflict(`user is the last member of the owner team [uid: ${user.id}, org_id: ${team.orgId}]`);
      }
      await removeTeamMember(tx, team, user.id);
    });
  }
}
