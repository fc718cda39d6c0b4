// Gitea's workflows API structs (modules/structs/repo_actions.go:
// ActionWorkflow, ActionWorkflowResponse, ActionWorkflowRun,
// ActionWorkflowRunsResponse). Forgejo has no workflows API; these paths are
// Gitea's, so they answer in Gitea's shape.
import { Type } from 'typebox';
import type { Static } from 'typebox';
import { Repository, User } from './schemas.ts';

const Str = (description?: string) => Type.String(description ? { description } : {});
const Time = (description?: string) => Type.String({ format: 'date-time', ...(description ? { description } : {}) });

export const ActionWorkflow = Type.Object(
  {
    id: Str('the file name relative to the workflows directory (e.g. `ci.yml`), a string as in Gitea'),
    name: Str('the YAML `name:`, else the file name'),
    path: Str('from the repository root, e.g. `.forgejo/workflows/ci.yml`'),
    state: Type.Union([Type.Literal('active'), Type.Literal('disabled_manually')]),
    created_at: Time('author time of the default branch head commit (Gitea)'),
    updated_at: Time('author time of the default branch head commit (Gitea)'),
    url: Str(),
    html_url: Str(),
    badge_url: Str(),
    deleted_at: Time('always the zero time'),
    schedule_errors: Type.Optional(
      Type.Array(Str(), {
        description:
          'Gantry only, present when not empty: the `on: schedule` entries that were not registered, each with the reason (Gitea has no field for it)',
      }),
    ),
  },
  { title: 'ActionWorkflow' },
);
export type ActionWorkflowJson = Static<typeof ActionWorkflow>;

export const ActionWorkflowResponse = Type.Object(
  { workflows: Type.Array(ActionWorkflow), total_count: Type.Integer() },
  { title: 'ActionWorkflowResponse' },
);

export const ActionWorkflowRun = Type.Object(
  {
    id: Type.Integer(),
    url: Str(),
    html_url: Str(),
    display_title: Str(),
    path: Str('`<workflow file>@<ref>`'),
    event: Str(),
    run_attempt: Type.Integer(),
    run_number: Type.Integer(),
    repository_id: Type.Integer(),
    head_sha: Str(),
    head_branch: Str(),
    status: Str('queued, waiting, in_progress or completed'),
    conclusion: Str('success, failure, cancelled or skipped once completed; empty before'),
    actor: User,
    trigger_actor: User,
    repository: Repository,
    head_repository: Repository,
    started_at: Time(),
    completed_at: Time(),
    created_at: Time(),
    updated_at: Time(),
    jobs_url: Str(),
  },
  { title: 'ActionWorkflowRun' },
);
export type ActionWorkflowRunJson = Static<typeof ActionWorkflowRun>;

export const ActionWorkflowRunsResponse = Type.Object(
  { workflow_runs: Type.Array(ActionWorkflowRun), total_count: Type.Integer() },
  { title: 'ActionWorkflowRunsResponse' },
);

export const WorkflowParams = Type.Object({
  owner: Str('owner of the repository'),
  repo: Str('name of the repository'),
  // Named as the dispatch route's parameter: the router holds one name per path position.
  workflowfilename: Str('the workflow file name (Gitea’s workflow_id), e.g. `ci.yml`'),
});
