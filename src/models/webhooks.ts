// Webhooks (Forgejo's `webhook` table). The secret and the Authorization
// header are key-ring ciphertext here ('' when none); the service encrypts
// before writing and decrypts for delivery and for the API's answer.
import { sql } from 'kysely';
import type { Selectable } from 'kysely';
import type { ScopeColumns } from '../modules/scope.ts';
import { compiledStatement } from './compiled-statements.ts';
import type { Queryable } from './database.ts';
import type { WebhookTable } from './tables.ts';

export interface WebhookRecord {
  id: number;
  ownerId: number;
  repoId: number;
  type: string;
  url: string;
  httpMethod: string;
  contentType: 'json' | 'form';
  /** Ciphertext; decrypt with WebhookService.secretOf. */
  secretEncrypted: string;
  /** Ciphertext; decrypt with WebhookService.authorizationHeaderOf. */
  authorizationHeaderEncrypted: string;
  /** Internal event names (services/webhooks/hook-events.ts), in storage order. */
  events: string[];
  branchFilter: string;
  /** The type's settings (slack channel…), parsed; null when none. */
  meta: unknown;
  isActive: boolean;
  isSystemWebhook: boolean;
  createdUnix: number;
  updatedUnix: number;
}

export interface NewWebhook {
  ownerId: number;
  repoId: number;
  type: string;
  url: string;
  contentType: 'json' | 'form';
  events: readonly string[];
  branchFilter: string;
  meta: unknown;
  isActive: boolean;
  isSystemWebhook: boolean;
  nowSec: number;
}

export interface WebhookChanges {
  url?: string;
  contentType?: 'json' | 'form';
  meta?: unknown;
  events?: readonly string[];
  branchFilter?: string;
  authorizationHeaderEncrypted?: string;
  isActive?: boolean;
}

/** The stored JSON array of internal event names; a damaged value reads as none. */
function parseEvents(json: string): string[] {
  try {
    const parsed: unknown = JSON.parse(json);
    return Array.isArray(parsed) ? parsed.filter((e): e is string => typeof e === 'string') : [];
  } catch {
    return [];
  }
}

function parseMeta(json: string): unknown {
  try {
    return JSON.parse(json);
  } catch {
    return null;
  }
}

function fromRow(row: Selectable<WebhookTable>): WebhookRecord {
  return {
    id: Number(row.id),
    ownerId: Number(row.owner_id),
    repoId: Number(row.repo_id),
    type: row.type,
    url: row.url,
    httpMethod: row.http_method,
    contentType: row.content_type === 'form' ? 'form' : 'json',
    secretEncrypted: row.secret_encrypted,
    authorizationHeaderEncrypted: row.authorization_header_encrypted,
    events: parseEvents(row.events),
    branchFilter: row.branch_filter,
    meta: parseMeta(row.meta),
    isActive: Number(row.is_active) !== 0,
    isSystemWebhook: Number(row.is_system_webhook) !== 0,
    createdUnix: Number(row.created),
    updatedUnix: Number(row.updated),
  };
}

