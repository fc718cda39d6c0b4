// TypeBox schemas of the wire format, named after Forgejo's structs
// (modules/structs). They validate bodies, serialize responses and generate
// the OpenAPI document, so the three never drift apart.
import { Type } from 'typebox';
import type { Static, TSchema } from 'typebox';

const Str = (description?: string) => Type.String(description ? { description } : {});
const Time = (description?: string) => Type.String({ format: 'date-time', ...(description ? { description } : {}) });

export const ApiError = Type.Object(
  { message: Str(), url: Type.Optional(Str()), errors: Type.Optional(Type.Array(Str())) },
  { title: 'APIError', description: 'Error body: {message, url}; not-found answers add `errors`.' },
);

export const ServerVersion = Type.Object({ version: Str() }, { title: 'ServerVersion' });

export const User = Type.Object(
  {
    id: Type.Integer(),
    login: Str(),
    login_name: Str(),
    source_id: Type.Integer(),
    full_name: Str(),
    email: Str(),
    avatar_url: Str(),
    html_url: Str(),
    language: Str(),
    is_admin: Type.Boolean(),
    last_login: Time(),
    created: Time(),
    restricted: Type.Boolean(),
    active: Type.Boolean(),
    prohibit_login: Type.Boolean(),
    location: Str(),
    pronouns: Str(),
    website: Str(),
    description: Str(),
    visibility: Str(),
    followers_count: Type.Integer(),
    following_count: Type.Integer(),
    starred_repos_count: Type.Integer(),
    username: Str(),
  },
  { title: 'User' },
);
export type UserJson = Static<typeof User>;

export const Organization = Type.Object(
  {
    id: Type.Integer(),
    name: Str(),
    full_name: Str(),
    email: Str(),
    avatar_url: Str(),
    description: Str(),
    website: Str(),
    location: Str(),
    visibility: Str(),
    repo_admin_change_team_access: Type.Boolean(),
    username: Str('deprecated: same as name'),
  },
  { title: 'Organization' },
);
export type OrganizationJson = Static<typeof Organization>;

export const Team = Type.Object(
  {
    id: Type.Integer(),
    name: Str(),
    description: Str(),
    organization: Type.Union([Organization, Type.Null()]),
    includes_all_repositories: Type.Boolean(),
    permission: Type.Union([
      Type.Literal('none'),
      Type.Literal('read'),
      Type.Literal('write'),
      Type.Literal('admin'),
      Type.Literal('owner'),
    ]),
    units: Type.Array(Str()),
    units_map: Type.Record(Type.String(), Type.String()),
    can_create_org_repo: Type.Boolean(),
  },
  { title: 'Team' },
);
export type TeamJson = Static<typeof Team>;

export const Permission = Type.Object(
  { admin: Type.Boolean(), push: Type.Boolean(), pull: Type.Boolean() },
  { title: 'Permission' },
);

