// Wire schemas of the runners API, named after Forgejo's structs
// (modules/structs/repo_actions.go, action.go); keys in Go field order.
import { Type } from 'typebox';
import type { Static } from 'typebox';

const Labels = (description: string) => Type.Union([Type.Array(Type.String()), Type.Null()], { description });

export const RegistrationToken = Type.Object(
  { token: Type.String({ description: '43 characters of the URL-safe base64 alphabet' }) },
  { title: 'RegistrationToken', description: "The scope's active runner registration token." },
);

export const RegisterRunnerOptions = Type.Object(
  {
    name: Type.String({ minLength: 1, description: 'Name of the runner (required; stored truncated to 255 bytes).' }),
    description: Type.Optional(Type.String({ description: 'Description of the runner.' })),
    ephemeral: Type.Optional(Type.Boolean({ description: 'An ephemeral runner takes one job and is then removed.' })),
  },
  { title: 'RegisterRunnerOptions' },
);
export type RegisterRunnerOptionsJson = Static<typeof RegisterRunnerOptions>;

export const RegisterRunnerResponse = Type.Object(
  {
    id: Type.Integer(),
    uuid: Type.String({ description: 'UUID v4 of the runner' }),
    token: Type.String({ description: "the runner's secret (40 hex characters), shown only here" }),
  },
  { title: 'RegisterRunnerResponse' },
);
export type RegisterRunnerResponseJson = Static<typeof RegisterRunnerResponse>;

export const ActionRunner = Type.Object(
  {
    id: Type.Integer(),
    uuid: Type.String(),
    owner_id: Type.Integer({
      description: 'the user or organization of the runner; 0 for repository and instance runners',
    }),
    repo_id: Type.Integer({ description: 'the repository of the runner; 0 for other runners' }),
    name: Type.String(),
    status: Type.Union([Type.Literal('offline'), Type.Literal('idle'), Type.Literal('active')], {
      description: 'offline: no contact for over a minute; idle: no task report for over 10 seconds; else active',
    }),
    version: Type.String(),
    labels: Labels('the labels the runner declared; null until it declared any'),
    description: Type.String(),
    ephemeral: Type.Boolean(),
  },
  { title: 'ActionRunner' },
);
export type ActionRunnerJson = Static<typeof ActionRunner>;

export const ActionRunJob = Type.Object(
  {
    id: Type.Integer(),
    attempt: Type.Integer(),
    handle: Type.String({ description: 'identifies the current attempt (FetchSingleTask)' }),
    repo_id: Type.Integer(),
    owner_id: Type.Integer(),
    name: Type.String(),
    needs: Labels('job ids this job needs; null when none'),
    runs_on: Labels('the runs-on labels; null when none'),
    task_id: Type.Integer({ description: 'the latest task of the job; 0 if none' }),
    status: Type.String({ description: 'waiting or running' }),
  },
  { title: 'ActionRunJob' },
);
export type ActionRunJobJson = Static<typeof ActionRunJob>;

/** `null`, not `[]`, when nothing matches (Forgejo answers a nil slice). */
export const ActionRunJobList = Type.Union([Type.Array(ActionRunJob), Type.Null()], {
  description: 'matching jobs, newest first; null when none',
});

export const RunnerListQuery = Type.Object({
  visible: Type.Optional(
    Type.Boolean({
      description: 'also list the runners inherited from the owner and the instance (the instance: every runner)',
    }),
  ),
  page: Type.Optional(Type.Integer({ description: 'page number of results to return (1-based)' })),
  limit: Type.Optional(Type.Integer({ description: 'page size of results' })),
});

export const RunnerJobsQuery = Type.Object({
  labels: Type.Optional(
    Type.String({
      description:
        'comma-separated labels: jobs whose runs-on labels are all among them. Absent: every job; empty: jobs without runs-on. ' +
        'At most the newest 1000 waiting and 1000 running jobs of the scope are considered.',
    }),
  ),
});
