// Domain objects → Forgejo's JSON (services/convert in Forgejo).
import { AccessMode, accessModeName } from '../modules/access-mode.ts';
import type { AccessToken } from '../models/access-tokens.ts';
import type { Team } from '../models/orgs.ts';
import type { Repository } from '../models/repos.ts';
import type { User } from '../models/users.ts';
import { scopeToList, parseScopes } from '../modules/scopes.ts';
import type { AccessTokenJson, OrganizationJson, RepositoryJson, TeamJson, UserJson } from '../api-types/schemas.ts';

const recentTimes = new Map<number, string>();

/** RFC 3339 in UTC, whole seconds; a zero timestamp is the epoch, as Forgejo renders it. */
export function apiTime(unixSec: number): string {
  // The same few timestamps (creation times of the caller, the epoch) recur in
  // every response; formatting dates showed in the request profile.
  let text = recentTimes.get(unixSec);
  if (text === undefined) {
    text = new Date(unixSec * 1000).toISOString().replace('.000Z', 'Z');
    if (recentTimes.size >= 4096) recentTimes.clear();
    recentTimes.set(unixSec, text);
  }
  return text;
}

export interface Viewer {
  doer: User | null;
  isSiteAdmin: boolean;
}

function avatarUrl(rootUrl: string, account: User): string {
  return `${rootUrl}avatars/${account.lowerName}`;
}

/** Private fields (admin flag, login data, e-mail) only for the user themself or a site admin. */
export function toApiUser(user: User, viewer: Viewer, rootUrl: string): UserJson {
  const privileged = viewer.isSiteAdmin || viewer.doer?.id === user.id;
  const email = viewer.doer ? user.email : `${user.lowerName}@noreply.localhost`;
  return {
    id: user.id,
    login: user.name,
    login_name: privileged ? user.loginName : '',
    source_id: privileged ? user.sourceId : 0,
    full_name: user.fullName,
    email,
    avatar_url: avatarUrl(rootUrl, user),
    html_url: `${rootUrl}${encodeURIComponent(user.name)}`,
    language: privileged ? user.language : '',
    is_admin: privileged ? user.isAdmin : false,
    last_login: apiTime(privileged ? user.lastLoginUnix : 0),
    created: apiTime(user.createdUnix),
    restricted: privileged ? user.restricted : false,
    active: privileged ? user.isActive : false,
    prohibit_login: privileged ? user.prohibitLogin : false,
    location: user.location,
    pronouns: user.pronouns,
    website: user.website,
    description: user.description,
    visibility: user.visibility,
    followers_count: 0,
    following_count: 0,
    starred_repos_count: 0,
    username: user.name,
  };
}

export function toApiOrg(org: User, rootUrl: string): OrganizationJson {
  return {
    id: org.id,
    name: org.name,
    full_name: org.fullName,
    email: org.email,
    avatar_url: avatarUrl(rootUrl, org),
    description: org.description,
    website: org.website,
    location: org.location,
    visibility: org.visibility,
    repo_admin_change_team_access: org.repoAdminChangeTeamAccess,
    username: org.name,
  };
}

export function toApiTeam(team: Team, org: User | null, rootUrl: string): TeamJson {
  return {
    id: team.id,
    name: team.name,
    description: team.description,
    organization: org ? toApiOrg(org, rootUrl) : null,
    includes_all_repositories: team.includesAllRepositories,
    permission: accessModeName(team.authorize),
    units: Object.keys(team.units),
    units_map: team.units,
    can_create_org_repo: team.canCreateOrgRepo,
  };
}

export function toApiRepo(
  repo: Repository,
  owner: User,
  mode: number | null,
  viewer: Viewer,
  rootUrl: string,
): RepositoryJson {
  const fullName = `${owner.name}/${repo.name}`;
  const htmlUrl = `${rootUrl}${fullName}`;
  const json: RepositoryJson = {
    id: repo.id,
    owner: toApiUser(owner, viewer, rootUrl),
    name: repo.name,
    full_name: fullName,
    description: repo.description,
    empty: repo.isEmpty,
    private: repo.isPrivate,
    fork: false,
    template: repo.isTemplate,
    mirror: false,
    size: 0,
    language: '',
    languages_url: `${rootUrl}api/v1/repos/${fullName}/languages`,
    html_url: htmlUrl,
    url: `${rootUrl}api/v1/repos/${fullName}`,
    link: '',
    // Gantry serves git over HTTP only.
    ssh_url: '',
    clone_url: `${htmlUrl}.git`,
    original_url: '',
    website: repo.website,
    stars_count: 0,
    forks_count: 0,
    watchers_count: 0,
    open_issues_count: 0,
    open_pr_counter: 0,
    release_counter: 0,
    default_branch: repo.defaultBranch,
    archived: repo.isArchived,
    created_at: apiTime(repo.createdUnix),
    updated_at: apiTime(repo.updatedUnix),
    archived_at: apiTime(repo.archivedUnix),
    has_issues: repo.units.issues,
    has_wiki: repo.units.wiki,
    has_pull_requests: repo.units.pull_requests,
    has_projects: repo.units.projects,
    has_releases: repo.units.releases,
    has_packages: repo.units.packages,
    has_actions: repo.units.actions,
    ignore_whitespace_conflicts: false,
    allow_merge_commits: true,
    allow_rebase: true,
    allow_rebase_explicit: true,
    allow_squash_merge: true,
    allow_fast_forward_only_merge: true,
    allow_rebase_update: true,
    default_delete_branch_after_merge: false,
    default_merge_style: 'merge',
    default_update_style: 'merge',
    default_allow_maintainer_edit: false,
    avatar_url: '',
    internal: false,
    mirror_interval: '',
    object_format_name: repo.objectFormatName,
    mirror_updated: apiTime(0),
    topics: [],
    globally_editable_wiki: false,
    wiki_clone_url: `${htmlUrl}.wiki.git`,
  };
  if (mode !== null) {
    json.permissions = {
      admin: mode >= AccessMode.admin,
      push: mode >= AccessMode.write,
      pull: mode >= AccessMode.read,
    };
  }
  return json;
}

export function toApiToken(token: AccessToken, secret = ''): AccessTokenJson {
  return {
    id: token.id,
    name: token.name,
    sha1: secret,
    token_last_eight: token.tokenLastEight,
    scopes: scopeToList(parseScopes([token.scope])),
  };
}
