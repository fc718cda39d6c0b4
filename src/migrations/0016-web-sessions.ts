// Sessions of the web console (src/http/web/): in the database, so several
// Gantry processes behind one proxy share them. Only a hash of the session id
// is stored (a leaked table or backup signs no one in), with the CSRF secret
// the session's forms are signed with and when it expires.
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { isPostgres, withId } from './dialect.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  const textC = isPostgres(db) ? sql`text collate "C"` : 'text';
  await withId(db, db.schema.createTable('web_session'))
    // SHA-256 of the cookie's random id, hex.
    .addColumn('id_hash', textC, (c) => c.notNull())
    .addColumn('user_id', 'bigint', (c) => c.notNull())
    .addColumn('csrf_secret', 'text', (c) => c.notNull())
    .addColumn('created', 'bigint', (c) => c.notNull())
    .addColumn('expires', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('web_session_id_hash_uq').unique().on('web_session').column('id_hash').execute();
  // Sign-out everywhere and owner deletion; expiry sweeps.
  await db.schema.createIndex('web_session_user').on('web_session').column('user_id').execute();
  await db.schema.createIndex('web_session_expires').on('web_session').column('expires').execute();
}
