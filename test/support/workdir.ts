// A local clone a test commits in and pushes to Gantry with the system git
// client, as a user would.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface GitResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface WorkDir {
  dir: string;
  /** Runs git in the work tree; rejects on a non-zero exit unless `allowFailure`. */
  git(args: string[], options?: { allowFailure?: boolean }): Promise<GitResult>;
  /** Writes files (path → content; null deletes) and commits them; returns the commit id. */
  commit(files: Record<string, string | null>, message: string): Promise<string>;
  /** `git push <remote> <refspecs…>`. */
  push(...refspecs: string[]): Promise<GitResult>;
  head(): Promise<string>;
  remove(): Promise<void>;
}

/** `remoteUrl` carries credentials if needed: http://user:token@host/owner/repo.git */
export async function createWorkDir(remoteUrl: string, branch = 'main'): Promise<WorkDir> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-work-'));
  const env = {
    ...process.env,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '',
    HOME: dir,
    GIT_AUTHOR_NAME: 'Test Author',
    GIT_AUTHOR_EMAIL: 'author@example.com',
    GIT_COMMITTER_NAME: 'Test Author',
    GIT_COMMITTER_EMAIL: 'author@example.com',
  };
  const git = async (args: string[], options: { allowFailure?: boolean } = {}): Promise<GitResult> => {
    try {
      const { stdout, stderr } = await run('git', args, { cwd: dir, env, maxBuffer: 64 * 1024 * 1024 });
      return { code: 0, stdout, stderr };
    } catch (error) {
      const failure = error as { code?: number; stdout?: string; stderr?: string };
      const result = {
        code: typeof failure.code === 'number' ? failure.code : 1,
        stdout: failure.stdout ?? '',
        stderr: failure.stderr ?? '',
      };
      if (options.allowFailure === true) return result;
      throw new Error(`git ${args.join(' ')} failed (${result.code}): ${result.stderr}`);
    }
  };
  await git(['init', '-q', '-b', branch]);
  await git(['remote', 'add', 'origin', remoteUrl]);
  return {
    dir,
    git,
    async commit(files, message) {
      for (const [file, content] of Object.entries(files)) {
        const full = path.join(dir, file);
        if (content === null) {
          await fs.rm(full, { force: true });
        } else {
          await fs.mkdir(path.dirname(full), { recursive: true });
          await fs.writeFile(full, content);
        }
      }
      await git(['add', '-A']);
      await git(['commit', '-q', '--allow-empty', '-m', message]);
      return (await git(['rev-parse', 'HEAD'])).stdout.trim();
    },
    push: (...refspecs) => git(['push', '-q', 'origin', ...refspecs], { allowFailure: true }),
    async head() {
      return (await git(['rev-parse', 'HEAD'])).stdout.trim();
    },
    remove: () => fs.rm(dir, { recursive: true, force: true }),
  };
}

/** The clone URL of a repository with basic credentials in it. */
export function remoteUrl(
  serverUrl: string,
  owner: string,
  repo: string,
  credentials?: { user: string; password: string },
): string {
  const url = new URL(`${owner}/${repo}.git`, serverUrl.endsWith('/') ? serverUrl : `${serverUrl}/`);
  if (credentials) {
    url.username = encodeURIComponent(credentials.user);
    url.password = encodeURIComponent(credentials.password);
  }
  return url.href;
}
