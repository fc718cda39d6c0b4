// Migrations must not import models, so the few dialect differences of DDL live here.
import type { ColumnDefinitionBuilder, CreateTableBuilder, Kysely } from 'kysely';
import { PostgresAdapter } from 'kysely';

export function isPostgres(db: Kysely<unknown>): boolean {
  return db.getExecutor().adapter instanceof PostgresAdapter;
}

/** A 64-bit auto-incrementing primary key named `id` on both dialects. */
export function withId<T extends string>(
  db: Kysely<unknown>,
  table: CreateTableBuilder<T, never>,
): CreateTableBuilder<T, 'id'> {
  return isPostgres(db)
    ? table.addColumn('id', 'bigserial', (col: ColumnDefinitionBuilder) => col.primaryKey())
    : table.addColumn('id', 'integer', (col: ColumnDefinitionBuilder) => col.primaryKey().autoIncrement());
}
