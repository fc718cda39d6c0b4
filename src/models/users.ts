// Users and organizations share the `user` table (type 0 = individual, 1 = organization).
import type { Insertable, Selectable } from 'kysely';
import { columnsOf } from './array-rows.ts';
import type { Queryable } from './database.ts';
import type { UserTable } from './tables.ts';

export type Visibility = 'public' | 'limited' | 'private';
const VISIBILITIES: readonly Visibility[] = ['public', 'limited', 'private'];

export interface User {
  id: number;
  name: string;
  lowerName: string;
  fullName: string;
  email: string;
  passwordHash: string;
  loginName: string;
  sourceId: number;
  isOrganization: boolean;
  visibility: Visibility;
  isAdmin: boolean;
  isActive: boolean;
  prohibitLogin: boolean;
  mustChangePassword: boolean;
  restricted: boolean;
  description: string;
  website: string;
  location: string;
  language: string;
  pronouns: string;
  repoAdminChangeTeamAccess: boolean;
  createdUnix: number;
  updatedUnix: number;
  lastLoginUnix: number;
}

/**
 * What the repository guards decide with about an account (services/permissions.ts,
 * http/guards.ts): a full User satisfies it; the GET of a repository variable
 * reads only these columns (repos.ts's findOwnerRepositoryAndVariable).
 */
export type AccountAccess = Pick<User, 'id' | 'name' | 'isOrganization' | 'visibility'>;

export function visibilityFromCode(code: number): Visibility {
  return VISIBILITIES[code] ?? 'public';
}

export function visibilityCode(visibility: Visibility): number {
  return VISIBILITIES.indexOf(visibility);
}

/** The user table's columns, for statements that read rows as arrays (array-rows.ts). */
export const USER_COLUMNS = columnsOf<UserTable>()([
  'id',
  'lower_name',
  'name',
  'full_name',
  'email',
  'lower_email',
  'passwd',
  'login_name',
  'source_id',
  'type',
  'visibility',
  'is_admin',
  'is_active',
  'prohibit_login',
  'must_change_password',
  'restricted',
  'description',
  'website',
  'location',
  'language',
  'pronouns',
  'repo_admin_change_team_access',
  'created_unix',
  'updated_unix',
  'last_login_unix',
]);

/** The row of USER_COLUMNS's values from index `at` on: an object literal, one shape, no work per key. */
export function userRowFromValues(values: readonly unknown[], at: number): Selectable<UserTable> {
  return {
    id: values[at] as number,
    lower_name: values[at + 1] as string,
    name: values[at + 2] as string,
    full_name: values[at + 3] as string,
    email: values[at + 4] as string,
    lower_email: values[at + 5] as string,
    passwd: values[at + 6] as string,
    login_name: values[at + 7] as string,
    source_id: values[at + 8] as number,
    type: values[at + 9] as number,
    visibility: values[at + 10] as number,
    is_admin: values[at + 11] as number,
    is_active: values[at + 12] as number,
    prohibit_login: values[at + 13] as number,
    must_change_password: values[at + 14] as number,
    restricted: values[at + 15] as number,
    description: values[at + 16] as string,
    website: values[at + 17] as string,
    location: values[at + 18] as string,
    language: values[at + 19] as string,
    pronouns: values[at + 20] as string,
    repo_admin_change_team_access: values[at + 21] as number,
    created_unix: values[at + 22] as number,
    updated_unix: values[at + 23] as number,
    last_login_unix: values[at + 24] as number,
  };
}

export function userFromRow(row: Selectable<UserTable>): User {
  return {
    id: row.id,
    name: row.name,
    lowerName: row.lower_name,
    fullName: row.full_name,
    email: row.email,
    passwordHash: row.passwd,
    loginName: row.login_name,
    sourceId: row.source_id,
    isOrganization: row.type === 1,
    visibility: visibilityFromCode(row.visibility),
    isAdmin: row.is_admin === 1,
    isActive: row.is_active === 1,
    prohibitLogin: row.prohibit_login === 1,
    mustChangePassword: row.must_change_password === 1,
    restricted: row.restricted === 1,
    description: row.description,
    website: row.website,
    location: row.location,
    language: row.language,
    pronouns: row.pronouns,
    repoAdminChangeTeamAccess: row.repo_admin_change_team_access === 1,
    createdUnix: row.created_unix,
    updatedUnix: row.updated_unix,
    lastLoginUnix: row.last_login_unix,
  };
}

export interface NewAccount {
  name: string;
  fullName?: string;
  email?: string;
  passwordHash?: string;
  isOrganization: boolean;
  visibility?: Visibility;
  isAdmin?: boolean;
  mustChangePassword?: boolean;
  restricted?: boolean;
  description?: string;
  website?: string;
  location?: string;
  loginName?: string;
  sourceId?: number;
  repoAdminChangeTeamAccess?: boolean;
  nowSec: number;
}

