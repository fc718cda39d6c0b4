// Personal access tokens: only the SHA-256 digest of the token is stored.
import type { CompiledQuery, Selectable } from 'kysely';
import type { Queryable } from './database.ts';
import type { AccessTokenTable, UserTable } from './tables.ts';
import { userFromRow } from './users.ts';
import type { User } from './users.ts';

export interface AccessToken {
  id: number;
  uid: number;
  name: string;
  tokenHash: string;
  tokenLastEight: string;
  scope: string;
  createdUnix: number;
  updatedUnix: number;
}

function tokenFromRow(row: Selectable<AccessTokenTable>): AccessToken {
  return {
    id: row.id,
    uid: row.uid,
    name: row.name,
    tokenHash: row.token_hash,
    tokenLastEight: row.token_last_eight,
    scope: row.scope,
    createdUnix: row.created_unix,
    updatedUnix: row.updated_unix,
  };
}

export async function insertAccessToken(
  db: Queryable,
  token: { uid: number; name: string; tokenHash: string; tokenLastEight: string; scope: string; nowSec: number },
): Promise<AccessToken> {
  const row = await db
    .insertInto('access_token')
    .values({
      uid: token.uid,
      name: token.name,
      token_hash: token.tokenHash,
      token_last_eight: token.tokenLastEight,
      scope: token.scope,
      created_unix: token.nowSec,
      updated_unix: token.nowSec,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return tokenFromRow(row);
}

function tokenWithOwnerQuery(db: Queryable, tokenHash: string) {
  return db
    .selectFrom('access_token')
    .innerJoin('user', 'user.id', 'access_token.uid')
    .selectAll('user')
    .select([
      'access_token.id as t_id',
      'access_token.name as t_name',
      'access_token.token_hash as t_hash',
      'access_token.token_last_eight as t_last_eight',
      'access_token.scope as t_scope',
      'access_token.created_unix as t_created',
      'access_token.updated_unix as t_updated',
    ])
    .where('access_token.token_hash', '=', tokenHash);
}

type TokenWithOwnerRow = Awaited<ReturnType<ReturnType<typeof tokenWithOwnerQuery>['executeTakeFirstOrThrow']>>;

// Every authenticated API call runs this query: it is compiled once per
// database and reused with the digest as its only parameter.
const compiledLookups = new WeakMap<Queryable, CompiledQuery<TokenWithOwnerRow>>();

/** One indexed lookup returning the token with its owner (the hot path of every API call). */
export async function findAccessTokenWithOwner(
  db: Queryable,
  tokenHash: string,
): Promise<{ token: AccessToken; owner: User } | null> {
  let compiled = compiledLookups.get(db);
  if (!compiled) {
    compiled = tokenWithOwnerQuery(db, '').compile();
    if (compiled.parameters.length !== 1) throw new Error('token lookup must have exactly one parameter');
    compiledLookups.set(db, compiled);
  }
  const { rows } = await db.executeQuery<TokenWithOwnerRow>({ ...compiled, parameters: [tokenHash] });
  const row = rows[0];
  if (!row) return null;
  const token: AccessToken = {
    id: row.t_id,
    uid: row.id,
    name: row.t_name,
    tokenHash: row.t_hash,
    tokenLastEight: row.t_last_eight,
    scope: row.t_scope,
    createdUnix: row.t_created,
    updatedUnix: row.t_updated,
  };
  return { token, owner: userFromRow(row as Selectable<UserTable>) };
}

export async function countAccessTokens(db: Queryable, uid: number): Promise<number> {
  const row = await db
    .selectFrom('access_token')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('uid', '=', uid)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function listAccessTokens(
  db: Queryable,
  uid: number,
  limit: number,
  offset: number,
): Promise<AccessToken[]> {
  const rows = await db
    .selectFrom('access_token')
    .selectAll()
    .where('uid', '=', uid)
    .orderBy('id', 'desc')
    .limit(limit)
    .offset(offset)
    .execute();
  return rows.map(tokenFromRow);
}

export async function findAccessTokensByName(db: Queryable, uid: number, name: string): Promise<AccessToken[]> {
  const rows = await db
    .selectFrom('access_token')
    .selectAll()
    .where('uid', '=', uid)
    .where('name', '=', name)
    .execute();
  return rows.map(tokenFromRow);
}

export async function findAccessTokenById(db: Queryable, uid: number, id: number): Promise<AccessToken | null> {
  const row = await db
    .selectFrom('access_token')
    .selectAll()
    .where('uid', '=', uid)
    .where('id', '=', id)
    .executeTakeFirst();
  return row ? tokenFromRow(row) : null;
}

export async function deleteAccessToken(db: Queryable, id: number): Promise<boolean> {
  const result = await db.deleteFrom('access_token').where('id', '=', id).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}