export const Repository = Type.Object(
  {
    id: Type.Integer(),
    owner: User,
    name: Str(),
    full_name: Str(),
    description: Str(),
    empty: Type.Boolean(),
    private: Type.Boolean(),
    fork: Type.Boolean(),
    template: Type.Boolean(),
    mirror: Type.Boolean(),
    size: Type.Integer(),
    language: Str(),
    languages_url: Str(),
    html_url: Str(),
    url: Str(),
    link: Str(),
    ssh_url: Str(),
    clone_url: Str(),
    original_url: Str(),
    website: Str(),
    stars_count: Type.Integer(),
    forks_count: Type.Integer(),
    watchers_count: Type.Integer(),
    open_issues_count: Type.Integer(),
    open_pr_counter: Type.Integer(),
    release_counter: Type.Integer(),
    default_branch: Str(),
    archived: Type.Boolean(),
    created_at: Time(),
    updated_at: Time(),
    archived_at: Time(),
    permissions: Type.Optional(Permission),
    has_issues: Type.Boolean(),
    has_wiki: Type.Boolean(),
    has_pull_requests: Type.Boolean(),
    has_projects: Type.Boolean(),
    has_releases: Type.Boolean(),
    has_packages: Type.Boolean(),
    has_actions: Type.Boolean(),
    ignore_whitespace_conflicts: Type.Boolean(),
    allow_merge_commits: Type.Boolean(),
    allow_rebase: Type.Boolean(),
    allow_rebase_explicit: Type.Boolean(),
    allow_squash_merge: Type.Boolean(),
    allow_fast_forward_only_merge: Type.Boolean(),
    allow_rebase_update: Type.Boolean(),
    default_delete_branch_after_merge: Type.Boolean(),
    default_merge_style: Str(),
    default_update_style: Str(),
    default_allow_maintainer_edit: Type.Boolean(),
    avatar_url: Str(),
    internal: Type.Boolean(),
    mirror_interval: Str(),
    object_format_name: Str(),
    mirror_updated: Time(),
    topics: Type.Array(Str()),
    globally_editable_wiki: Type.Boolean(),
    wiki_clone_url: Str(),
  },
  { title: 'Repository' },
);
export type RepositoryJson = Static<typeof Repository>;

export const AccessToken = Type.Object(
  {
    id: Type.Integer(),
    name: Str(),
    sha1: Str('the token itself; only in the answer to its creation'),
    token_last_eight: Str(),
    scopes: Type.Array(Str()),
  },
  { title: 'AccessToken' },
);
export type AccessTokenJson = Static<typeof AccessToken>;

// Request bodies. Unknown keys are dropped, as Go's decoder ignores them.

/**
 * An id in a request body: an integer JavaScript holds exactly. Larger JSON
 * numbers (1e308, 2^63) would reach the database rounded, or overflow
 * PostgreSQL's bigint; no stored id is that large.
 */
const Id = () => Type.Integer({ minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER });
const Visibility = Type.Union([
  Type.Literal(''),
  Type.Literal('public'),
  Type.Literal('limited'),
  Type.Literal('private'),
]);

export const CreateUserOption = Type.Object(
  {
    username: Type.String({ minLength: 1, maxLength: 40 }),
    email: Type.String({ minLength: 1, maxLength: 254 }),
    password: Type.Optional(Type.String({ maxLength: 255 })),
    full_name: Type.Optional(Type.String({ maxLength: 100 })),
    login_name: Type.Optional(Type.String()),
    source_id: Type.Optional(Id()),
    must_change_password: Type.Optional(Type.Boolean({ description: 'default true' })),
    send_notify: Type.Optional(Type.Boolean()),
    restricted: Type.Optional(Type.Boolean()),
    visibility: Type.Optional(Visibility),
    created_at: Type.Optional(Time()),
  },
  { title: 'CreateUserOption' },
);

export const CreateAccessTokenOption = Type.Object(
  // Forgejo stores the name in a VARCHAR(255) and fails on longer ones; here they are a 422. A name
  // of a few KiB would not fit PostgreSQL's index on (uid, name) either.
  { name: Type.String({ minLength: 1, maxLength: 255 }), scopes: Type.Optional(Type.Array(Type.String())) },
  { title: 'CreateAccessTokenOption' },
);

export const CreateOrgOption = Type.Object(
  {
    username: Type.String({ minLength: 1, maxLength: 40 }),
    full_name: Type.Optional(Type.String({ maxLength: 100 })),
    email: Type.Optional(Type.String({ maxLength: 255 })),
    description: Type.Optional(Type.String({ maxLength: 255 })),
    website: Type.Optional(Type.String({ maxLength: 255 })),
    location: Type.Optional(Type.String({ maxLength: 50 })),
    visibility: Type.Optional(Visibility),
    repo_admin_change_team_access: Type.Optional(Type.Boolean()),
  },
  { title: 'CreateOrgOption' },
);

