// Where each repository's git data lives, and the shared readers over it: one
// bounded pool of long-lived `git cat-file --batch` processes for the whole
// server, so reading a workflow file never spawns a process.
import path from 'node:path';
import { CatFilePool } from '../modules/git/cat-file.ts';
import { RepositoryReader } from '../modules/git/repository-reader.ts';
import { ensureHooks } from '../modules/git/receive-hooks.ts';
import type { Repository } from '../models/repos.ts';
import type { User } from '../models/users.ts';

export class GitRepositories {
  readonly hooksDir: string;
  private readonly pool = new CatFilePool();

  constructor(
    private readonly repositoriesRoot: string,
    dataDir: string,
    /** Largest push git-receive-pack accepts, in bytes (GANTRY_GIT_MAX_PUSH_SIZE). */
    readonly maxPushBytes: number = Number.POSITIVE_INFINITY,
  ) {
    this.hooksDir = path.join(dataDir, 'git', 'hooks');
  }

  /** Writes the server's git hooks; once at startup, before any push is served. */
  async prepare(): Promise<void> {
    await ensureHooks(this.hooksDir);
  }

  gitDir(repo: Pick<Repository, 'name' | 'ownerName'>, owner?: Pick<User, 'name'>): string {
    return path.join(
      this.repositoriesRoot,
      (owner?.name ?? repo.ownerName).toLowerCase(),
      `${repo.name.toLowerCase()}.git`,
    );
  }

  reader(repo: Pick<Repository, 'name' | 'ownerName' | 'objectFormatName'>): RepositoryReader {
    return new RepositoryReader(this.pool, this.gitDir(repo));
  }

  /** A repository was deleted or renamed: its cat-file process must not outlive the old path. */
  forget(repo: Pick<Repository, 'name' | 'ownerName'>): void {
    this.pool.evict(this.gitDir(repo));
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
