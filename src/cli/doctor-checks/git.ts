// The system git that serves clones and pushes and reads workflows.
//
// Why 2.30 at least: Gantry creates SHA-256 repositories on request with
// `git init --object-format`, which arrived in git 2.29 (the cat-file pool asks
// a repository's format with `rev-parse --show-object-format`, 2.25), and serves
// protocol v2 over HTTP by running `upload-pack --stateless-rpc` with
// GIT_PROTOCOL (2.18). 2.30 is the first release after 2.29's SHA-256 work
// (with its fixes) and what Debian 11, the oldest Debian still maintained, ships.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { initBareRepository, runGit } from '../../modules/git/index.ts';
import type { BaseContext } from './context.ts';
import { fail, messageOf, ok } from './result.ts';
import type { Check, Finding } from './result.ts';

export const MIN_GIT_VERSION: readonly [number, number] = [2, 30];

const INSTALL_GIT =
  'install git 2.30 or newer on the PATH of the user running Gantry (Debian/Ubuntu: apt-get install git)';

/** "git version 2.39.5", "git version 2.39.3 (Apple Git-146)", "git version 2.45.1.windows.1" → [2, 39, 5]. */
export function parseGitVersion(output: string): number[] | null {
  const match = /git version (\d+)\.(\d+)(?:\.(\d+))?/.exec(output);
  if (!match) return null;
  return [Number(match[1]), Number(match[2]), Number(match[3] ?? 0)];
}

function atLeast(version: readonly number[], minimum: readonly number[]): boolean {
  for (let i = 0; i < minimum.length; i += 1) {
    const have = version[i] ?? 0;
    const need = minimum[i] ?? 0;
    if (have !== need) return have > need;
  }
  return true;
}

export const gitVersionCheck: Check<BaseContext> = {
  name: 'git',
  onTimeout: { status: 'fail', fix: '`git --version` hung: check the git installation' },
  async run(ctx): Promise<Finding> {
    let output: string;
    try {
      output = (await runGit(['--version'], { timeoutMs: ctx.timeoutMs })).toString('utf8').trim();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return fail('git was not found on the PATH', INSTALL_GIT);
      return fail(`git --version failed: ${messageOf(error)}`, INSTALL_GIT);
    }
    const version = parseGitVersion(output);
    if (version === null) return fail(`cannot read the git version from "${output}"`, INSTALL_GIT);
    if (!atLeast(version, MIN_GIT_VERSION)) {
      return fail(
        `${output} is too old: Gantry needs ${MIN_GIT_VERSION.join('.')} or newer (SHA-256 repositories, protocol v2)`,
        INSTALL_GIT,
      );
    }
    return ok(output);
  },
};

export const gitInitCheck: Check<BaseContext> = {
  name: 'git init',
  onTimeout: { status: 'fail', fix: '`git init --bare` hung: check the git installation and the temporary folder' },
  async run(): Promise<Finding> {
    let tmp: string;
    try {
      tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-doctor-'));
    } catch (error) {
      return fail(
        `cannot create a temporary folder in ${os.tmpdir()}: ${messageOf(error)}`,
        'make the temporary folder writable, or point TMPDIR at one',
      );
    }
    try {
      // The same code path that creates a repository, in a throwaway folder.
      await initBareRepository(path.join(tmp, 'probe.git'), { defaultBranch: 'main' });
      return ok('`git init --bare` works (in a temporary folder)');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return fail('git was not found on the PATH', INSTALL_GIT);
      return fail(
        `git init --bare failed: ${messageOf(error)}`,
        'run `git init --bare /tmp/x.git` as the user running Gantry to see why',
      );
    } finally {
      await fs.rm(tmp, { recursive: true, force: true });
    }
  },
};