/** Inserts a hook without its encrypted values (they are bound to the id, so written next); returns the id. */
export async function insertWebhook(db: Queryable, hook: NewWebhook): Promise<number> {
  const row = await db
    .insertInto('webhook')
    .values({
      owner_id: hook.ownerId,
      repo_id: hook.repoId,
      type: hook.type,
      url: hook.url,
      http_method: 'POST',
      content_type: hook.contentType,
      events: JSON.stringify(hook.events),
      branch_filter: hook.branchFilter,
      meta: JSON.stringify(hook.meta ?? null),
      is_active: hook.isActive ? 1 : 0,
      is_system_webhook: hook.isSystemWebhook ? 1 : 0,
      created: hook.nowSec,
      updated: hook.nowSec,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return Number(row.id);
}

export async function setWebhookCiphertexts(
  db: Queryable,
  id: number,
  values: { secretEncrypted: string; authorizationHeaderEncrypted: string },
): Promise<void> {
  await db
    .updateTable('webhook')
    .set({
      secret_encrypted: values.secretEncrypted,
      authorization_header_encrypted: values.authorizationHeaderEncrypted,
    })
    .where('id', '=', id)
    .execute();
}

// Where a hook belongs, Forgejo's convention: an organization's hooks are
// (org id, 0), a repository's (0, repo id). Every lookup by id is scoped, so
// a hook of another scope is "not found".

export async function findWebhookOfScope(
  db: Queryable,
  scope: ScopeColumns,
  id: number,
): Promise<WebhookRecord | null> {
  const row = await db
    .selectFrom('webhook')
    .selectAll()
    .where('id', '=', id)
    .where('owner_id', '=', scope.ownerId)
    .where('repo_id', '=', scope.repoId)
    .executeTakeFirst();
  return row ? fromRow(row) : null;
}

/** Hooks by id, in no order (the delivery worker loads the hooks of a claimed batch at once). */
export async function findWebhooksByIds(db: Queryable, ids: readonly number[]): Promise<WebhookRecord[]> {
  if (ids.length === 0) return [];
  const rows = await db.selectFrom('webhook').selectAll().where('id', 'in', ids).execute();
  return rows.map(fromRow);
}

/** One page of a scope's hooks, id ascending (Forgejo's ListWebhooksByOpts). */
export async function listWebhooksOfScope(
  db: Queryable,
  scope: ScopeColumns,
  limit: number,
  offset: number,
): Promise<WebhookRecord[]> {
  const rows = await db
    .selectFrom('webhook')
    .selectAll()
    .where('owner_id', '=', scope.ownerId)
    .where('repo_id', '=', scope.repoId)
    .orderBy('id')
    .limit(limit)
    .offset(offset)
    .execute();
  return rows.map(fromRow);
}

export async function countWebhooksOfScope(db: Queryable, scope: ScopeColumns): Promise<number> {
  const row = await db
    .selectFrom('webhook')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('owner_id', '=', scope.ownerId)
    .where('repo_id', '=', scope.repoId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * The active hooks an event of a repository goes to, in delivery order: the
 * repository's own, then its owner's (organization or user), each id
 * ascending — Forgejo's PrepareWebhooks (services/webhook/webhook.go). The
 * secret and Authorization header are still ciphertext: decrypt them with
 * WebhookService.secretOf / authorizationHeaderOf when sending.
 */
export async function listActiveHooksForRepository(
  db: Queryable,
  repoId: number,
  ownerId: number,
): Promise<WebhookRecord[]> {
  const { rows } = await ACTIVE_HOOKS_OF_REPOSITORY.execute(db, [repoId, ownerId]);
  // Repository hooks (owner_id 0) first, then by id.
  return rows.map(fromRow).sort((a, b) => (a.repoId === b.repoId ? a.id - b.id : a.repoId !== 0 ? -1 : 1));
}

// Read whenever an Actions run changes status (actions-outbox.ts): in a
// PostgreSQL throughput profile (2026-11-28) this read was 1.8 % of `gantry
// web`'s busy samples, 1.1 % of them in Kysely building and compiling it anew
// for each call; compiled once now (compiled-statements.ts). Arguments:
// 0 repository, 1 owner.
const ACTIVE_HOOKS_OF_REPOSITORY = compiledStatement((db, arg) =>
  db
    .selectFrom('webhook')
    .selectAll()
    .where((eb) =>
      eb.or([
        eb.and([eb('owner_id', '=', 0), eb('repo_id', '=', arg<number>(0))]),
        eb.and([eb('owner_id', '=', arg<number>(1)), eb('repo_id', '=', 0)]),
      ]),
    )
    .where('is_active', '=', 1),
);

/** The active hooks of an account (organization or user) alone, id ascending: events that belong to no repository. */
export async function listActiveHooksOfOwner(db: Queryable, ownerId: number): Promise<WebhookRecord[]> {
  const rows = await db
    .selectFrom('webhook')
    .selectAll()
    .where('owner_id', '=', ownerId)
    .where('repo_id', '=', 0)
    .where('is_active', '=', 1)
    .orderBy('id')
    .execute();
  return rows.map(fromRow);
}

export async function updateWebhook(db: Queryable, id: number, changes: WebhookChanges, nowSec: number): Promise<void> {
  await db
    .updateTable('webhook')
    .set({
      ...(changes.url !== undefined ? { url: changes.url } : {}),
      ...(changes.contentType !== undefined ? { content_type: changes.contentType } : {}),
      ...(changes.meta !== undefined ? { meta: JSON.stringify(changes.meta) } : {}),
      ...(changes.events !== undefined ? { events: JSON.stringify(changes.events) } : {}),
      ...(changes.branchFilter !== undefined ? { branch_filter: changes.branchFilter } : {}),
      ...(changes.authorizationHeaderEncrypted !== undefined
        ? { authorization_header_encrypted: changes.authorizationHeaderEncrypted }
        : {}),
      ...(changes.isActive !== undefined ? { is_active: changes.isActive ? 1 : 0 } : {}),
      updated: nowSec,
    })
    .where('id', '=', id)
    .execute();
}

/** Deletes a hook of the scope with its deliveries and their attempts; false when there was none. */
export async function deleteWebhookOfScope(db: Queryable, scope: ScopeColumns, id: number): Promise<boolean> {
  const result = await db
    .deleteFrom('webhook')
    .where('id', '=', id)
    .where('owner_id', '=', scope.ownerId)
    .where('repo_id', '=', scope.repoId)
    .executeTakeFirst();
  if (Number(result.numDeletedRows) === 0) return false;
  await db
    .deleteFrom('hook_task_attempt')
    .where('task_id', 'in', (eb) => eb.selectFrom('hook_task').select('id').where('hook_id', '=', id))
    .execute();
  await db.deleteFrom('hook_task').where('hook_id', '=', id).execute();
  return true;
}

// Key rotation of the two encrypted columns. A key id is made only of
// [v1:0-9a-f], so the prefix needs no LIKE escaping; '' (no value) is skipped.

export type WebhookCipherColumn = 'secret_encrypted' | 'authorization_header_encrypted';

export async function countWebhookValuesNotUnderPrefix(
  db: Queryable,
  column: WebhookCipherColumn,
  prefix: string,
): Promise<number> {
  const row = await db
    .selectFrom('webhook')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where(column, '!=', '')
    .where(column, 'not like', `${prefix}%`)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function listWebhookValuesNotUnderPrefix(
  db: Queryable,
  column: WebhookCipherColumn,
  prefix: string,
  afterId: number,
  limit: number,
): Promise<{ id: number; stored: string }[]> {
  const rows = await db
    .selectFrom('webhook')
    .select(['id', column])
    .where('id', '>', afterId)
    .where(column, '!=', '')
    .where(column, 'not like', `${prefix}%`)
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((r) => ({ id: Number(r.id), stored: (r as Record<string, unknown>)[column] as string }));
}

export async function swapWebhookValue(
  db: Queryable,
  column: WebhookCipherColumn,
  id: number,
  expected: string,
  next: string,
): Promise<boolean> {
  const result = await db
    .updateTable('webhook')
    .set({ [column]: next })
    .where('id', '=', id)
    .where(column, '=', expected)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

export async function webhookValuePrefixesInUse(db: Queryable, column: WebhookCipherColumn): Promise<string[]> {
  const rows = await db
    .selectFrom('webhook')
    .select(sql<string>`substr(${sql.ref(column)}, 1, 12)`.as('prefix'))
    .where(column, '!=', '')
    .distinct()
    .execute();
  return rows.map((r) => r.prefix);
}
