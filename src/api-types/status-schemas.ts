// Commit status wire types, named after Forgejo's structs (modules/structs/status.go, commit_status.go).
import { Type } from 'typebox';
import type { Static } from 'typebox';
import { Repository, User } from './schemas.ts';

export const CommitStatus = Type.Object(
  {
    id: Type.Integer({ description: 'the per-commit index (1, 2, …), not a global id' }),
    status: Type.String({
      description: 'the state: pending, success, error, failure, warning (Actions also writes skipped)',
    }),
    target_url: Type.String(),
    description: Type.String(),
    url: Type.String(),
    context: Type.String(),
    creator: Type.Union([User, Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { title: 'CommitStatus' },
);
export type CommitStatusJson = Static<typeof CommitStatus>;

export const CombinedStatus = Type.Object(
  {
    state: Type.String({ description: 'the worst latest state; "" when the commit has no statuses' }),
    sha: Type.String(),
    total_count: Type.Integer(),
    statuses: Type.Union([Type.Array(CommitStatus), Type.Null()]),
    repository: Type.Union([Repository, Type.Null()]),
    commit_url: Type.String(),
    url: Type.String(),
  },
  { title: 'CombinedStatus' },
);

export const CreateStatusOption = Type.Object(
  {
    state: Type.Optional(Type.String()),
    target_url: Type.Optional(Type.String()),
    description: Type.Optional(Type.String()),
    context: Type.Optional(Type.String()),
  },
  { title: 'CreateStatusOption' },
);
