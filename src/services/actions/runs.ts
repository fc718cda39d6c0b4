// Reading runs and tasks of a repository (Forgejo's ListActionRuns,
// GetActionRun, ListActionTasks).
import { AppError } from '../../modules/errors.ts';
import { countRuns, findRunById, findRunByIndex, listRuns } from '../../models/action-runs.ts';
import type { ActionRun, RunFilter, Slice } from '../../models/action-runs.ts';
import { countTasksOfRepo, listTasksOfRepo } from '../../models/action-tasks.ts';
import type { TaskListEntry } from '../../models/action-tasks.ts';
import type { Db } from '../../models/database.ts';
import type { Repository } from '../../models/repos.ts';
import { actionsUser, findAccountsByIds, ghostUser, isActionsUser } from '../../models/users.ts';
import type { User } from '../../models/users.ts';
import type { ActionStatusValue } from '../../modules/actions-status.ts';

export interface RunWithUser {
  run: ActionRun;
  /** The Actions user for runs a task token dispatched; the ghost user when the trigger user has been deleted. */
  triggerUser: User;
}

export class RunQueryService {
  constructor(private readonly db: Db) {}

  async list(repo: Repository, filter: RunFilter, slice: Slice): Promise<{ runs: RunWithUser[]; total: number }> {
    const [runs, total] = await Promise.all([
      listRuns(this.db, repo.id, filter, slice),
      countRuns(this.db, repo.id, filter),
    ]);
    return { runs: await this.withUsers(runs), total };
  }

  /** A run by its global id; 404 with Forgejo's two messages for unknown ids and other repositories' runs. */
  async get(repo: Repository, runId: number): Promise<RunWithUser> {
    const run = await findRunById(this.db, runId);
    if (run === null) throw AppError.notFoundMessage(`run with id ${runId}: resource does not exist`);
    if (run.repoId !== repo.id) throw AppError.notFoundMessage('resource does not exist');
    const [withUser] = await this.withUsers([run]);
    return withUser as RunWithUser;
  }

  /** A run by its number in the repository (the web console's URLs, as Forgejo's); 404 when there is none. */
  async getByIndex(repo: Repository, index: number): Promise<RunWithUser> {
    const run = Number.isSafeInteger(index) && index > 0 ? await findRunByIndex(this.db, repo.id, index) : null;
    if (run === null) throw AppError.notFoundMessage(`run with index ${index}: resource does not exist`);
    const [withUser] = await this.withUsers([run]);
    return withUser as RunWithUser;
  }

  async tasks(
    repo: Repository,
    statuses: readonly ActionStatusValue[],
    slice: Slice,
  ): Promise<{ tasks: TaskListEntry[]; total: number }> {
    const [tasks, total] = await Promise.all([
      listTasksOfRepo(this.db, repo.id, statuses, slice),
      countTasksOfRepo(this.db, repo.id, statuses),
    ]);
    return { tasks, total };
  }

  private async withUsers(runs: ActionRun[]): Promise<RunWithUser[]> {
    const users = await findAccountsByIds(
      this.db,
      runs.map((run) => run.triggerUserId),
    );
    // Forgejo's GetPossibleUserByID: the Actions user has no row but a name of its own.
    const userOf = (id: number): User => (isActionsUser({ id }) ? actionsUser() : (users.get(id) ?? ghostUser()));
    return runs.map((run) => ({ run, triggerUser: userOf(run.triggerUserId) }));
  }
}