export const CreateTeamOption = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255 }),
    description: Type.Optional(Type.String({ maxLength: 255 })),
    includes_all_repositories: Type.Optional(Type.Boolean()),
    permission: Type.Optional(
      Type.Union([Type.Literal(''), Type.Literal('read'), Type.Literal('write'), Type.Literal('admin')]),
    ),
    units: Type.Optional(Type.Array(Type.String())),
    units_map: Type.Optional(Type.Record(Type.String(), Type.String())),
    can_create_org_repo: Type.Optional(Type.Boolean()),
  },
  { title: 'CreateTeamOption' },
);

export const CreateRepoOption = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100 }),
    description: Type.Optional(Type.String({ maxLength: 2048 })),
    private: Type.Optional(Type.Boolean()),
    auto_init: Type.Optional(Type.Boolean()),
    default_branch: Type.Optional(Type.String({ maxLength: 100 })),
    template: Type.Optional(Type.Boolean()),
    readme: Type.Optional(Type.String()),
    gitignores: Type.Optional(Type.String()),
    license: Type.Optional(Type.String()),
    issue_labels: Type.Optional(Type.String()),
    trust_model: Type.Optional(Type.String()),
    object_format_name: Type.Optional(Type.Union([Type.Literal(''), Type.Literal('sha1'), Type.Literal('sha256')])),
  },
  { title: 'CreateRepoOption' },
);

export const EditRepoOption = Type.Object(
  {
    name: Type.Optional(Type.String({ maxLength: 100 })),
    description: Type.Optional(Type.String({ maxLength: 2048 })),
    website: Type.Optional(Type.String({ maxLength: 1024 })),
    private: Type.Optional(Type.Boolean()),
    template: Type.Optional(Type.Boolean()),
    archived: Type.Optional(Type.Boolean()),
    default_branch: Type.Optional(Type.String()),
    has_issues: Type.Optional(Type.Boolean()),
    has_wiki: Type.Optional(Type.Boolean()),
    has_pull_requests: Type.Optional(Type.Boolean()),
    has_projects: Type.Optional(Type.Boolean()),
    has_releases: Type.Optional(Type.Boolean()),
    has_packages: Type.Optional(Type.Boolean()),
    has_actions: Type.Optional(Type.Boolean()),
  },
  { title: 'EditRepoOption' },
);

export const AddCollaboratorOption = Type.Object(
  { permission: Type.Optional(Type.Union([Type.Literal('read'), Type.Literal('write'), Type.Literal('admin')])) },
  { title: 'AddCollaboratorOption' },
);

export const Secret = Type.Object(
  {
    name: Str("the secret's name, upper case"),
    created_at: Time('when the secret was created (an update does not change it)'),
  },
  { title: 'Secret', description: 'A secret: its value is write-only and never returned.' },
);
export type SecretJson = Static<typeof Secret>;

export const ActionVariable = Type.Object(
  {
    owner_id: Type.Integer({
      description: 'the user or organization the variable belongs to; 0 for a repository variable',
    }),
    repo_id: Type.Integer({
      description: 'the repository the variable belongs to; 0 for a user or organization variable',
    }),
    name: Str('the name of the variable, upper case'),
    data: Str('the value of the variable'),
  },
  { title: 'ActionVariable' },
);
export type ActionVariableJson = Static<typeof ActionVariable>;

const VALUE_DESCRIPTION =
  'Required, not empty, at most 65536 bytes. Line endings are normalized to LF; nothing else changes.';

export const CreateOrUpdateSecretOption = Type.Object(
  { data: Type.String({ minLength: 1, description: `Data of the secret. ${VALUE_DESCRIPTION}` }) },
  { title: 'CreateOrUpdateSecretOption' },
);

export const CreateVariableOption = Type.Object(
  { value: Type.String({ minLength: 1, description: `Value of the variable. ${VALUE_DESCRIPTION}` }) },
  { title: 'CreateVariableOption' },
);

export const UpdateVariableOption = Type.Object(
  {
    name: Type.Optional(
      Type.String({ description: 'New name of the variable (upper-cased); empty keeps the current name.' }),
    ),
    value: Type.String({ minLength: 1, description: `Value of the variable. ${VALUE_DESCRIPTION}` }),
  },
  { title: 'UpdateVariableOption' },
);

