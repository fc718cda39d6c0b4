// Repositories: a database row plus a bare git repository under the data folder.
// The row and the directory are created and removed together; a failure on
// either side undoes the other.
import { existsSync } from 'node:fs';
import { AppError } from '../modules/errors.ts';
import type { Clock } from '../modules/clock.ts';
import { accessModeFromName, AccessMode } from '../modules/access-mode.ts';
import { describeNameProblem, isAlphaDashDot, repoNameProblem } from '../modules/names.ts';
import {
  branchExists,
  clearProvisional,
  commitInitialFile,
  initBareRepository,
  isProvisional,
  isValidBranchName,
  markProvisional,
  moveRepository,
  removeRepository,
  setHeadBranch,
} from '../modules/git/index.ts';
import type { Db } from '../models/database.ts';
import { isUniqueViolation } from '../models/database.ts';
import {
  deleteCollaborator,
  deleteRepository,
  findRepository,
  findRepositoryById,
  findOwnerAndRepository,
  findOwnerRepositoryAndVariable,
  listRecentRepositories,
  insertRepository,
  updateRepository,
  upsertCollaborator,
} from '../models/repos.ts';
import type { RepoUnit, Repository, RepositoryAccess, RepositoryChanges } from '../models/repos.ts';
import type { ScopedValue } from '../models/scoped-values.ts';
import type { AccountAccess, User } from '../models/users.ts';
import { normalizeName } from '../modules/actions-names.ts';
import type { DomainEvents } from './events.ts';
import type { PushedRef } from './push-payloads.ts';
import type { GitRepositories } from './git-repositories.ts';

export const DEFAULT_BRANCH = 'main';
const EXISTS_MESSAGE = 'The repository with the same name already exists.';

export interface CreateRepoInput {
  name: string;
  description?: string;
  private?: boolean;
  autoInit?: boolean;
  defaultBranch?: string;
  template?: boolean;
  objectFormatName?: string;
}

export interface EditRepoInput {
  name?: string;
  description?: string;
  website?: string;
  private?: boolean;
  archived?: boolean;
  template?: boolean;
  defaultBranch?: string;
  units?: Partial<Record<RepoUnit, boolean>>;
}

