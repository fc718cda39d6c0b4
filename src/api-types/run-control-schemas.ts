// Wire types of the run-control answers that Forgejo's structs do not cover:
// the job a job rerun answers with, in Gitea's ActionWorkflowJob shape
// (modules/structs/repo_actions.go), the shape its workflow_job webhook uses.
import { Type } from 'typebox';

const Str = () => Type.String();
const Time = () => Type.String({ format: 'date-time' });

export const RerunWorkflowStep = Type.Object(
  { name: Str(), number: Type.Integer(), status: Str(), conclusion: Str(), started_at: Time(), completed_at: Time() },
  { title: 'ActionWorkflowStep' },
);

export const RerunWorkflowJob = Type.Object(
  {
    id: Type.Integer(),
    url: Str(),
    html_url: Str(),
    run_id: Type.Integer(),
    run_url: Str(),
    name: Str(),
    labels: Type.Array(Str()),
    run_attempt: Type.Integer(),
    head_sha: Str(),
    head_branch: Str(),
    status: Str(),
    conclusion: Str(),
    runner_id: Type.Integer(),
    runner_name: Str(),
    steps: Type.Array(RerunWorkflowStep),
    created_at: Time(),
    started_at: Time(),
    completed_at: Time(),
  },
  { title: 'ActionWorkflowJob', description: "Gitea's ActionWorkflowJob: the job's new attempt as it waits." },
);
