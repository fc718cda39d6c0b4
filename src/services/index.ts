// The services of the domain, built once by the composition root.
import path from 'node:path';
import type { Config } from '../config.ts';
import type { Clock } from '../modules/clock.ts';
import type { KeyRing } from '../modules/crypto/key-ring.ts';
import type { Db } from '../models/database.ts';
import { AccessTokenService } from './access-tokens.ts';
import { AccountService } from './accounts.ts';
import { deleteActionsDataOnScopeDeletion } from './actions/cleanup.ts';
import { SecretService } from './actions/secrets.ts';
import { VariableService } from './actions/variables.ts';
import { AuthenticationService } from './authentication.ts';
import { CredentialCache } from './credential-cache.ts';
import { DomainEvents } from './events.ts';
import { KeyRotationService } from './key-rotation.ts';
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
  secrets: SecretService;
  variables: VariableService;
  events: DomainEvents;
  /** Encrypts values at rest (secrets now, webhook secrets later). */
  keys: KeyRing;
  keyRotation: KeyRotationService;
}

export function createServices(config: Config, db: Db, clock: Clock, keys: KeyRing): Services {
  const events = new DomainEvents();
  const credentialCache = new CredentialCache(clock);
  events.subscribe(deleteActionsDataOnScopeDeletion);
  const secrets = new SecretService(db, clock, keys);
  return {
    accounts: new AccountService(db, clock),
    accessTokens: new AccessTokenService(db, clock, credentialCache),
    authentication: new AuthenticationService(db, credentialCache),
    permissions: new PermissionService(db),
    orgs: new OrgService(db, clock, events),
    repos: new RepoService(db, clock, path.join(config.dataDir, 'git', 'repositories'), events),
    secrets,
    variables: new VariableService(db, clock),
    events,
    keys,
    keyRotation: new KeyRotationService(db, keys, [secrets.encryptedColumn]),
  };
}
