// Web console sessions (migration 0016): looked up by the hash of the cookie's id.
import type { Queryable } from './database.ts';

export interface WebSession {
  id: number;
  userId: number;
  csrfSecret: string;
  /** Unix seconds. */
  expires: number;
}

export async function insertWebSession(
  db: Queryable,
  row: { idHash: string; userId: number; csrfSecret: string; created: number; expires: number },
): Promise<void> {
  await db
    .insertInto('web_session')
    .values({
      id_hash: row.idHash,
      user_id: row.userId,
      csrf_secret: row.csrfSecret,
      created: row.created,
      expires: row.expires,
    })
    .execute();
}

/** The session with this id hash that has not expired at `nowSec`. */
export async function findLiveWebSession(db: Queryable, idHash: string, nowSec: number): Promise<WebSession | null> {
  const row = await db
    .selectFrom('web_session')
    .select(['id', 'user_id', 'csrf_secret', 'expires'])
    .where('id_hash', '=', idHash)
    .where('expires', '>', nowSec)
    .executeTakeFirst();
  return row ? { id: row.id, userId: row.user_id, csrfSecret: row.csrf_secret, expires: row.expires } : null;
}

export async function deleteWebSession(db: Queryable, idHash: string): Promise<void> {
  await db.deleteFrom('web_session').where('id_hash', '=', idHash).execute();
}

/** Drops expired sessions (done on each sign-in: sessions of an instance are few). */
export async function deleteExpiredWebSessions(db: Queryable, nowSec: number): Promise<void> {
  await db.deleteFrom('web_session').where('expires', '<=', nowSec).execute();
}

export async function deleteWebSessionsOfUser(db: Queryable, userId: number): Promise<void> {
  await db.deleteFrom('web_session').where('user_id', '=', userId).execute();
}
