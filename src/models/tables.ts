// Kysely table types: the shape of each row as stored. Flags are 0/1 integers.
import type { Generated } from 'kysely';

export interface UserTable {
  id: Generated<number>;
  lower_name: string;
  name: string;
  full_name: Generated<string>;
  email: Generated<string>;
  lower_email: Generated<string>;
  passwd: Generated<string>;
  login_name: Generated<string>;
  source_id: Generated<number>;
  type: Generated<number>;
  visibility: Generated<number>;
  is_admin: Generated<number>;
  is_active: Generated<number>;
  prohibit_login: Generated<number>;
  must_change_password: Generated<number>;
  restricted: Generated<number>;
  description: Generated<string>;
  website: Generated<string>;
  location: Generated<string>;
  language: Generated<string>;
  pronouns: Generated<string>;
  repo_admin_change_team_access: Generated<number>;
  created_unix: number;
  updated_unix: number;
  last_login_unix: Generated<number>;
}

export interface AccessTokenTable {
  id: Generated<number>;
  uid: number;
  name: string;
  token_hash: string;
  token_last_eight: string;
  scope: string;
  created_unix: number;
  updated_unix: number;
}

export interface TeamTable {
  id: Generated<number>;
  org_id: number;
  lower_name: string;
  name: string;
  description: Generated<string>;
  authorize: number;
  includes_all_repositories: Generated<number>;
  can_create_org_repo: Generated<number>;
  units: Generated<string>;
  created_unix: number;
}

export interface TeamUserTable {
  id: Generated<number>;
  org_id: number;
  team_id: number;
  uid: number;
}

export interface OrgUserTable {
  id: Generated<number>;
  uid: number;
  org_id: number;
  is_public: Generated<number>;
}

export interface RepositoryTable {
  id: Generated<number>;
  owner_id: number;
  owner_name: string;
  lower_name: string;
  name: string;
  description: Generated<string>;
  website: Generated<string>;
  default_branch: string;
  object_format_name: Generated<string>;
  is_private: Generated<number>;
  is_archived: Generated<number>;
  is_empty: Generated<number>;
  is_template: Generated<number>;
  has_issues: Generated<number>;
  has_wiki: Generated<number>;
  has_pull_requests: Generated<number>;
  has_projects: Generated<number>;
  has_releases: Generated<number>;
  has_packages: Generated<number>;
  has_actions: Generated<number>;
  archived_unix: Generated<number>;
  created_unix: number;
  updated_unix: number;
}

export interface TeamRepoTable {
  id: Generated<number>;
  org_id: number;
  team_id: number;
  repo_id: number;
}

export interface CollaborationTable {
  id: Generated<number>;
  repo_id: number;
  user_id: number;
  mode: number;
  created_unix: number;
}

/**
 * A named value of one Actions scope: (owner_id, 0) for a user or organization,
 * (0, repo_id) for a repository. Both `secret` (data is ciphertext) and
 * `action_variable` (data is readable) have this shape.
 */
export interface ScopedValueTable {
  id: Generated<number>;
  owner_id: number;
  repo_id: number;
  name: string;
  data: string;
  created_unix: number;
  updated_unix: number;
}

export interface Database {
  user: UserTable;
  access_token: AccessTokenTable;
  team: TeamTable;
  team_user: TeamUserTable;
  org_user: OrgUserTable;
  repository: RepositoryTable;
  team_repo: TeamRepoTable;
  collaboration: CollaborationTable;
  secret: ScopedValueTable;
  action_variable: ScopedValueTable;
}
