// Sessions of the web console. The cookie carries a random id; the database
// keeps only its SHA-256 (a copied table signs no one in), the user, the
// secret the session's CSRF tokens are made from, and the expiry. Stored in
// the database, so any Gantry process behind a proxy can answer any request.
//
// Guarantees:
// - A session is valid until it expires or is ended; a user who is
//   deactivated or forbidden to sign in loses every session at once (checked
//   on each lookup, as Forgejo's session middleware does).
// - Ending a session (sign-out) deletes its row: the old cookie is useless.
import { randomBytes } from 'node:crypto';
import type { Clock } from '../modules/clock.ts';
import { hashToken } from '../modules/crypto/tokens.ts';
import type { Db } from '../models/database.ts';
import { findAccountById } from '../models/users.ts';
import type { User } from '../models/users.ts';
import {
  deleteExpiredWebSessions,
  deleteWebSession,
  deleteWebSessionsOfUser,
  findLiveWebSession,
  insertWebSession,
} from '../models/web-sessions.ts';

/** How long a session lasts (Forgejo's default SESSION_LIFE_TIME is 1 day; "remember me" is not offered). */
export const WEB_SESSION_LIFETIME_SEC = 24 * 3600;

export interface LiveSession {
  user: User;
  /** The secret CSRF tokens of this session are made from and checked against. */
  csrfSecret: string;
}

export class WebSessionService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  /** Starts a session for `user`; returns the cookie value (shown once, never stored). */
  async start(user: User): Promise<{ cookie: string; csrfSecret: string }> {
    const now = this.clock.nowSec();
    await deleteExpiredWebSessions(this.db, now);
    const cookie = randomBytes(32).toString('base64url');
    const csrfSecret = randomBytes(18).toString('base64url');
    await insertWebSession(this.db, {
      idHash: hashToken(cookie),
      userId: user.id,
      csrfSecret,
      created: now,
      expires: now + WEB_SESSION_LIFETIME_SEC,
    });
    return { cookie, csrfSecret };
  }

  /** The live session a cookie names, or null (unknown, expired, or its user may no longer sign in). */
  async find(cookie: string): Promise<LiveSession | null> {
    if (cookie === '' || cookie.length > 200) return null;
    const session = await findLiveWebSession(this.db, hashToken(cookie), this.clock.nowSec());
    if (!session) return null;
    const user = await findAccountById(this.db, session.userId);
    if (!user || user.isOrganization || !user.isActive || user.prohibitLogin) return null;
    return { user, csrfSecret: session.csrfSecret };
  }

  async end(cookie: string): Promise<void> {
    if (cookie === '' || cookie.length > 200) return;
    await deleteWebSession(this.db, hashToken(cookie));
  }

  /** Every session of a user (after a password change, the other browsers are signed out). */
  async endAllOf(user: User): Promise<void> {
    await deleteWebSessionsOfUser(this.db, user.id);
  }
}
