// Wire types of a run's jobs: Forgejo 16's ActionRunJob (with run_id) for the
// jobs list, Gitea's ActionWorkflowJob/ActionWorkflowStep for one job
// (modules/structs/action.go in Forgejo, modules/structs/repo_actions.go in
// Gitea); keys in Go field order.
import { Type } from 'typebox';
import type { Static } from 'typebox';
import { ActionRunJob } from './runner-schemas.ts';

const Time = (description: string) => Type.String({ format: 'date-time', description });

// The runners' jobs search answers the same struct (runner-schemas.ts); Forgejo 16 adds run_id
// after id. The other keys keep their place; only their descriptions say more here.
const { id, ...jobFields } = ActionRunJob.properties;
export const ActionRunJobOfRun = Type.Object(
  {
    id,
    run_id: Type.Integer({ description: 'the run of the job (Forgejo 16)' }),
    ...jobFields,
    attempt: Type.Integer({ description: 'the current attempt; a rerun adds one' }),
    task_id: Type.Integer({ description: 'the task of the current attempt; 0 if none' }),
    status: Type.String({
      description: 'Forgejo status name: unknown, success, failure, cancelled, skipped, waiting, running or blocked',
    }),
  },
  { title: 'ActionRunJob' },
);
export type ActionRunJobOfRunJson = Static<typeof ActionRunJobOfRun>;

export const ActionRunJobArray = Type.Array(ActionRunJobOfRun, {
  description: 'the jobs of the run by id; unpaginated',
});

export const ActionWorkflowStep = Type.Object(
  {
    name: Type.String(),
    number: Type.Integer({ description: "0-based position among the task's steps" }),
    status: Type.String({ description: "the step's own status: queued, waiting, in_progress or completed" }),
    conclusion: Type.Optional(Type.String({ description: 'success, failure, cancelled or skipped once completed' })),
    started_at: Time('the epoch until the step started'),
    completed_at: Time('the epoch until the step ended'),
  },
  { title: 'ActionWorkflowStep' },
);
export type ActionWorkflowStepJson = Static<typeof ActionWorkflowStep>;

export const ActionWorkflowJob = Type.Object(
  {
    id: Type.Integer(),
    url: Type.String(),
    html_url: Type.String(),
    run_id: Type.Integer(),
    run_url: Type.String(),
    name: Type.String(),
    labels: Type.Array(Type.String(), { description: 'the runs-on labels' }),
    run_attempt: Type.Integer({ description: "the job's attempt" }),
    head_sha: Type.String(),
    head_branch: Type.Optional(Type.String({ description: 'branch name; absent for tags and pull request refs' })),
    status: Type.String({ description: 'queued, waiting, in_progress or completed' }),
    conclusion: Type.Optional(Type.String({ description: 'success, failure, cancelled or skipped once completed' })),
    runner_id: Type.Optional(Type.Integer()),
    runner_name: Type.Optional(Type.String()),
    steps: Type.Array(ActionWorkflowStep, {
      description: "the steps of the current attempt's task; [] before a runner took it",
    }),
    created_at: Time('creation time'),
    started_at: Time('the epoch until the job started'),
    completed_at: Time('the epoch until the job ended'),
  },
  { title: 'ActionWorkflowJob' },
);
export type ActionWorkflowJobJson = Static<typeof ActionWorkflowJob>;
