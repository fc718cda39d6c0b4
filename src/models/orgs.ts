// Teams, team members and organization membership. The team named `Owners`
// (authorize = owner) is what makes someone an organization owner.
import type { Selectable } from 'kysely';
import type { Queryable } from './database.ts';
import type { TeamTable } from './tables.ts';

export const OWNER_TEAM_NAME = 'Owners';

export interface Team {
  id: number;
  orgId: number;
  name: string;
  lowerName: string;
  description: string;
  authorize: number;
  includesAllRepositories: boolean;
  canCreateOrgRepo: boolean;
  units: Record<string, string>;
  createdUnix: number;
}

function parseUnits(text: string): Record<string, string> {
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, string>) : {};
  } catch {
    return {};
  }
}

function teamFromRow(row: Selectable<TeamTable>): Team {
  return {
    id: row.id,
    orgId: row.org_id,
    name: row.name,
    lowerName: row.lower_name,
    description: row.description,
    authorize: row.authorize,
    includesAllRepositories: row.includes_all_repositories === 1,
    canCreateOrgRepo: row.can_create_org_repo === 1,
    units: parseUnits(row.units),
    createdUnix: row.created_unix,
  };
}

export interface NewTeam {
  orgId: number;
  name: string;
  description: string;
  authorize: number;
  includesAllRepositories: boolean;
  canCreateOrgRepo: boolean;
  units: Record<string, string>;
  nowSec: number;
}

export async function insertTeam(db: Queryable, team: NewTeam): Promise<Team> {
  const row = await db
    .insertInto('team')
    .values({
      org_id: team.orgId,
      lower_name: team.name.toLowerCase(),
      name: team.name,
      description: team.description,
      authorize: team.authorize,
      includes_all_repositories: team.includesAllRepositories ? 1 : 0,
      can_create_org_repo: team.canCreateOrgRepo ? 1 : 0,
      units: JSON.stringify(team.units),
      created_unix: team.nowSec,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return teamFromRow(row);
}

export async function findTeamById(db: Queryable, id: number): Promise<Team | null> {
  const row = await db.selectFrom('team').selectAll().where('id', '=', id).executeTakeFirst();
  return row ? teamFromRow(row) : null;
}

export async function findTeamByName(db: Queryable, orgId: number, name: string): Promise<Team | null> {
  const row = await db
    .selectFrom('team')
    .selectAll()
    .where('org_id', '=', orgId)
    .where('lower_name', '=', name.toLowerCase())
    .executeTakeFirst();
  return row ? teamFromRow(row) : null;
}

/** Adds a user to a team and to the organization; adding twice is a no-op. */
export async function addTeamMember(db: Queryable, team: Team, uid: number): Promise<void> {
  await db
    .insertInto('team_user')
    .values({ org_id: team.orgId, team_id: team.id, uid })
    .onConflict((oc) => oc.columns(['team_id', 'uid']).doNothing())
    .execute();
  await db
    .insertInto('org_user')
    .values({ org_id: team.orgId, uid, is_public: 0 })
    .onConflict((oc) => oc.columns(['uid', 'org_id']).doNothing())
    .execute();
}

/** Removes a user from a team, and from the organization when it was their last team. */
export async function removeTeamMember(db: Queryable, team: Team, uid: number): Promise<void> {
  await db.deleteFrom('team_user').where('team_id', '=', team.id).where('uid', '=', uid).execute();
  const remaining = await db
    .selectFrom('team_user')
    .select('id')
    .where('org_id', '=', team.orgId)
    .where('uid', '=', uid)
    .limit(1)
    .executeTakeFirst();
  if (!remaining) await db.deleteFrom('org_user').where('org_id', '=', team.orgId).where('uid', '=', uid).execute();
}

export async function countTeamMembers(db: Queryable, teamId: number): Promise<number> {
  const row = await db
    .selectFrom('team_user')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('team_id', '=', teamId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function isTeamMember(db: Queryable, teamId: number, uid: number): Promise<boolean> {
  const row = await db
    .selectFrom('team_user')
    .select('id')
    .where('team_id', '=', teamId)
    .where('uid', '=', uid)
    .executeTakeFirst();
  return row !== undefined;
}

export async function isOrganizationOwner(db: Queryable, orgId: number, uid: number): Promise<boolean> {
  const row = await db
    .selectFrom('team_user')
    .innerJoin('team', 'team.id', 'team_user.team_id')
    .select('team_user.id')
    .where('team_user.org_id', '=', orgId)
    .where('team_user.uid', '=', uid)
    .where('team.lower_name', '=', OWNER_TEAM_NAME.toLowerCase())
    .executeTakeFirst();
  return row !== undefined;
}

export async function isOrganizationMember(db: Queryable, orgId: number, uid: number): Promise<boolean> {
  const row = await db
    .selectFrom('org_user')
    .select('id')
    .where('org_id', '=', orgId)
    .where('uid', '=', uid)
    .executeTakeFirst();
  return row !== undefined;
}

/** Teams of `uid` in `orgId` that grant access to `repoId` (all-repositories teams, or linked ones). */
export async function teamsGrantingRepo(db: Queryable, orgId: number, uid: number, repoId: number): Promise<Team[]> {
  const rows = await db
    .selectFrom('team')
    .innerJoin('team_user', 'team_user.team_id', 'team.id')
    .selectAll('team')
    .where('team_user.uid', '=', uid)
    .where('team.org_id', '=', orgId)
    .where((eb) =>
      eb.or([
        eb('team.includes_all_repositories', '=', 1),
        eb.exists(
          eb
            .selectFrom('team_repo')
            .select('team_repo.id')
            .whereRef('team_repo.team_id', '=', 'team.id')
            .where('team_repo.repo_id', '=', repoId),
        ),
      ]),
    )
    .execute();
  return rows.map(teamFromRow);
}

export async function countOwnedRepositories(db: Queryable, ownerId: number): Promise<number> {
  const row = await db
    .selectFrom('repository')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('owner_id', '=', ownerId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function userInRepoCreatingTeam(db: Queryable, orgId: number, uid: number): Promise<boolean> {
  const row = await db
    .selectFrom('team_user')
    .innerJoin('team', 'team.id', 'team_user.team_id')
    .select('team_user.id')
    .where('team_user.org_id', '=', orgId)
    .where('team_user.uid', '=', uid)
    .where('team.can_create_org_repo', '=', 1)
    .executeTakeFirst();
  return row !== undefined;
}
