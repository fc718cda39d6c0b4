// Runner registration tokens (Forgejo's action_runner_token). The API shows a
// scope's active token again, so the token is kept as key-ring ciphertext;
// the Register RPC finds it by its SHA-256 digest.
import type { Selectable } from 'kysely';
import { sql } from 'kysely';
import type { Queryable } from './database.ts';
import type { ScopeColumns } from '../modules/scope.ts';
import type { ActionRunnerTokenTable } from './tables.ts';

export interface RegistrationTokenRow {
  id: number;
  ownerId: number;
  repoId: number;
  tokenHash: string;
  /** Key-ring ciphertext of the token. */
  tokenEncrypted: string;
  isActive: boolean;
  created: number;
  updated: number;
}

function tokenFromRow(row: Selectable<ActionRunnerTokenTable>): RegistrationTokenRow {
  return {
    id: row.id,
    ownerId: row.owner_id,
    repoId: row.repo_id,
    tokenHash: row.token_hash,
    tokenEncrypted: row.token_encrypted,
    isActive: row.is_active === 1,
    created: row.created,
    updated: row.updated,
  };
}

/** The scope's active token (the unique index allows one at most), or null. */
export async function findActiveRegistrationToken(
  db: Queryable,
  scope: ScopeColumns,
): Promise<RegistrationTokenRow | null> {
  const row = await db
    .selectFrom('action_runner_token')
    .selectAll()
    .where('owner_id', '=', scope.ownerId)
    .where('repo_id', '=', scope.repoId)
    .where('is_active', '=', 1)
    .executeTakeFirst();
  return row ? tokenFromRow(row) : null;
}

export async function findRegistrationTokenByHash(
  db: Queryable,
  tokenHash: string,
): Promise<RegistrationTokenRow | null> {
  const row = await db
    .selectFrom('action_runner_token')
    .selectAll()
    .where('token_hash', '=', tokenHash)
    .executeTakeFirst();
  return row ? tokenFromRow(row) : null;
}

/** Deactivates the scope's active token; true when there was one. */
export async function deactivateRegistrationTokens(db: Queryable, scope: ScopeColumns, now: number): Promise<boolean> {
  const result = await db
    .updateTable('action_runner_token')
    .set({ is_active: 0, updated: now })
    .where('owner_id', '=', scope.ownerId)
    .where('repo_id', '=', scope.repoId)
    .where('is_active', '=', 1)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export interface NewRegistrationToken {
  scope: ScopeColumns;
  tokenHash: string;
  tokenEncrypted: string;
}

/**
 * Inserts `token` as the scope's active token unless the scope already has
 * one (migration 0008's unique partial index `action_runner_token_active_uq`).
 * Returns whether it was inserted. Race-free without a transaction: of
 * concurrent inserts, one wins; the others wait on the index entry until the
 * winner commits and then do nothing, so a read afterwards finds the winner.
 */
export async function insertRegistrationTokenIfNoneActive(
  db: Queryable,
  token: NewRegistrationToken,
  now: number,
): Promise<boolean> {
  const result = await db
    .insertInto('action_runner_token')
    .values({
      owner_id: token.scope.ownerId,
      repo_id: token.scope.repoId,
      token_hash: token.tokenHash,
      token_encrypted: token.tokenEncrypted,
      is_active: 1,
      created: now,
      updated: now,
    })
    // The conflict target names the partial index by its columns and its
    // literal predicate; both dialects need the predicate to infer the index.
    .onConflict((oc) =>
      oc
        .columns(['owner_id', 'repo_id'])
        .where(sql<boolean>`is_active = 1`)
        .doNothing(),
    )
    .returning('id')
    .executeTakeFirst();
  return result !== undefined;
}

// Key rotation. `prefix` is the stored prefix of the target key ("v1:<id>:").

export async function countRegistrationTokensNotUnderPrefix(db: Queryable, prefix: string): Promise<number> {
  const row = await db
    .selectFrom('action_runner_token')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('token_encrypted', 'not like', `${prefix}%`)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function listRegistrationTokensNotUnderPrefix(
  db: Queryable,
  prefix: string,
  afterId: number,
  limit: number,
): Promise<RegistrationTokenRow[]> {
  const rows = await db
    .selectFrom('action_runner_token')
    .selectAll()
    .where('id', '>', afterId)
    .where('token_encrypted', 'not like', `${prefix}%`)
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map(tokenFromRow);
}

/** Compare-and-swap of the ciphertext: a row changed since it was read is left alone. */
export async function swapRegistrationTokenCiphertext(
  db: Queryable,
  id: number,
  expected: string,
  next: string,
): Promise<boolean> {
  const result = await db
    .updateTable('action_runner_token')
    .set({ token_encrypted: next })
    .where('id', '=', id)
    .where('token_encrypted', '=', expected)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export async function registrationTokenPrefixesInUse(db: Queryable): Promise<string[]> {
  const rows = await db
    .selectFrom('action_runner_token')
    .select(sql<string>`substr(token_encrypted, 1, 12)`.as('prefix'))
    .distinct()
    .execute();
  return rows.map((r) => r.prefix);
}
