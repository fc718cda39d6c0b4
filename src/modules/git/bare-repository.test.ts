import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  branchExists,
  commitInitialFile,
  initBareRepository,
  isEmptyRepository,
  moveRepository,
  removeRepository,
  setHeadBranch,
} from './bare-repository.ts';
import { runGit } from './run-git.ts';

const README = '# Grüße 🚀\n\nUnicode: ünïcødé — 日本語\n';
const AUTHOR = { name: 'Zoë Ångström', email: 'zoe@example.test' };
const TIME = 1_700_000_000;

async function git(gitDir: string, args: string[]): Promise<string> {
  return (await runGit(args, { gitDir })).toString('utf8');
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

describe('bare repositories', () => {
  let scratch = '';

  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'gantry-bare-'));
  });
  after(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  describe('sha1 repository with an initial README', () => {
    let repo = '';
    let commit = '';

    before(async () => {
      // Parent directories do not exist yet: init must create them.
      repo = join(scratch, 'owner', 'deep', 'repo.git');
      await initBareRepository(repo, { defaultBranch: 'main' });
    });

    it('starts empty with HEAD on the default branch', async () => {
      assert.equal(await isEmptyRepository(repo), true);
      assert.equal((await git(repo, ['symbolic-ref', 'HEAD'])).trim(), 'refs/heads/main');
      assert.equal((await git(repo, ['rev-parse', '--is-bare-repository'])).trim(), 'true');
      assert.equal((await git(repo, ['rev-parse', '--show-object-format'])).trim(), 'sha1');
      assert.equal(await branchExists(repo, 'main'), false);
    });

    it('commits a file with the given author, time and message', async () => {
      commit = await commitInitialFile(repo, {
        branch: 'main',
        fileName: 'README.md',
        content: README,
        author: AUTHOR,
        message: 'Initial commit ✨',
        timestampSec: TIME,
      });
      assert.match(commit, /^[0-9a-f]{40}$/);
      assert.equal(await isEmptyRepository(repo), false);
      assert.equal(await branchExists(repo, 'main'), true);
      assert.equal(await branchExists(repo, 'other'), false);

      const log = await git(repo, [
        'log',
        '--format=%an%x00%ae%x00%s%x00%at%x00%cn%x00%ce%x00%ct%x00%H',
        'refs/heads/main',
      ]);
      assert.deepEqual(log.trimEnd().split('\0'), [
        AUTHOR.name,
        AUTHOR.email,
        'Initial commit ✨',
        String(TIME),
        AUTHOR.name,
        AUTHOR.email,
        String(TIME),
        commit,
      ]);
      assert.equal(await git(repo, ['show', 'main:README.md']), README);
      assert.equal(await git(repo, ['ls-tree', '--name-only', 'main']), 'README.md\n');
    });

    it('refuses to overwrite an existing branch', async () => {
      await assert.rejects(
        commitInitialFile(repo, { branch: 'main', fileName: 'OTHER', content: 'x', author: AUTHOR, message: 'again' }),
        /git update-ref failed/,
      );
      assert.equal((await git(repo, ['rev-parse', 'refs/heads/main'])).trim(), commit);
    });

    it('clones with the file and the default branch checked out', async () => {
      const work = join(scratch, 'clone');
      await runGit(['clone', '--quiet', '--', repo, work]);
      assert.equal(await readFile(join(work, 'README.md'), 'utf8'), README);
      assert.equal((await runGit(['symbolic-ref', '--short', 'HEAD'], { cwd: work })).toString('utf8').trim(), 'main');
    });

    it('switches HEAD to another branch', async () => {
      await commitInitialFile(repo, {
        branch: 'develop',
        fileName: 'NOTES',
        content: 'n',
        author: AUTHOR,
        message: 'dev',
      });
      await setHeadBranch(repo, 'develop');
      assert.equal((await git(repo, ['symbolic-ref', 'HEAD'])).trim(), 'refs/heads/develop');
      await setHeadBranch(repo, 'main');
    });
  });

  it('supports the sha256 object format', async () => {
    const repo = join(scratch, 'sha256.git');
    await initBareRepository(repo, { defaultBranch: 'trunk', objectFormat: 'sha256' });
    assert.equal((await git(repo, ['rev-parse', '--show-object-format'])).trim(), 'sha256');
    const commit = await commitInitialFile(repo, {
      branch: 'trunk',
      fileName: 'README.md',
      content: README,
      author: AUTHOR,
      message: 'init',
      timestampSec: TIME,
    });
    assert.match(commit, /^[0-9a-f]{64}$/);
    assert.equal(await branchExists(repo, 'trunk'), true);
    assert.equal(await git(repo, ['show', 'trunk:README.md']), README);
  });

  it('refuses a non-empty existing directory but accepts an empty one', async () => {
    const busy = join(scratch, 'busy');
    await mkdir(busy);
    await writeFile(join(busy, 'file'), 'x');
    await assert.rejects(
      initBareRepository(busy, { defaultBranch: 'main' }),
      /already exists and is not an empty directory/,
    );
    assert.equal(await exists(join(busy, 'HEAD')), false);

    // Re-initialising an existing repository is refused the same way.
    const repo = join(scratch, 'twice.git');
    await initBareRepository(repo, { defaultBranch: 'main' });
    await assert.rejects(initBareRepository(repo, { defaultBranch: 'main' }), /already exists/);

    const empty = join(scratch, 'empty');
    await mkdir(empty);
    await initBareRepository(empty, { defaultBranch: 'main' });
    assert.equal(await isEmptyRepository(empty), true);
  });

  it('rejects invalid branch names before running git', async () => {
    const repo = join(scratch, 'invalid.git');
    for (const bad of ['', '-x', '--upload-pack=evil', 'a..b', 'a b', 'x.lock', '@', 'refs/../x', 'a\0b']) {
      await assert.rejects(initBareRepository(repo, { defaultBranch: bad }), TypeError);
      await assert.rejects(branchExists(scratch, bad), { name: 'TypeError', message: /^invalid branch name: / });
      await assert.rejects(setHeadBranch(scratch, bad), TypeError);
      await assert.rejects(
        commitInitialFile(scratch, { branch: bad, fileName: 'f', content: '', author: AUTHOR, message: 'm' }),
        TypeError,
      );
    }
    assert.equal(await exists(repo), false);
  });

  it('rejects unsafe file names and identities', async () => {
    const repo = join(scratch, 'names.git');
    await initBareRepository(repo, { defaultBranch: 'main' });
    for (const fileName of ['', 'a/b', '.git', '.GIT', '..', 'a\0b']) {
      await assert.rejects(
        commitInitialFile(repo, { branch: 'main', fileName, content: '', author: AUTHOR, message: 'm' }),
        TypeError,
      );
    }
    await assert.rejects(
      commitInitialFile(repo, {
        branch: 'main',
        fileName: 'f',
        content: '',
        author: { name: 'a <b>', email: 'e' },
        message: 'm',
      }),
      TypeError,
    );
    // A name with a leading quote would be C-unquoted by mktree without -z.
    await commitInitialFile(repo, {
      branch: 'main',
      fileName: '"quoted\\n"',
      content: 'q',
      author: AUTHOR,
      message: 'm',
    });
    assert.equal(await git(repo, ['ls-tree', '-z', '--name-only', 'main']), '"quoted\\n"\0');
    assert.equal(await isEmptyRepository(repo), false);
  });

  it('branchExists fails on something that is not a repository', async () => {
    await assert.rejects(branchExists(join(scratch, 'missing'), 'main'), /failed \(exit 128\)/);
  });

  it('moves and removes repositories', async () => {
    const from = join(scratch, 'move-src.git');
    const to = join(scratch, 'new-owner', 'moved.git');
    await initBareRepository(from, { defaultBranch: 'main' });
    await moveRepository(from, to);
    assert.equal(await exists(from), false);
    assert.equal(await isEmptyRepository(to), true);

    const other = join(scratch, 'other.git');
    await initBareRepository(other, { defaultBranch: 'main' });
    await assert.rejects(moveRepository(other, to), /already exists/);

    await removeRepository(to);
    assert.equal(await exists(to), false);
    await removeRepository(to); // missing is fine
  });
});
