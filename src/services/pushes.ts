// After git has accepted a push: bring the repository row up to date, then
// record the push and start the workflows it triggers.
import type { Repository } from '../models/repos.ts';
import type { User } from '../models/users.ts';
import type { PushTriggers } from './actions/push-triggers.ts';
import type { PushedRef } from './push-payloads.ts';
import type { GitRepositories } from './git-repositories.ts';
import type { RepoService } from './repos.ts';

export class PushService {
  constructor(
    private readonly repos: RepoService,
    private readonly git: GitRepositories,
    private readonly triggers: PushTriggers,
  ) {}

  async afterPush(repo: Repository, owner: User, pusher: User, updates: readonly PushedRef[]): Promise<void> {
    if (updates.length === 0) return;
    const current = await this.repos.recordPush(repo, updates);
    await this.triggers.onPush(
      { repo: current, owner, pusher, gitDir: this.git.gitDir(current), reader: this.git.reader(current) },
      updates,
    );
  }
}
