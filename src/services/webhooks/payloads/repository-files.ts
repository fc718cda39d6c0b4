// Lets the delivery worker read a file of a repository at a commit — the
// build manifest of a sourcehut_builds hook — through the server's shared
// cat-file pool. Wired in by the composition (main.ts) next to the hook secrets.
import { ObjectTooLargeError } from '../../../modules/git/cat-file.ts';
import type { GitRepositories } from '../../git-repositories.ts';
import type { HookSecrets } from '../prepare-request.ts';

/** A build manifest is a few kilobytes; a bigger file is not read. */
const MAX_MANIFEST_BYTES = 1024 * 1024;

export function withRepositoryFiles(
  secrets: Pick<HookSecrets, 'secretOf' | 'authorizationHeaderOf'>,
  repositories: Pick<GitRepositories, 'reader'>,
): HookSecrets {
  return {
    secretOf: (hook) => secrets.secretOf(hook),
    authorizationHeaderOf: (hook) => secrets.authorizationHeaderOf(hook),
    async readRepositoryFile(ownerName, repoName, commitId, path) {
      const reader = repositories.reader({ ownerName, name: repoName, objectFormatName: 'sha1' });
      try {
        const object = await reader.readPath(commitId, path, { maxSize: MAX_MANIFEST_BYTES });
        return object?.type === 'blob' ? object.content.toString('utf8') : null;
      } catch (error) {
        // A path or commit id git would misread, or a file too big: the same as no file.
        if (error instanceof TypeError || error instanceof ObjectTooLargeError) return null;
        throw error;
      }
    },
  };
}
