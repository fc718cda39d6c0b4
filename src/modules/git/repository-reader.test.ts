import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initBareRepository } from './bare-repository.ts';
import type { ObjectFormat } from './bare-repository.ts';
import { CatFilePool } from './cat-file.ts';
import { RepositoryReader } from './repository-reader.ts';
import { commitTree as fixtureCommit, fixtureGit } from './test-fixtures.ts';
import type { Dir } from './test-fixtures.ts';

// A zone other than UTC, so the parsed signature's zone is checked.
const TZ = '+0100';
const git = (gitDir: string, args: string[], input?: Buffer | string): Promise<string> =>
  fixtureGit(gitDir, args, input, TZ);
const commitTree = (gitDir: string, dir: Dir, parents: string[], message: string): Promise<string> =>
  fixtureCommit(gitDir, dir, parents, message, TZ);

function files(objectFormat: ObjectFormat): Dir {
  return {
    'README.md': '# hello\n',
    src: { 'main.ts': 'export {};\n', deep: { 'a b:c ü.txt': 'odd name\n' } },
    'link.md': { link: 'README.md' },
    vendor: { gitlink: '1'.repeat(objectFormat === 'sha1' ? 40 : 64) },
  };
}

async function makeRepo(path: string, objectFormat: ObjectFormat): Promise<{ c1: string; c2: string }> {
  await initBareRepository(path, { defaultBranch: 'main', objectFormat });
  const c1 = await commitTree(path, files(objectFormat), [], 'first');
  const c2 = await commitTree(path, { ...files(objectFormat), 'NEW.md': 'new\n' }, [c1], 'second');
  await git(path, ['update-ref', 'refs/heads/main', c2]);
  await git(path, ['tag', '-a', '-m', 'v1', 'v1', c1]);
  await git(path, ['tag', '-a', '-m', 'v2 tags v1', 'v2', 'refs/tags/v1']);
  await git(path, ['tag', 'light', c1]);
  await git(path, ['tag', '-a', '-m', 'a tree', 'treetag', `${c1}^{tree}`]);
  return { c1, c2 };
}

