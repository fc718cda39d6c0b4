// Building blocks for the git module's tests: commits made straight from
// in-memory trees through plumbing, with a fixed identity and time so object
// ids are reproducible. Not used by the server.
import { runGit } from './run-git.ts';

export const FIXTURE_TZ = '+0000';

function identity(tz: string): Record<string, string> {
  return {
    GIT_AUTHOR_NAME: 'Tess Ter',
    GIT_AUTHOR_EMAIL: 'tess@example.test',
    GIT_AUTHOR_DATE: `@1700000000 ${tz}`,
    GIT_COMMITTER_NAME: 'Tess Ter',
    GIT_COMMITTER_EMAIL: 'tess@example.test',
    GIT_COMMITTER_DATE: `@1700000000 ${tz}`,
  };
}

/** A git command in `gitDir` as the fixture identity; stdout trimmed. */
export async function fixtureGit(
  gitDir: string,
  args: string[],
  input?: Buffer | string,
  tz = FIXTURE_TZ,
): Promise<string> {
  return (await runGit(args, { gitDir, env: identity(tz), ...(input !== undefined ? { input } : {}) }))
    .toString('utf8')
    .trim();
}

/** A directory: files are strings, `{ link }` a symlink, `{ gitlink }` a submodule, other objects subdirectories. */
export interface Dir {
  [name: string]: string | { link: string } | { gitlink: string } | Dir;
}

export async function writeTree(gitDir: string, dir: Dir): Promise<string> {
  let input = '';
  for (const [name, value] of Object.entries(dir)) {
    if (typeof value === 'string')
      input += `100644 blob ${await fixtureGit(gitDir, ['hash-object', '-w', '--stdin'], value)}\t${name}\0`;
    else if ('link' in value && typeof value.link === 'string')
      input += `120000 blob ${await fixtureGit(gitDir, ['hash-object', '-w', '--stdin'], value.link)}\t${name}\0`;
    else if ('gitlink' in value && typeof value.gitlink === 'string')
      input += `160000 commit ${value.gitlink}\t${name}\0`;
    else input += `040000 tree ${await writeTree(gitDir, value as Dir)}\t${name}\0`;
  }
  return fixtureGit(gitDir, ['mktree', '-z', '--missing'], input);
}

/** A commit of `dir` with the given parents; returns its id. */
export async function commitTree(
  gitDir: string,
  dir: Dir,
  parents: string[] = [],
  message = 'c',
  tz = FIXTURE_TZ,
): Promise<string> {
  const tree = await writeTree(gitDir, dir);
  return fixtureGit(gitDir, ['commit-tree', tree, ...parents.flatMap((p) => ['-p', p]), '-m', message], undefined, tz);
}