export class RepoService {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly git: GitRepositories,
    private readonly events: DomainEvents,
    /**
     * After an edit that changes where schedules come from or whether they
     * run (archived, the Actions unit, the default branch), with the
     * repository before and after it: schedules.ts onRepositoryEdited, as
     * Forgejo's services/repository/setting.go does.
     */
    private readonly afterScheduleSourceChange: (
      before: Repository,
      after: Repository,
    ) => Promise<void> = async () => {},
  ) {}

  /** Where a repository's bare git directory lives. */
  gitPath(ownerName: string, repoName: string): string {
    return this.git.gitDir({ ownerName, name: repoName });
  }

  async find(owner: User, name: string): Promise<Repository | null> {
    return findRepository(this.db, owner.id, name);
  }

  async findById(id: number): Promise<Repository | null> {
    return findRepositoryById(this.db, id);
  }

  /** The account named `ownerName` and its repository `name` (null when it has none), or null when no such account. */
  async findWithOwner(ownerName: string, name: string): Promise<{ owner: User; repo: Repository | null } | null> {
    return findOwnerAndRepository(this.db, ownerName, name);
  }

  /**
   * The account and repository as the repository guard decides with them
   * (not whole rows), and the repository's own Actions variable named
   * `variableName` (any case), read in one statement: the API's GET of a
   * repository variable (guards.ts). `variable` is null when there is none.
   */
  async findWithOwnerAndVariable(
    ownerName: string,
    name: string,
    variableName: string,
  ): Promise<{ owner: AccountAccess; repo: RepositoryAccess | null; variable: ScopedValue | null } | null> {
    return findOwnerRepositoryAndVariable(this.db, ownerName, name, normalizeName(variableName));
  }

  /** The `limit` most recently updated repositories of the instance; callers filter by permission. */
  async listRecent(limit: number): Promise<Repository[]> {
    return listRecentRepositories(this.db, limit);
  }

  async create(doer: User, owner: User, input: CreateRepoInput): Promise<Repository> {
    checkRepoName(input.name);
    if ((input.description ?? '').length > 2048) throw AppError.unprocessable('[Description]: MaxSize');
    const defaultBranch = input.defaultBranch || DEFAULT_BRANCH;
    if (!isValidBranchName(defaultBranch)) throw AppError.unprocessable('[DefaultBranch]: GitRefName');
    const objectFormatName = input.objectFormatName || 'sha1';
    if (objectFormatName !== 'sha1' && objectFormatName !== 'sha256')
      throw AppError.unprocessable('[ObjectFormatName]: In');
    const gitPath = this.gitPath(owner.name, input.name);

    let created: Repository;
    try {
      created = await this.db.transaction().execute(async (tx) => {
        if (await findRepository(tx, owner.id, input.name)) throw AppError.conflict(EXISTS_MESSAGE);
        const nowSec = this.clock.nowSec();
        // Inserted before the files are looked at: the row holds the name until
        // commit, so a concurrent creation of it (any process) waits here or fails.
        let repo = await insertRepository(tx, {
          ownerId: owner.id,
          ownerName: owner.name,
          name: input.name,
          description: input.description ?? '',
          defaultBranch,
          objectFormatName,
          isPrivate: input.private ?? false,
          isTemplate: input.template ?? false,
          nowSec,
        });
        // A creation killed before its commit left its directory (marked
        // provisional) and no row; the name is ours now, so the leftover goes.
        if (await isProvisional(gitPath)) await removeRepository(gitPath);
        if (existsSync(gitPath)) {
          throw AppError.conflict(
            `The repository files already exist [${owner.name}/${input.name}]; remove them from the data folder first.`,
          );
        }
        // The git directory is made inside the transaction: if it fails, no row
        // is committed; if the commit fails afterwards, the catch below removes it.
        await markProvisional(gitPath);
        try {
          await initBareRepository(gitPath, { defaultBranch, objectFormat: objectFormatName });
          if (input.autoInit) {
            await commitInitialFile(gitPath, {
              branch: defaultBranch,
              fileName: 'README.md',
              content: readmeFor(input.name, input.description ?? ''),
              author: { name: doer.fullName || doer.name, email: doer.email || `${doer.lowerName}@noreply.localhost` },
              message: 'Initial commit',
              timestampSec: nowSec,
            });
            await updateRepository(tx, repo.id, { isEmpty: false }, nowSec);
            repo = { ...repo, isEmpty: false };
          }
          await this.events.record(tx, { type: 'repository.created', repo, owner, doer });
        } catch (error) {
          await removeRepository(gitPath);
          await clearProvisional(gitPath);
          throw error;
        }
        return repo;
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw AppError.conflict(EXISTS_MESSAGE);
      throw error;
    }
    await clearProvisional(gitPath);
    return created;
  }

  async edit(repo: Repository, owner: User, input: EditRepoInput): Promise<Repository> {
    const changes: RepositoryChanges = {
      description: input.description,
      website: input.website,
      isPrivate: input.private,
      isArchived: input.archived,
      isTemplate: input.template,
      units: input.units,
    };
    if (input.description !== undefined && input.description.length > 2048)
      throw AppError.unprocessable('[Description]: MaxSize');
    const renamed = input.name !== undefined && input.name !== repo.name;
    if (renamed) checkRepoName(input.name as string);
    if (input.defaultBranch !== undefined && input.defaultBranch !== repo.defaultBranch) {
      const gitPath = this.gitPath(owner.name, repo.name);
      if (!isValidBranchName(input.defaultBranch)) throw AppError.unprocessable('[DefaultBranch]: GitRefName');
      // Forgejo (routers/api/v1/repo/repo.go updateBasicProperties) switches the default
      // branch of a non-empty repository only to a branch that exists.
      try {
        if (repo.isEmpty || (await branchExists(gitPath, input.defaultBranch))) {
          await setHeadBranch(gitPath, input.defaultBranch);
          changes.defaultBranch = input.defaultBranch;
        }
      } catch (error) {
        // Deleted since the request loaded it: its git directory is gone too.
        if (!(await findRepositoryById(this.db, repo.id))) throw AppError.notFound();
        throw error;
      }
    }
    try {
      const updated = await this.db.transaction().execute(async (tx) => {
        if (renamed) {
          const clash = await findRepository(tx, owner.id, input.name as string);
          if (clash && clash.id !== repo.id) throw AppError.conflict(EXISTS_MESSAGE);
          changes.name = input.name;
        }
        await updateRepository(tx, repo.id, changes, this.clock.nowSec());
        // A DELETE that committed since the request loaded the repository wins: nothing was updated.
        const updated = await findRepositoryById(tx, repo.id);
        if (!updated) throw AppError.notFound();
        if (renamed && repo.lowerName !== (input.name as string).toLowerCase()) {
          this.git.forget(repo);
          await moveRepository(this.gitPath(owner.name, repo.name), this.gitPath(owner.name, input.name as string));
        }
        return updated;
      });
      if (
        updated.isArchived !== repo.isArchived ||
        updated.units.actions !== repo.units.actions ||
        updated.defaultBranch !== repo.defaultBranch
      )
        await this.afterScheduleSourceChange(repo, updated);
      return updated;
    } catch (error) {
      if (isUniqueViolation(error)) throw AppError.conflict(EXISTS_MESSAGE);
      throw error;
    }
  }

  async delete(doer: User, repo: Repository, owner: User): Promise<void> {
    // What the repository owned goes in this transaction, its task logs after
    // the commit (services/owner-deletion.ts).
    await this.events.transaction(this.db, async (tx) => {
      await deleteRepository(tx, repo.id);
      await this.events.record(tx, { type: 'repository.deleted', repo, owner, doer });
    });
    this.git.forget(repo);
    await removeRepository(this.gitPath(owner.name, repo.name));
  }

  /**
   * Keeps the row in step with what a push did to the git data: the first
   * branch pushed into an empty repository makes it non-empty, and becomes the
   * default branch when the configured one was not pushed (as Forgejo does).
   */
  async recordPush(repo: Repository, updates: readonly PushedRef[]): Promise<Repository> {
    if (!repo.isEmpty) return repo;
    const branches = updates
      .filter((u) => u.ref.startsWith('refs/heads/') && !/^0+$/.test(u.newOid))
      .map((u) => u.ref.slice('refs/heads/'.length));
    if (branches.length === 0) return repo;
    const gitPath = this.gitPath(repo.ownerName, repo.name);
    const changes: RepositoryChanges = { isEmpty: false };
    if (!branches.includes(repo.defaultBranch) && !(await branchExists(gitPath, repo.defaultBranch))) {
      const branch = branches[0] as string;
      await setHeadBranch(gitPath, branch);
      changes.defaultBranch = branch;
    }
    await updateRepository(this.db, repo.id, changes, this.clock.nowSec());
    return (await findRepositoryById(this.db, repo.id)) ?? repo;
  }

  async addCollaborator(repo: Repository, owner: User, user: User, permission: string | undefined): Promise<void> {
    if (user.isOrganization) throw AppError.unprocessable(`user does not exist [uid: 0, name: ${user.name}]`);
    if (user.id === owner.id)
      throw AppError.unprocessable('the repository owner cannot be a collaborator of their own repository');
    const mode = accessModeFromName(permission ?? 'write');
    if (mode === null || mode < AccessMode.read || mode > AccessMode.admin)
      throw AppError.unprocessable('[Permission]: In');
    await upsertCollaborator(this.db, repo.id, user.id, mode, this.clock.nowSec());
  }

  async removeCollaborator(repo: Repository, user: User): Promise<void> {
    await deleteCollaborator(this.db, repo.id, user.id);
  }
}

function checkRepoName(name: string): void {
  if (name === '') throw AppError.unprocessable('[Name]: Required');
  if (!isAlphaDashDot(name)) throw AppError.unprocessable('[Name]: AlphaDashDot');
  if (name.length > 100) throw AppError.unprocessable('[Name]: MaxSize');
  const problem = repoNameProblem(name);
  if (problem) throw AppError.unprocessable(describeNameProblem(problem));
}

/** Forgejo's "Default" README template. */
function readmeFor(name: string, description: string): string {
  return description ? `# ${name}\n\n${description}\n` : `# ${name}\n\n`;
}
