// Personal access tokens: minted with a scope, shown once, stored hashed.
import { AppError } from '../modules/errors.ts';
import type { Clock } from '../modules/clock.ts';
import { generateTokenString, hashToken } from '../modules/crypto/tokens.ts';
import { InvalidScopeError, isEmptyScope, parseScopes, serializeScope } from '../modules/scopes.ts';
import type { Db } from '../models/database.ts';
import { isUniqueViolation } from '../models/database.ts';
import {
  countAccessTokens,
  deleteAccessToken,
  findAccessTokenById,
  findAccessTokensByName,
  insertAccessToken,
  listAccessTokens,
} from '../models/access-tokens.ts';
import type { AccessToken } from '../models/access-tokens.ts';
import type { User } from '../models/users.ts';
import type { CredentialCache } from './credential-cache.ts';

export interface CreatedAccessToken {
  token: AccessToken;
  /** The plaintext token: returned to the caller once, never stored. */
  secret: string;
}

export class AccessTokenService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly cache: CredentialCache,
  ) {}

  async create(owner: User, name: string, scopes: readonly string[]): Promise<CreatedAccessToken> {
    let scope;
    try {
      scope = parseScopes(scopes);
    } catch (error) {
      if (error instanceof InvalidScopeError)
        throw AppError.invalid(`invalid access token scope provided: ${error.message}`);
      throw error;
    }
    if (isEmptyScope(scope)) throw AppError.invalid('access token must have a scope');
    const secret = generateTokenString();
    try {
      const token = await insertAccessToken(this.db, {
        uid: owner.id,
        name,
        tokenHash: hashToken(secret),
        tokenLastEight: secret.slice(-8),
        scope: serializeScope(scope),
        nowSec: this.clock.nowSec(),
      });
      return { token, secret };
    } catch (error) {
      if (isUniqueViolation(error)) throw AppError.invalid('access token name has been used already');
      throw error;
    }
  }

  async list(owner: User, limit: number, offset: number): Promise<{ tokens: AccessToken[]; total: number }> {
    const [tokens, total] = await Promise.all([
      listAccessTokens(this.db, owner.id, limit, offset),
      countAccessTokens(this.db, owner.id),
    ]);
    return { tokens, total };
  }

  /** Deletes by numeric id, or by name as Forgejo allows. */
  async delete(owner: User, idOrName: string): Promise<void> {
    let target: AccessToken | null = null;
    if (/^\d+$/.test(idOrName)) target = await findAccessTokenById(this.db, owner.id, Number(idOrName));
    if (!target) {
      const byName = await findAccessTokensByName(this.db, owner.id, idOrName);
      if (byName.length > 1) throw AppError.unprocessable(`multiple matches for token name '${idOrName}'`);
      target = byName[0] ?? null;
    }
    if (!target || !(await deleteAccessToken(this.db, target.id))) throw AppError.notFound();
    this.cache.forgetToken(target.id);
  }
}
