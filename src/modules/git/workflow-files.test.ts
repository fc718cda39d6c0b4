import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initBareRepository } from './bare-repository.ts';
import type { ObjectFormat } from './bare-repository.ts';
import { CatFilePool } from './cat-file.ts';
import { RepositoryReader } from './repository-reader.ts';
import { commitTree, fixtureGit, writeTree } from './test-fixtures.ts';
import type { Dir } from './test-fixtures.ts';
import { WORKFLOW_DIRS, changedPaths, listWorkflowFiles } from './workflow-files.ts';

const git = (gitDir: string, args: string[], input?: string): Promise<string> => fixtureGit(gitDir, args, input);
const commit = (gitDir: string, dir: Dir, parents: string[] = []): Promise<string> => commitTree(gitDir, dir, parents);

describe('workflow files', () => {
  let scratch = '';
  let pool: CatFilePool;

  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'gantry-workflows-'));
    pool = new CatFilePool();
  });
  after(async () => {
    await pool.close();
    await rm(scratch, { recursive: true, force: true });
  });

  for (const format of ['sha1', 'sha256'] as const) {
    describe(`listWorkflowFiles (${format})`, () => {
      let repo = '';
      let reader: RepositoryReader;
      const list = async (dir: Dir) => listWorkflowFiles(reader, await commit(repo, dir));
      const names = async (dir: Dir) => {
        const found = await list(dir);
        return found === null ? null : { dir: found.dir, names: found.files.map((f) => f.name) };
      };

      before(async () => {
        repo = join(scratch, `${format}.git`);
        await initBareRepository(repo, { defaultBranch: 'main', objectFormat: format as ObjectFormat });
        reader = new RepositoryReader(pool, repo);
      });

      it('lists .yml and .yaml files recursively, sorted, with paths and blob ids', async () => {
        const tip = await commit(repo, {
          '.forgejo': {
            workflows: {
              'test.yaml': 'on: push',
              'build.yml': 'on: push',
              'README.md': 'not a workflow',
              'x.YML': 'suffix is case-sensitive, as in Forgejo',
              sub: { 'deep.yml': 'on: push', more: { 'a.yml': 'on: push' } },
              'sub-x.yml': 'on: push',
              'a.yml.bak': 'no',
            },
          },
          'ci.yml': 'outside',
        });
        const found = await listWorkflowFiles(reader, tip);
        assert.equal(found?.dir, '.forgejo/workflows');
        assert.deepEqual(
          found?.files.map((f) => [f.name, f.path]),
          [
            ['build.yml', '.forgejo/workflows/build.yml'],
            ['sub-x.yml', '.forgejo/workflows/sub-x.yml'],
            ['sub/deep.yml', '.forgejo/workflows/sub/deep.yml'],
            ['sub/more/a.yml', '.forgejo/workflows/sub/more/a.yml'],
            ['test.yaml', '.forgejo/workflows/test.yaml'],
          ],
        );
        for (const file of found?.files ?? []) {
          assert.equal(file.blobOid, await git(repo, ['rev-parse', `${tip}:${file.path}`]));
        }
        assert.equal((await reader.readBlob(found?.files[0]?.blobOid ?? ''))?.toString('utf8'), 'on: push');
      });

      it('uses only the first directory that exists, even an empty one', async () => {
        const all = {
          '.forgejo': { workflows: { 'f.yml': 'x' } },
          '.gitea': { workflows: { 'g.yml': 'x' } },
          '.github': { workflows: { 'h.yml': 'x' } },
        };
        assert.deepEqual(await names(all), { dir: '.forgejo/workflows', names: ['f.yml'] });
        assert.deepEqual(await names({ ...all, '.forgejo': { other: { 'f.yml': 'x' } } }), {
          dir: '.gitea/workflows',
          names: ['g.yml'],
        });
        assert.deepEqual(await names({ '.github': all['.github'] }), { dir: '.github/workflows', names: ['h.yml'] });
        // Only non-workflow files: the directory still exists and hides the others.
        assert.deepEqual(await names({ ...all, '.forgejo': { workflows: { 'notes.txt': 'x' } } }), {
          dir: '.forgejo/workflows',
          names: [],
        });
        // git stores no empty trees, but a hand-made one still counts as a directory.
        const emptyTree = await git(repo, ['mktree'], '');
        const withEmpty = await git(repo, ['mktree', '-z', '--missing'], `040000 tree ${emptyTree}\tworkflows\0`);
        const github = await writeTree(repo, { workflows: { 'h.yml': 'x' } });
        const root = await git(
          repo,
          ['mktree', '-z', '--missing'],
          `040000 tree ${withEmpty}\t.forgejo\x00040000 tree ${github}\t.github\0`,
        );
        const tip = await git(repo, ['commit-tree', root, '-m', 'empty dir']);
        assert.deepEqual(await listWorkflowFiles(reader, tip), { dir: '.forgejo/workflows', files: [] });
      });

      it('skips a workflows "directory" that is a file, symlink or submodule', async () => {
        const github = { '.github': { workflows: { 'h.yml': 'x' } } };
        const gitlink = '1'.repeat(format === 'sha1' ? 40 : 64);
        assert.deepEqual(await names({ ...github, '.forgejo': { workflows: 'a file' } }), {
          dir: '.github/workflows',
          names: ['h.yml'],
        });
        assert.deepEqual(await names({ ...github, '.forgejo': { workflows: { link: '../.github/workflows' } } }), {
          dir: '.github/workflows',
          names: ['h.yml'],
        });
        assert.deepEqual(await names({ ...github, '.forgejo': { gitlink } }), {
          dir: '.github/workflows',
          names: ['h.yml'],
        });
      });

      it('leaves out symlinks and submodules named like workflows', async () => {
        const gitlink = '2'.repeat(format === 'sha1' ? 40 : 64);
        assert.deepEqual(
          await names({ '.gitea': { workflows: { 'a.yml': 'x', 'b.yml': { link: 'a.yml' }, 'c.yml': { gitlink } } } }),
          {
            dir: '.gitea/workflows',
            names: ['a.yml'],
          },
        );
      });

      it('answers null when no workflow directory exists', async () => {
        assert.equal(await names({ 'README.md': 'x', '.github': { CODEOWNERS: 'x' } }), null);
        assert.equal(await names({ '.forgejo': 'a file' }), null);
      });

      it('sorts names by their UTF-8 bytes', async () => {
        assert.deepEqual(
          await names({
            '.github': { workflows: { 'ü.yml': 'x', 'z.yml': 'x', 'Z.yml': 'x', '😀.yml': 'x', '\uff21.yml': 'x' } },
          }),
          {
            dir: '.github/workflows',
            names: ['Z.yml', 'z.yml', 'ü.yml', '\uff21.yml', '😀.yml'],
          },
        );
      });

      it('needs a full commit id', async () => {
        await assert.rejects(listWorkflowFiles(reader, 'refs/heads/main'), TypeError);
      });
    });
  }

  describe('changedPaths', () => {
    for (const format of ['sha1', 'sha256'] as const) {
      it(`lists changed paths between two commits (${format})`, async () => {
        const repo = join(scratch, `changes-${format}.git`);
        await initBareRepository(repo, { defaultBranch: 'main', objectFormat: format });
        const c1 = await commit(repo, { 'a.txt': '1', 'old name': 'same', src: { 'x.ts': 'x', 'y.ts': 'y' } });
        const c2 = await commit(
          repo,
          { 'a.txt': '2', 'new name': 'same', src: { 'x.ts': 'x', 'z ü\ttab.ts': 'z' }, 'b.txt': 'b' },
          [c1],
        );

        assert.deepEqual(await changedPaths(repo, c1, c2), [
          'a.txt',
          'b.txt',
          'new name',
          'old name',
          'src/y.ts',
          'src/z ü\ttab.ts',
        ]);
        assert.deepEqual(await changedPaths(repo, c2, c2), []);
        // A new branch: every file of the commit counts as changed.
        const all = ['a.txt', 'old name', 'src/x.ts', 'src/y.ts'];
        assert.deepEqual(await changedPaths(repo, null, c1), all);
        assert.deepEqual(await changedPaths(repo, '0'.repeat(c1.length), c1), all);

        assert.equal(await changedPaths(repo, null, c1, { maxPaths: 3 }), null);
        assert.deepEqual(await changedPaths(repo, null, c1, { maxPaths: 4 }), all);

        await assert.rejects(changedPaths(repo, c1, '0'.repeat(c1.length)), TypeError);
        await assert.rejects(changedPaths(repo, '--output=/tmp/x', c1), TypeError);
        await assert.rejects(
          changedPaths(repo, c1.slice(0, 40) === c1 ? 'a'.repeat(64) : 'a'.repeat(40), c1),
          TypeError,
        );
        await assert.rejects(changedPaths(repo, 'f'.repeat(c1.length), c1), /git diff-tree failed/);
      });
    }
  });

  it('exports the directories in precedence order', () => {
    assert.deepEqual([...WORKFLOW_DIRS], ['.forgejo/workflows', '.gitea/workflows', '.github/workflows']);
  });
});
