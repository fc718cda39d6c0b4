// The services of the domain, built once by the composition root.
import path from 'node:path';
import type { Config } from '../config.ts';
import type { Clock } from '../modules/clock.ts';
import type { SecretCipher } from '../modules/crypto/secret-cipher.ts';
import type { Db } from '../models/database.ts';
import { AccessTokenService } from './access-tokens.ts';
import { AccountService } from './accounts.ts';
import { AuthenticationService } from './authentication.ts';
import { CredentialCache } from './credential-cache.ts';
import { DomainEvents } from './events.ts';
import { OrgService } from './orgs.ts';
import { PermissionService } from './permissions.ts';
import { RepoService } from './repos.ts';

export interface Services {
  accounts: AccountService;
  accessTokens: AccessTokenService;
  authentication: AuthenticationService;
  permissions: PermissionService;
  orgs: OrgService;
  repos: RepoService;
  events: DomainEvents;
  cipher: SecretCipher;
}

export function createServices(config: Config, db: Db, clock: Clock, cipher: SecretCipher): Services {
  const events = new DomainEvents();
  const credentialCache = new CredentialCache(clock);
  return {
    accounts: new AccountService(db, clock),
    accessTokens: new AccessTokenService(db, clock, credentialCache),
    authentication: new AuthenticationService(db, credentialCache),
    permissions: new PermissionService(db),
    orgs: new OrgService(db, clock),
    repos: new RepoService(db, clock, path.join(config.dataDir, 'git', 'repositories'), events),
    events,
    cipher,
  };
}