describe('RepositoryReader', () => {
  let scratch = '';
  let pool: CatFilePool;

  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'gantry-reader-'));
    pool = new CatFilePool();
  });
  after(async () => {
    await pool.close();
    await rm(scratch, { recursive: true, force: true });
  });

  for (const format of ['sha1', 'sha256'] as const) {
    describe(`${format} repository`, () => {
      let repo = '';
      let reader: RepositoryReader;
      let c1 = '';
      let c2 = '';

      before(async () => {
        repo = join(scratch, `${format}.git`);
        ({ c1, c2 } = await makeRepo(repo, format));
        reader = new RepositoryReader(pool, repo);
      });

      it('resolves ids, HEAD and full ref names to commits, peeling tags', async () => {
        assert.equal(c1.length, format === 'sha1' ? 40 : 64);
        assert.equal(await reader.resolveCommit(c2), c2);
        assert.equal(await reader.resolveCommit(c2.slice(0, 7)), c2);
        assert.equal(await reader.resolveCommit('HEAD'), c2);
        assert.equal(await reader.resolveCommit('refs/heads/main'), c2);
        assert.equal(await reader.resolveCommit('refs/tags/v1'), c1);
        assert.equal(await reader.resolveCommit('refs/tags/v2'), c1, 'a tag of a tag');
        assert.equal(await reader.resolveCommit('refs/tags/light'), c1);
        const tagOid = await git(repo, ['rev-parse', 'refs/tags/v1']);
        assert.equal(await reader.resolveCommit(tagOid), c1, 'the id of an annotated tag');
      });

      it('resolves nothing it should not', async () => {
        assert.equal(await reader.resolveCommit('refs/tags/treetag'), null, 'a tag of a tree');
        assert.equal(await reader.resolveCommit('refs/heads/nope'), null);
        assert.equal(await reader.resolveCommit('0'.repeat(c1.length)), null);
        const blob = await git(repo, ['rev-parse', `${c1}:README.md`]);
        assert.equal(await reader.resolveCommit(blob), null);
        // Revision syntax beyond the three accepted forms, including short names.
        for (const rev of [
          'main',
          'v1',
          'HEAD~1',
          'HEAD^',
          'main@{0}',
          '@',
          ':/first',
          'HEAD:README.md',
          'refs/heads/main^{tree}',
          'refs/heads/../main',
          'refs/heads/main.lock',
          '-x',
          '',
          'abc',
          c2.toUpperCase(),
          `${c2}0`,
          'refs/heads/ma in',
          'refs/heads/a\nb',
        ]) {
          assert.equal(await reader.resolveCommit(rev), null, rev);
        }
      });

      it('does not let git expand a missing ref into another one', async () => {
        const c3 = await commitTree(repo, { 'evil.yml': 'x' }, [c2], 'evil');
        // A branch *named* refs/tags/v9 is refs/heads/refs/tags/v9; git's DWIM
        // would hand it out for refs/tags/v9 when that tag does not exist.
        await git(repo, ['update-ref', 'refs/heads/refs/tags/v9', c3]);
        assert.equal((await git(repo, ['rev-parse', 'refs/tags/v9'])).trim(), c3, 'git itself does');
        assert.equal(await reader.resolveCommit('refs/tags/v9'), null);
        assert.equal(await reader.refExists('refs/tags/v9'), false);
        // When the real tag exists it wins, through the exact (slow) path.
        await git(repo, ['update-ref', 'refs/tags/v9', c1]);
        assert.equal(await reader.resolveCommit('refs/tags/v9'), c1);
        assert.equal(await reader.refExists('refs/tags/v9'), true);

        // git prefers a ref named like an abbreviation over the object: refuse to guess.
        const abbrev = c1.slice(0, 8);
        await git(repo, ['update-ref', `refs/heads/${abbrev}`, c3]);
        assert.equal(await reader.resolveCommit(abbrev), null);
        assert.equal(await reader.resolveCommit(c1), c1, 'full ids are never ambiguous');

        for (const ref of ['refs/heads/refs/tags/v9', 'refs/tags/v9', `refs/heads/${abbrev}`])
          await git(repo, ['update-ref', '-d', ref]);
      });

      it('guards HEAD on an unborn branch the same way', async () => {
        await git(repo, ['symbolic-ref', 'HEAD', 'refs/heads/unborn']);
        try {
          assert.equal(await reader.resolveCommit('HEAD'), null);
          await git(repo, ['update-ref', 'refs/tags/HEAD', c1]);
          assert.equal((await git(repo, ['rev-parse', 'HEAD'])).trim(), c1, 'git itself falls back to the tag');
          assert.equal(await reader.resolveCommit('HEAD'), null);
          await git(repo, ['symbolic-ref', 'HEAD', 'refs/heads/main']);
          assert.equal(await reader.resolveCommit('HEAD'), c2, 'exact path while the tag exists');
        } finally {
          await git(repo, ['symbolic-ref', 'HEAD', 'refs/heads/main']);
          await git(repo, ['update-ref', '-d', 'refs/tags/HEAD']);
        }
      });

      it('tells whether a ref exists', async () => {
        assert.equal(await reader.refExists('refs/heads/main'), true);
        assert.equal(await reader.refExists('refs/tags/treetag'), true);
        assert.equal(await reader.refExists('refs/heads/mai'), false);
        assert.equal(await reader.refExists('refs/heads'), false);
        await assert.rejects(reader.refExists('main'), TypeError);
        await assert.rejects(reader.refExists('HEAD'), TypeError);
        await assert.rejects(reader.refExists('refs/heads/a..b'), TypeError);
      });

      it('sees a branch move made after the reader was first used', async () => {
        assert.equal(await reader.resolveCommit('refs/heads/moving'), null);
        await git(repo, ['update-ref', 'refs/heads/moving', c1]);
        assert.equal(await reader.resolveCommit('refs/heads/moving'), c1);
        await git(repo, ['update-ref', 'refs/heads/moving', c2]);
        assert.equal(await reader.resolveCommit('refs/heads/moving'), c2);
      });

      it('reads commits, trees and blobs by id, and only of the right type', async () => {
        const commit = await reader.readCommit(c2);
        assert.equal(commit?.oid, c2);
        assert.deepEqual(commit?.parents, [c1]);
        assert.deepEqual(commit?.author, {
          name: 'Tess Ter',
          email: 'tess@example.test',
          timestampSec: 1_700_000_000,
          tz: '+0100',
        });
        assert.equal(commit?.message, 'second\n');

        const root = await reader.listTree(commit?.tree ?? '');
        assert.deepEqual(
          root?.map((e) => [e.name, e.kind, e.mode]),
          [
            ['NEW.md', 'blob', '100644'],
            ['README.md', 'blob', '100644'],
            ['link.md', 'symlink', '120000'],
            ['src', 'tree', '40000'],
            ['vendor', 'commit', '160000'],
          ],
        );
        assert.equal(root?.find((e) => e.name === 'vendor')?.oid.startsWith('1111'), true);
        const readme = root?.find((e) => e.name === 'README.md')?.oid ?? '';
        assert.equal(readme.length, c1.length);
        assert.equal((await reader.readBlob(readme))?.toString('utf8'), '# hello\n');

        assert.equal(await reader.readBlob(c2), null);
        assert.equal(await reader.readCommit(readme), null);
        assert.equal(await reader.listTree(readme), null);
        assert.equal(await reader.readCommit('f'.repeat(c1.length)), null);
        await assert.rejects(reader.readBlob(readme.slice(0, 10)), TypeError, 'abbreviations are not ids');
        await assert.rejects(
          reader.readBlob(format === 'sha1' ? 'a'.repeat(64) : readme.slice(0, 40)),
          TypeError,
          'ids of the other format',
        );
        await assert.rejects(reader.readCommit('refs/heads/main'), TypeError);
      });

      it('reads paths in one go, whatever the depth', async () => {
        assert.equal((await reader.readPath(c2, 'src/deep/a b:c ü.txt'))?.content.toString('utf8'), 'odd name\n');
        assert.equal((await reader.readPath(c2, 'src'))?.type, 'tree');
        assert.equal((await reader.readPath(c2, ''))?.oid, (await reader.readCommit(c2))?.tree);
        assert.equal(
          (await reader.readPath(c2, 'link.md'))?.content.toString('utf8'),
          'README.md',
          'a symlink reads as its target',
        );
        assert.equal(await reader.readPath(c2, 'vendor'), null, 'a submodule is not in this repository');
        assert.equal(await reader.readPath(c1, 'NEW.md'), null);
        assert.equal(await reader.readPath(c2, 'README.md/x'), null);
        assert.equal(await reader.readPath(c2, 'src/nope'), null);
        for (const bad of ['/src', 'src/', 'src//deep', './src', 'src/../README.md', '..', 'a\nb']) {
          await assert.rejects(reader.readPath(c2, bad), TypeError, bad);
        }
        await assert.rejects(reader.readPath('HEAD', 'README.md'), TypeError);
      });
    });
  }

  it('a warm ref → commit → tree → blob chain is a few round trips', async (t) => {
    const repo = join(scratch, 'chain.git');
    await makeRepo(repo, 'sha1');
    const reader = new RepositoryReader(pool, repo);
    await reader.resolveCommit('refs/heads/main');
    const start = performance.now();
    const n = 500;
    for (let i = 0; i < n; i++) {
      const commit = await reader.resolveCommit('refs/heads/main');
      const tree = await reader.readPath(commit ?? '', 'src');
      const entry = tree !== null ? (await reader.listTree(tree.oid))?.find((e) => e.name === 'main.ts') : undefined;
      assert.equal((await reader.readBlob(entry?.oid ?? ''))?.toString('utf8'), 'export {};\n');
    }
    t.diagnostic(`${Math.round(n / ((performance.now() - start) / 1000))} ref→commit→tree→blob chains/s`);
  });
});
