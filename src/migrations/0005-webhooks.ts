// Organization webhooks and their deliveries (Forgejo's webhook and hook_task,
// plus the attempt history Forgejo does not keep).
//
// hook_task is an outbox: a delivery row is written in the transaction of the
// change that causes it, and workers claim due rows with a lease, so nothing
// is lost across a crash and no two processes deliver one row at once.
import type { Kysely } from 'kysely';
import { withId } from './dialect.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await withId(db, db.schema.createTable('webhook'))
    // The organization (repository hooks would use repo_id; not served yet).
    .addColumn('owner_id', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('repo_id', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('http_method', 'text', (c) => c.notNull().defaultTo('POST'))
    // `json` or `form`.
    .addColumn('content_type', 'text', (c) => c.notNull())
    // Key-ring ciphertext; '' when none. Never returned by the API.
    .addColumn('secret_encrypted', 'text', (c) => c.notNull().defaultTo(''))
    // Key-ring ciphertext; '' when none (the API shows it decrypted, as Forgejo).
    .addColumn('authorization_header_encrypted', 'text', (c) => c.notNull().defaultTo(''))
    // JSON array of the internal event names the hook is subscribed to.
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('branch_filter', 'text', (c) => c.notNull().defaultTo(''))
    // JSON of the type's settings (slack channel, telegram chat…); 'null' when none.
    .addColumn('meta', 'text', (c) => c.notNull().defaultTo('null'))
    .addColumn('is_active', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('is_system_webhook', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created', 'bigint', (c) => c.notNull())
    .addColumn('updated', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhook_owner_id').on('webhook').columns(['owner_id', 'id']).execute();

  await withId(db, db.schema.createTable('hook_task'))
    .addColumn('hook_id', 'bigint', (c) => c.notNull())
    // The delivery id receivers see (X-Forgejo-Delivery…), the same on every attempt.
    .addColumn('uuid', 'text', (c) => c.notNull())
    .addColumn('event_type', 'text', (c) => c.notNull())
    // The event payload as JSON (Forgejo's api structs); formatted per hook type when sent.
    .addColumn('payload_content', 'text', (c) => c.notNull())
    // 0 pending, 1 delivering (leased), 2 delivered (2xx), 3 failed for good.
    .addColumn('status', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    // Unix milliseconds: when the next attempt is due, and until when a claim holds.
    .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
    .addColumn('lease_until', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('lease_owner', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('is_redelivery', 'integer', (c) => c.notNull().defaultTo(0))
    // The last attempt, for the list view.
    .addColumn('last_status_code', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_duration_ms', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('last_error', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('delivered', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('created', 'bigint', (c) => c.notNull())
    .addColumn('updated', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('hook_task_uuid_uq').unique().on('hook_task').column('uuid').execute();
  await db.schema.createIndex('hook_task_hook_id').on('hook_task').columns(['hook_id', 'id']).execute();
  // Workers look for due rows: pending (or leased with an expired lease) by due time.
  await db.schema.createIndex('hook_task_status_due').on('hook_task').columns(['status', 'next_attempt_at']).execute();
  // Retention prunes old finished rows.
  await db.schema.createIndex('hook_task_created').on('hook_task').columns(['created']).execute();

  await withId(db, db.schema.createTable('hook_task_attempt'))
    .addColumn('task_id', 'bigint', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('started', 'bigint', (c) => c.notNull())
    .addColumn('duration_ms', 'bigint', (c) => c.notNull())
    .addColumn('request_url', 'text', (c) => c.notNull())
    // JSON objects of header name → value (secrets redacted).
    .addColumn('request_headers', 'text', (c) => c.notNull())
    .addColumn('request_body', 'text', (c) => c.notNull())
    // 0 when no response (refused target, timeout, connection error).
    .addColumn('response_status', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('response_headers', 'text', (c) => c.notNull().defaultTo('{}'))
    // Truncated to a documented size.
    .addColumn('response_body', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('error', 'text', (c) => c.notNull().defaultTo(''))
    .execute();
  await db.schema
    .createIndex('hook_task_attempt_task')
    .on('hook_task_attempt')
    .columns(['task_id', 'attempt'])
    .execute();
}
