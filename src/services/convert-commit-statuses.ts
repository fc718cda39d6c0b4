// Commit statuses → Forgejo's JSON (services/convert/status.go ToCommitStatus).
import type { CommitStatusJson } from '../api-types/status-schemas.ts';
import type { Repository } from '../models/repos.ts';
import type { StatusWithCreator } from './commit-statuses.ts';
import { apiTime, toApiUser } from './convert.ts';
import type { Viewer } from './convert.ts';

/** Forgejo's api.CommitStatus: `id` is the per-sha index and the state is under `status`. */
export function toApiCommitStatus(
  item: StatusWithCreator,
  repo: Repository,
  viewer: Viewer,
  rootUrl: string,
): CommitStatusJson {
  const { status, creator } = item;
  return {
    id: status.index,
    status: status.state,
    target_url: status.targetUrl,
    description: status.description,
    url: `${rootUrl}api/v1/repos/${repo.ownerName}/${repo.name}/statuses/${status.sha}`,
    context: status.context,
    creator: toApiUser(creator, viewer, rootUrl),
    created_at: apiTime(status.created),
    updated_at: apiTime(status.updated),
  };
}
