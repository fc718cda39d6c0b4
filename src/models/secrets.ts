// Actions secrets (Forgejo's `secret` table). `data` is always ciphertext; the
// service encrypts before and decrypts after. Names arrive upper-cased.
import { sql } from 'kysely';
import type { Queryable } from './database.ts';
import { compiledStatement } from './compiled-statements.ts';
import { countScopedValues, scopedValueFromRow } from './scoped-values.ts';
import type { ScopeColumns } from '../modules/scope.ts';
import type { ScopedValue } from './scoped-values.ts';

export interface SecretListItem {
  name: string;
  createdUnix: number;
}

/**
 * Inserts the secret unless the scope already has one of that name; true when
 * it inserted. The unique index decides between concurrent writers (a
 * PostgreSQL insert waits for the other transaction, then does nothing).
 */
export async function insertSecretIfAbsent(
  db: Queryable,
  key: ScopeColumns,
  name: string,
  data: string,
  nowSec: number,
): Promise<boolean> {
  const row = await db
    .insertInto('secret')
    .values({ owner_id: key.ownerId, repo_id: key.repoId, name, data, created_unix: nowSec, updated_unix: nowSec })
    .onConflict((oc) => oc.columns(['owner_id', 'repo_id', 'name']).doNothing())
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

/** Replaces the value of an existing secret (its creation time stays); false when there is none. */
export async function updateSecretData(
  db: Queryable,
  key: ScopeColumns,
  name: string,
  data: string,
  nowSec: number,
): Promise<boolean> {
  const result = await db
    .updateTable('secret')
    .set({ data, updated_unix: nowSec })
    .where('owner_id', '=', key.ownerId)
    .where('repo_id', '=', key.repoId)
    .where('name', '=', name)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * One page of a scope's secrets in creation (id) order, the values not read,
 * and the scope's count, read together; an empty page (an empty scope, or a
 * page past the end) has no row to carry the count, so the count is read
 * alone then.
 */
export async function listSecretsPage(
  db: Queryable,
  key: ScopeColumns,
  limit: number,
  offset: number,
): Promise<{ secrets: SecretListItem[]; total: number }> {
  const { rows } = await SECRETS_PAGE.execute(db, [key.ownerId, key.repoId, limit, offset]);
  const first = rows[0];
  if (first === undefined) return { secrets: [], total: await countScopedValues(db, 'secret', key) };
  return { secrets: rows.map((r) => ({ name: r.name, createdUnix: r.created_unix })), total: Number(first.total) };
}

/**
 * A page of a scope's secrets (names and creation times, never the values) in
 * id order, each row with how many the scope has (`count(*) over ()` counts
 * the rows before LIMIT and OFFSET). Compiled once per dialect. Args: owner
 * id, repository id, limit, offset.
 */
const SECRETS_PAGE = compiledStatement((db, arg) =>
  db
    .selectFrom('secret')
    .select(['name', 'created_unix'])
    .select((eb) => eb.fn.countAll<number | string>().over().as('total'))
    .where('owner_id', '=', arg<number>(0))
    .where('repo_id', '=', arg<number>(1))
    .orderBy('id')
    .limit(arg<number>(2))
    .offset(arg<number>(3)),
);

// Key rotation. `prefix` is the stored prefix of the target key ("v1:<id>:"),
// made only of [v1:0-9a-f], so it needs no LIKE escaping.

export async function countSecretsNotUnderPrefix(db: Queryable, prefix: string): Promise<number> {
  const row = await db
    .selectFrom('secret')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('data', 'not like', `${prefix}%`)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The next batch, by id after `afterId`, of secrets whose value is not under the target key. */
export async function listSecretsNotUnderPrefix(
  db: Queryable,
  prefix: string,
  afterId: number,
  limit: number,
): Promise<ScopedValue[]> {
  const rows = await db
    .selectFrom('secret')
    .selectAll()
    .where('id', '>', afterId)
    .where('data', 'not like', `${prefix}%`)
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map(scopedValueFromRow);
}

/**
 * Compare-and-swap of a stored value: only replaces `expected`, so a value
 * written concurrently (a PUT during a rotation) is never overwritten.
 */
export async function swapSecretData(db: Queryable, id: number, expected: string, next: string): Promise<boolean> {
  const result = await db
    .updateTable('secret')
    .set({ data: next })
    .where('id', '=', id)
    .where('data', '=', expected)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/** The distinct stored prefixes ("v1:<key id>:"), to tell which keys are still in use. */
export async function secretDataPrefixesInUse(db: Queryable): Promise<string[]> {
  const rows = await db
    .selectFrom('secret')
    .select(sql<string>`substr(data, 1, 12)`.as('prefix'))
    .distinct()
    .execute();
  return rows.map((r) => r.prefix);
}