export async function insertAccount(db: Queryable, account: NewAccount): Promise<User> {
  const row: Insertable<UserTable> = {
    lower_name: account.name.toLowerCase(),
    name: account.name,
    full_name: account.fullName ?? '',
    email: account.email ?? '',
    lower_email: (account.email ?? '').toLowerCase(),
    passwd: account.passwordHash ?? '',
    login_name: account.loginName ?? '',
    source_id: account.sourceId ?? 0,
    type: account.isOrganization ? 1 : 0,
    visibility: visibilityCode(account.visibility ?? 'public'),
    is_admin: account.isAdmin ? 1 : 0,
    is_active: 1,
    prohibit_login: 0,
    must_change_password: account.mustChangePassword ? 1 : 0,
    restricted: account.restricted ? 1 : 0,
    description: account.description ?? '',
    website: account.website ?? '',
    location: account.location ?? '',
    repo_admin_change_team_access: account.repoAdminChangeTeamAccess ? 1 : 0,
    created_unix: account.nowSec,
    updated_unix: account.nowSec,
  };
  const inserted = await db.insertInto('user').values(row).returningAll().executeTakeFirstOrThrow();
  return userFromRow(inserted);
}

/** No stored name holds U+0000 (names are validated), and PostgreSQL refuses it in a query: such a name finds nothing. */
export function cannotBeStoredName(name: string): boolean {
  return name.includes('\u0000');
}

export async function findAccountByName(db: Queryable, name: string): Promise<User | null> {
  if (cannotBeStoredName(name)) return null;
  const row = await db.selectFrom('user').selectAll().where('lower_name', '=', name.toLowerCase()).executeTakeFirst();
  return row ? userFromRow(row) : null;
}

export async function findAccountById(db: Queryable, id: number): Promise<User | null> {
  const row = await db.selectFrom('user').selectAll().where('id', '=', id).executeTakeFirst();
  return row ? userFromRow(row) : null;
}

export async function emailInUse(db: Queryable, email: string): Promise<boolean> {
  const row = await db
    .selectFrom('user')
    .select('id')
    .where('lower_email', '=', email.toLowerCase())
    .where('type', '=', 0)
    .executeTakeFirst();
  return row !== undefined;
}

/** The individual user with this e-mail address (case-insensitive), for signing in by e-mail. */
export async function findUserByEmail(db: Queryable, email: string): Promise<User | null> {
  if (cannotBeStoredName(email)) return null;
  const row = await db
    .selectFrom('user')
    .selectAll()
    .where('lower_email', '=', email.toLowerCase())
    .where('type', '=', 0)
    .executeTakeFirst();
  return row ? userFromRow(row) : null;
}

export async function countIndividualUsers(db: Queryable): Promise<number> {
  const row = await db
    .selectFrom('user')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('type', '=', 0)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function setPasswordHash(
  db: Queryable,
  userId: number,
  passwordHash: string,
  mustChange: boolean,
  nowSec: number,
): Promise<void> {
  await db
    .updateTable('user')
    .set({ passwd: passwordHash, must_change_password: mustChange ? 1 : 0, updated_unix: nowSec })
    .where('id', '=', userId)
    .execute();
}

/** Replaces the password hash only while it is still `expected`; true when it did. */
export async function replacePasswordHash(
  db: Queryable,
  userId: number,
  expected: string,
  next: string,
): Promise<boolean> {
  const result = await db
    .updateTable('user')
    .set({ passwd: next })
    .where('id', '=', userId)
    .where('passwd', '=', expected)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export async function deleteAccount(db: Queryable, id: number): Promise<void> {
  await db.deleteFrom('user').where('id', '=', id).execute();
}

/** Accounts by id, for lists that show the user of each row; missing ids are absent from the map. */
export async function findAccountsByIds(db: Queryable, ids: readonly number[]): Promise<Map<number, User>> {
  const unique = [...new Set(ids)].filter((id) => id > 0);
  if (unique.length === 0) return new Map();
  const rows = await db.selectFrom('user').selectAll().where('id', 'in', unique).execute();
  return new Map(rows.map((row) => [row.id, userFromRow(row)]));
}

/**
 * Forgejo's ghost: who a run or comment shows when its user has been deleted
 * (models/user GhostUserID = -1).
 */
export function ghostUser(): User {
  return systemUser(-1, 'Ghost');
}

/** Forgejo's ActionsUserID. */
const ACTIONS_USER_ID = -2;

/** Forgejo's Actions bot (ActionsUserID = -2): the doer behind a task token. */
export function actionsUser(): User {
  return {
    ...systemUser(ACTIONS_USER_ID, 'forgejo-actions'),
    fullName: 'Forgejo Actions',
    isActive: true,
    email: 'noreply@forgejo.org',
  };
}

/**
 * Who a stored user id stands for (Forgejo's GetPossibleUserByID): the Actions
 * user for its id (it has no row), else the account, else the ghost.
 */
export async function findPossibleUserById(db: Queryable, id: number): Promise<User> {
  if (id === ACTIONS_USER_ID) return actionsUser();
  return (await findAccountById(db, id)) ?? ghostUser();
}

/** True for the doer of a task token (Forgejo's User.IsActions). */
export function isActionsUser(user: Pick<User, 'id'>): boolean {
  return user.id === ACTIONS_USER_ID;
}

function systemUser(id: number, name: string): User {
  return {
    id,
    name,
    lowerName: name.toLowerCase(),
    fullName: '',
    email: '',
    passwordHash: '',
    loginName: '',
    sourceId: 0,
    isOrganization: false,
    visibility: 'public',
    isAdmin: false,
    isActive: false,
    prohibitLogin: false,
    mustChangePassword: false,
    restricted: false,
    description: '',
    website: '',
    location: '',
    language: '',
    pronouns: '',
    repoAdminChangeTeamAccess: false,
    createdUnix: 0,
    updatedUnix: 0,
    lastLoginUnix: 0,
  };
}
