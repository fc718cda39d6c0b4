// Turns credentials into a doer. Forgejo's rules (services/auth/*): `token` and
// `Bearer` schemes; Basic with a password, with a token as password, or with the
// token as user name; any well-formed credential that does not verify is a 401.
//
// Password sign-ins: an unknown user name costs the same hashing as a known
// one (no timing tells which names exist); failures are counted per user name
// and lock its password sign-in for a while (LoginLimiter: 429 with
// Retry-After); a hash below the current cost is replaced after a successful
// sign-in. Passwords are never cached: each request verifies against the
// stored hash, so a changed password or a lock applies to the next request.
import { AppError } from '../modules/errors.ts';
import type { PasswordHasher } from '../modules/crypto/password.ts';
import { digestsEqual, hashToken, looksLikeAccessToken } from '../modules/crypto/tokens.ts';
import { parseScopes } from '../modules/scopes.ts';
import type { AccessTokenScope } from '../modules/scopes.ts';
import type { Db } from '../models/database.ts';
import { findAccessTokenWithOwner } from '../models/access-tokens.ts';
import { findRunningTaskByTokenHash } from '../models/task-tokens.ts';
import { actionsUser, findAccountByName, findUserByEmail, replacePasswordHash } from '../models/users.ts';
import type { User } from '../models/users.ts';
import type { CredentialCache, VerifiedToken } from './credential-cache.ts';
import type { LoginLimiter } from './login-limiter.ts';

/** `session`: the web console's sign-in cookie (src/http/web/session.ts). */
export type AuthMethod = 'anonymous' | 'token' | 'basic' | 'session';

export interface Authentication {
  doer: User | null;
  method: AuthMethod;
  /** Present when a token authenticated the request; its scope limits what it may do. */
  token: { id: number; scope: AccessTokenScope } | null;
  /**
   * Set when a running task's token authenticated the request: the doer is the
   * Actions bot, with write access to this repository and nothing private elsewhere.
   */
  task?: { id: number; repoId: number };
}

export const ANONYMOUS: Authentication = Object.freeze({ doer: null, method: 'anonymous', token: null });

const INVALID = 'invalid username, password or token';

// What a task token may touch is decided by its repository (see
// PermissionService.repoAccessMode); its scope only keeps it away from
// account and admin endpoints.
const TASK_TOKEN_SCOPE = parseScopes([
  'write:repository',
  'read:user',
  'read:organization',
  'read:package',
  'write:issue',
]);

const TWO_WORDS = /^\s*(\S+)\s+(\S+)\s*$/;

/** An Authorization header as scheme (lower case) and value: null when absent or not exactly two words. */
function parseAuthorization(authorization: string | undefined): { scheme: string; value: string } | null {
  if (!authorization) return null;
  // Exactly two words, any white space around and between (one pass: a split was a tenth of the hook's cost).
  const words = TWO_WORDS.exec(authorization);
  if (words === null) return null;
  return { scheme: (words[1] as string).toLowerCase(), value: words[2] as string };
}

/** The last token a kept-alive connection sent, and its digest. */
interface ConnectionToken {
  authorization: string;
  digest: string;
}

export class AuthenticationService {
  /**
   * Per connection (its socket, held weakly: gone with it): the digest of the
   * last Authorization header it sent, so a client that sends the same token
   * on every request of a kept-alive connection has it hashed once, not once
   * per request (about 2 µs of a cheap GET). Only the hashing is saved: the
   * credential cache is asked every time, so revocation and the cache's TTL
   * apply as before.
   */
  private readonly connectionTokens = new WeakMap<object, ConnectionToken>();

  constructor(
    private readonly db: Db,
    private readonly cache: CredentialCache,
    private readonly hasher: PasswordHasher,
    private readonly limiter: LoginLimiter,
  ) {}

  /**
   * The token of `digest`, verified: found by digest through an index, then
   * compared in constant time (against any collation or prefix surprise in
   * the database). Only a verified token is cached, so a cached one needs no
   * second comparison.
   */
  private async lookupToken(digest: string): Promise<VerifiedToken | null> {
    const cached = this.cache.get(digest);
    if (cached) return cached;
    const found = await findAccessTokenWithOwner(this.db, digest);
    if (!found || !digestsEqual(found.token.tokenHash, digest)) return null;
    const verified = { ...found, scope: parseScopes([found.token.scope]) };
    this.cache.set(digest, verified);
    return verified;
  }

  /** Reads an Authorization header value; an unknown scheme is ignored (anonymous). */
  async authenticate(authorization: string | undefined): Promise<Authentication> {
    const credentials = parseAuthorization(authorization);
    if (credentials === null) return ANONYMOUS;
    if (credentials.scheme === 'token' || credentials.scheme === 'bearer')
      return this.byToken(credentials.value, 'token');
    if (credentials.scheme === 'basic') return this.byBasic(credentials.value);
    return ANONYMOUS;
  }

