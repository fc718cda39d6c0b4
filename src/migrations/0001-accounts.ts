// Users and organizations (one table, as Forgejo: names are unique across both),
// access tokens, teams and memberships, repositories and collaborators.
// Flags are 0/1 integers on both dialects; times are Unix seconds.
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { withId } from './dialect.ts';

export async function up(db: Kysely<unknown>): Promise<void> {
  await withId(db, db.schema.createTable('user'))
    .addColumn('lower_name', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('full_name', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('email', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('lower_email', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('passwd', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('login_name', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('source_id', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('type', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('visibility', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('is_admin', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('is_active', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('prohibit_login', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('must_change_password', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('restricted', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('website', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('location', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('language', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('pronouns', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('repo_admin_change_team_access', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_unix', 'bigint', (c) => c.notNull())
    .addColumn('updated_unix', 'bigint', (c) => c.notNull())
    .addColumn('last_login_unix', 'bigint', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.createIndex('user_lower_name_uq').unique().on('user').column('lower_name').execute();
  // Individual users need distinct e-mails; organizations may share or omit theirs.
  await db.schema
    .createIndex('user_lower_email_uq')
    .unique()
    .on('user')
    .column('lower_email')
    .where(sql.ref('type'), '=', 0)
    .execute();

  await withId(db, db.schema.createTable('access_token'))
    .addColumn('uid', 'bigint', (c) => c.notNull().references('user.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('token_hash', 'text', (c) => c.notNull())
    .addColumn('token_last_eight', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('created_unix', 'bigint', (c) => c.notNull())
    .addColumn('updated_unix', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('access_token_hash_uq').unique().on('access_token').column('token_hash').execute();
  await db.schema
    .createIndex('access_token_uid_name_uq')
    .unique()
    .on('access_token')
    .columns(['uid', 'name'])
    .execute();

  await withId(db, db.schema.createTable('team'))
    .addColumn('org_id', 'bigint', (c) => c.notNull().references('user.id').onDelete('cascade'))
    .addColumn('lower_name', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('authorize', 'integer', (c) => c.notNull())
    .addColumn('includes_all_repositories', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('can_create_org_repo', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('units', 'text', (c) => c.notNull().defaultTo('{}'))
    .addColumn('created_unix', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('team_org_lower_name_uq').unique().on('team').columns(['org_id', 'lower_name']).execute();

  await withId(db, db.schema.createTable('team_user'))
    .addColumn('org_id', 'bigint', (c) => c.notNull().references('user.id').onDelete('cascade'))
    .addColumn('team_id', 'bigint', (c) => c.notNull().references('team.id').onDelete('cascade'))
    .addColumn('uid', 'bigint', (c) => c.notNull().references('user.id').onDelete('cascade'))
    .execute();
  await db.schema.createIndex('team_user_team_uid_uq').unique().on('team_user').columns(['team_id', 'uid']).execute();
  await db.schema.createIndex('team_user_uid_org').on('team_user').columns(['uid', 'org_id']).execute();

  await withId(db, db.schema.createTable('org_user'))
    .addColumn('uid', 'bigint', (c) => c.notNull().references('user.id').onDelete('cascade'))
    .addColumn('org_id', 'bigint', (c) => c.notNull().references('user.id').onDelete('cascade'))
    .addColumn('is_public', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema.createIndex('org_user_uid_org_uq').unique().on('org_user').columns(['uid', 'org_id']).execute();
  await db.schema.createIndex('org_user_org').on('org_user').column('org_id').execute();

  await withId(db, db.schema.createTable('repository'))
    .addColumn('owner_id', 'bigint', (c) => c.notNull().references('user.id'))
    .addColumn('owner_name', 'text', (c) => c.notNull())
    .addColumn('lower_name', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('website', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('default_branch', 'text', (c) => c.notNull())
    .addColumn('object_format_name', 'text', (c) => c.notNull().defaultTo('sha1'))
    .addColumn('is_private', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('is_archived', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('is_empty', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('is_template', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('has_issues', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('has_wiki', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('has_pull_requests', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('has_projects', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('has_releases', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('has_packages', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('has_actions', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('archived_unix', 'bigint', (c) => c.notNull().defaultTo(0))
    .addColumn('created_unix', 'bigint', (c) => c.notNull())
    .addColumn('updated_unix', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('repository_owner_lower_name_uq')
    .unique()
    .on('repository')
    .columns(['owner_id', 'lower_name'])
    .execute();

  await withId(db, db.schema.createTable('team_repo'))
    .addColumn('org_id', 'bigint', (c) => c.notNull().references('user.id').onDelete('cascade'))
    .addColumn('team_id', 'bigint', (c) => c.notNull().references('team.id').onDelete('cascade'))
    .addColumn('repo_id', 'bigint', (c) => c.notNull().references('repository.id').onDelete('cascade'))
    .execute();
  await db.schema
    .createIndex('team_repo_team_repo_uq')
    .unique()
    .on('team_repo')
    .columns(['team_id', 'repo_id'])
    .execute();
  await db.schema.createIndex('team_repo_repo').on('team_repo').column('repo_id').execute();

  await withId(db, db.schema.createTable('collaboration'))
    .addColumn('repo_id', 'bigint', (c) => c.notNull().references('repository.id').onDelete('cascade'))
    .addColumn('user_id', 'bigint', (c) => c.notNull().references('user.id').onDelete('cascade'))
    .addColumn('mode', 'integer', (c) => c.notNull())
    .addColumn('created_unix', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('collaboration_repo_user_uq')
    .unique()
    .on('collaboration')
    .columns(['repo_id', 'user_id'])
    .execute();
  await db.schema.createIndex('collaboration_user').on('collaboration').column('user_id').execute();
}
