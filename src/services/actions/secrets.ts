// Actions secrets at user, organization and repository scope (Forgejo:
// services/secrets/secrets.go). Values are write-only: encrypted with the key
// ring before they reach the database, bound to their scope and name, and only
// ever decrypted for the jobs that use them (and key rotation).
import { AppError } from '../../modules/errors.ts';
import type { Clock } from '../../modules/clock.ts';
import {
  MAX_VALUE_BYTES,
  normalizeLineBreaks,
  normalizeName,
  secretNameProblem,
  valueTooLarge,
} from '../../modules/actions-names.ts';
import type { KeyRing } from '../../modules/crypto/key-ring.ts';
import type { Db } from '../../models/database.ts';
import type { Repository } from '../../models/repos.ts';
import {
  deleteScopedValue,
  findScopedValue,
  listScopedValuesForRepository,
  ownerThenRepositoryValues,
} from '../../models/scoped-values.ts';
import type { ScopedValue } from '../../models/scoped-values.ts';
import {
  countSecretsNotUnderPrefix,
  insertSecretIfAbsent,
  listSecretsPage,
  listSecretsNotUnderPrefix,
  secretDataPrefixesInUse,
  swapSecretData,
  updateSecretData,
} from '../../models/secrets.ts';
import type { SecretListItem } from '../../models/secrets.ts';
import type { EncryptedColumn } from '../key-rotation.ts';
import type { Scope } from '../../modules/scope.ts';
import { secretAssociatedData } from './scope.ts';

export type SecretWriteResult = 'created' | 'updated';

/** A field value shared by secrets and variables: required, normalised, bounded. */
export function checkedValue(field: 'Data' | 'Value', raw: string): string {
  if (raw === '') throw AppError.unprocessable(`[${field}]: Required`);
  const value = normalizeLineBreaks(raw);
  if (valueTooLarge(value)) throw AppError.unprocessable(`[${field}]: MaxSize (at most ${MAX_VALUE_BYTES} bytes)`);
  return value;
}

export class SecretService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly keys: KeyRing,
  ) {}

  async list(
    scope: Scope,
    page: { limit: number; offset: number },
  ): Promise<{ secrets: SecretListItem[]; total: number }> {
    return listSecretsPage(this.db, scope, page.limit, page.offset);
  }

  /**
   * Creates or replaces a secret. Concurrent writers of one name end with one
   * row holding one of their values: the unique index arbitrates, and exactly
   * one of them reports `created`.
   */
  async createOrUpdate(scope: Scope, name: string, data: string): Promise<SecretWriteResult> {
    const value = checkedValue('Data', data);
    const problem = secretNameProblem(name);
    if (problem) throw AppError.invalid(problem);
    const upper = normalizeName(name);
    const stored = this.keys.encrypt(value, secretAssociatedData(scope.ownerId, scope.repoId, upper));
    const nowSec = this.clock.nowSec();
    return this.db.transaction().execute(async (tx) => {
      // A concurrent DELETE can remove the row between the two statements: then insert again.
      for (let attempt = 0; attempt < 5; attempt += 1) {
        if (await insertSecretIfAbsent(tx, scope, upper, stored, nowSec)) return 'created';
        if (await updateSecretData(tx, scope, upper, stored, nowSec)) return 'updated';
      }
      throw new Error('secret row kept disappearing during an upsert');
    });
  }

  /** Forgejo does not validate the name here, so a stored name that breaks today's rules can still be deleted. */
  async delete(scope: Scope, name: string): Promise<void> {
    if (!(await deleteScopedValue(this.db, 'secret', scope, normalizeName(name))))
      throw AppError.notFoundMessage('secret was not found [name: ]');
  }

  /** The plaintext of one secret, or null. For jobs and tests; never for an API answer. */
  async readValue(scope: Scope, name: string): Promise<string | null> {
    const upper = normalizeName(name);
    const row = await findScopedValue(this.db, 'secret', scope, upper);
    return row ? this.keys.decrypt(row.data, secretAssociatedData(row.ownerId, row.repoId, row.name)) : null;
  }

  /** What a job of `repo` sees: the owner's (user or organization) secrets, overridden by the repository's own. */
  async secretsForRepo(repo: Pick<Repository, 'id' | 'ownerId'>): Promise<Map<string, string>> {
    return this.secretsOf(await listScopedValuesForRepository(this.db, 'secret', repo.ownerId, repo.id));
  }

  /** secretsForRepo from the rows it would read, read already (a claim's statement reads them). */
  secretsOf(rows: readonly Pick<ScopedValue, 'ownerId' | 'repoId' | 'name' | 'data'>[]): Map<string, string> {
    return ownerThenRepositoryValues(rows, (row) =>
      this.keys.decrypt(row.data, secretAssociatedData(row.ownerId, row.repoId, row.name)),
    );
  }
}

/** `secret.data` for key rotation (listed in services/encrypted-columns.ts). */
export const SECRET_DATA_COLUMN: EncryptedColumn = {
  label: 'secret',
  count: (db, prefix) => countSecretsNotUnderPrefix(db, prefix),
  batch: async (db, prefix, afterId, limit) =>
    (await listSecretsNotUnderPrefix(db, prefix, afterId, limit)).map((row) => ({
      id: row.id,
      stored: row.data,
      associatedData: secretAssociatedData(row.ownerId, row.repoId, row.name),
    })),
  swap: (db, id, expected, next) => swapSecretData(db, id, expected, next),
  prefixesInUse: (db) => secretDataPrefixesInUse(db),
};