  /**
   * What authenticate would answer, when it can be known without waiting: no
   * credentials, an unknown scheme, or an access token (`token` or `Bearer`)
   * the credential cache holds. Null otherwise (a token to look up, basic
   * auth, a task token, a malformed token): then authenticate must run.
   * Saves an API request's promises when its token was seen within the
   * cache's TTL; what it answers is what authenticate would. `connection`
   * (the request's socket) lets a token repeated on it skip the hashing.
   */
  authenticateNow(authorization: string | undefined, connection?: object): Authentication | null {
    const memo = connection == null ? undefined : this.connectionTokens.get(connection);
    let digest: string;
    if (memo !== undefined && memo.authorization === authorization) digest = memo.digest;
    else {
      const credentials = parseAuthorization(authorization);
      if (credentials === null) return ANONYMOUS;
      if (credentials.scheme === 'basic') return null;
      if (credentials.scheme !== 'token' && credentials.scheme !== 'bearer') return ANONYMOUS;
      if (!looksLikeAccessToken(credentials.value)) return null;
      digest = hashToken(credentials.value);
      if (connection != null) this.connectionTokens.set(connection, { authorization: authorization!, digest });
    }
    const found = this.cache.get(digest);
    if (found === null) return null;
    return { doer: found.owner, method: 'token', token: { id: found.token.id, scope: found.scope } };
  }

  private async byToken(secret: string, method: AuthMethod): Promise<Authentication> {
    if (!looksLikeAccessToken(secret)) throw AppError.unauthorized(INVALID);
    const digest = hashToken(secret);
    const found = await this.lookupToken(digest);
    if (found) return { doer: found.owner, method, token: { id: found.token.id, scope: found.scope } };
    const task = await this.byTaskToken(digest, method);
    if (task) return task;
    throw AppError.unauthorized(INVALID);
  }

  /** A running task's GITHUB_TOKEN: valid exactly while the task runs, never cached. */
  private async byTaskToken(digest: string, method: AuthMethod): Promise<Authentication | null> {
    const task = await findRunningTaskByTokenHash(this.db, digest);
    if (!task || !digestsEqual(task.tokenHash, digest)) return null;
    return {
      doer: actionsUser(),
      method,
      token: { id: 0, scope: TASK_TOKEN_SCOPE },
      task: { id: task.taskId, repoId: task.repoId },
    };
  }

  private async byBasic(encoded: string): Promise<Authentication> {
    const decoded = Buffer.from(encoded, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) throw AppError.unauthorized(INVALID);
    const username = decoded.slice(0, colon);
    const password = decoded.slice(colon + 1);
    // The token as user name, with an empty password or GitHub's `x-oauth-basic`.
    if (looksLikeAccessToken(username) && (password === '' || password === 'x-oauth-basic')) {
      return this.byToken(username, 'basic');
    }
    // A token as the password (any user name).
    if (looksLikeAccessToken(password)) {
      const digest = hashToken(password);
      const found = await this.lookupToken(digest);
      if (found) return { doer: found.owner, method: 'basic', token: { id: found.token.id, scope: found.scope } };
      const task = await this.byTaskToken(digest, 'basic');
      if (task) return task;
    }
    return this.byPassword(username, password);
  }

  /**
   * The web console's sign-in form: a user name or an e-mail address and the
   * password, through the same check (and failed-login limiter) as basic
   * auth. An e-mail address is counted under the name it belongs to, so both
   * ways of typing one account share its allowance.
   */
  async signInWithPassword(login: string, password: string): Promise<User> {
    let username = login;
    if (login.includes('@')) {
      const byEmail = await findUserByEmail(this.db, login);
      if (byEmail) username = byEmail.name;
    }
    const auth = await this.byPassword(username, password);
    return auth.doer as User;
  }

  private async byPassword(username: string, password: string): Promise<Authentication> {
    const wait = this.limiter.retryAfterSec(username);
    if (wait > 0)
      throw AppError.tooManyRequests(`too many failed sign-ins for this account; try again in ${wait} s`, wait);
    const user = await findAccountByName(this.db, username);
    // Organizations and accounts without a password cannot sign in; they take
    // the unknown-name path, so their timing matches it.
    const check =
      user && !user.isOrganization && user.passwordHash !== ''
        ? await this.hasher.verify(password, user.passwordHash)
        : null;
    if (check === null) await this.hasher.verifyUnknown(password);
    if (!user || !check?.ok) {
      this.limiter.recordFailure(username);
      throw AppError.unauthorized(INVALID);
    }
    this.limiter.recordSuccess(username);
    // Compare-and-swap: a password changed meanwhile is not overwritten.
    if (check.needsRehash)
      await replacePasswordHash(this.db, user.id, user.passwordHash, await this.hasher.hash(password));
    return { doer: user, method: 'basic', token: null };
  }
}