/** Documented query parameters of paginated lists (parsed leniently in code, like Forgejo). */
export const ActionRun = Type.Object(
  {
    id: Type.Integer(),
    title: Str(),
    repository: Repository,
    workflow_id: Str('the workflow file name, e.g. build.yml'),
    index_in_repo: Type.Integer({ description: 'the run number in its repository' }),
    trigger_user: User,
    // Forgejo's struct field has no JSON tag, so its key is the Go field name.
    ScheduleID: Type.Integer(),
    prettyref: Str(),
    is_ref_deleted: Type.Boolean(),
    commit_sha: Str(),
    is_fork_pull_request: Type.Boolean(),
    need_approval: Type.Boolean(),
    approved_by: Type.Integer(),
    event: Str('the stored event; empty for workflow_dispatch and schedule runs, as in Forgejo'),
    event_payload: Str('the triggering payload as JSON text'),
    trigger_event: Str('the `on:` key that matched'),
    status: Str(),
    started: Time(),
    stopped: Time(),
    created: Time(),
    updated: Time(),
    duration: Type.Optional(Type.Integer({ description: 'nanoseconds; absent when the run never started' })),
    html_url: Str(),
    pre_execution_error: Type.Optional(
      Str('Gantry: why the run failed before any job started (an invalid workflow file)'),
    ),
  },
  { title: 'ActionRun' },
);
export type ActionRunJson = Static<typeof ActionRun>;

export const ListActionRunResponse = Type.Object(
  { workflow_runs: Type.Array(ActionRun), total_count: Type.Integer() },
  { title: 'ListActionRunResponse' },
);

export const ActionTask = Type.Object(
  {
    id: Type.Integer(),
    name: Str(),
    head_branch: Str(),
    head_sha: Str(),
    run_number: Type.Integer(),
    event: Str(),
    display_title: Str(),
    status: Str(),
    workflow_id: Str(),
    url: Str(),
    created_at: Time(),
    updated_at: Time(),
    run_started_at: Time(),
  },
  { title: 'ActionTask' },
);
export type ActionTaskJson = Static<typeof ActionTask>;

export const ActionTaskResponse = Type.Object(
  { workflow_runs: Type.Array(ActionTask), total_count: Type.Integer() },
  { title: 'ActionTaskResponse' },
);

export const DispatchWorkflowOption = Type.Object(
  {
    ref: Type.Optional(Str('git reference: a branch or tag name, `refs/…`, or a commit id')),
    inputs: Type.Optional(
      Type.Record(Type.String(), Type.String(), {
        description: 'input keys and values configured in the workflow file',
      }),
    ),
    return_run_info: Type.Optional(Type.Boolean({ description: 'answer 201 with the run (Forgejo)' })),
    return_run_details: Type.Optional(
      Type.Boolean({ description: 'answer 200 with RunDetails (Gitea; also accepted as a query parameter)' }),
    ),
  },
  { title: 'DispatchWorkflowOption' },
);

export const DispatchWorkflowRun = Type.Object(
  { id: Type.Integer(), run_number: Type.Integer(), jobs: Type.Array(Str()) },
  { title: 'DispatchWorkflowRun' },
);

export const RunDetails = Type.Object(
  { workflow_run_id: Type.Integer(), run_url: Str(), html_url: Str() },
  { title: 'RunDetails' },
);

export const PageQuery = Type.Object({
  page: Type.Optional(Type.Integer({ description: 'page number of results to return (1-based)' })),
  limit: Type.Optional(Type.Integer({ description: 'page size of results' })),
});

export const NoContent = Type.Null({ description: 'no content' });

/** Standard error responses for the OpenAPI document. */
export function errorResponses(...statuses: number[]): Record<number, TSchema> {
  return Object.fromEntries(statuses.map((s) => [s, ApiError]));
}
