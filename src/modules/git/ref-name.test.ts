import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { isValidBranchName, MAX_BRANCH_NAME_BYTES } from './ref-name.ts';
import { GitCommandError, runGit } from './run-git.ts';

// Names where git and we must agree. NUL is left out: it cannot be passed in argv.
const TRICKY_NAMES: readonly string[] = [
  'main',
  'feature/login',
  'release-1.0',
  'v1.2.3',
  'a/b/c/d',
  'ünïcødé',
  '日本語/ブランチ',
  'with_underscore',
  'x@y',
  'a@b{c}',
  'foo.bar',
  'foo.lockx',
  'a-b-',
  '',
  '.hidden',
  'a/.hidden',
  'foo..bar',
  'foo.lock',
  'a.lock/b',
  'foo.',
  'foo/',
  '/foo',
  'foo//bar',
  '-leading-dash',
  'has space',
  'tab\there',
  'new\nline',
  'del\x7fchar',
  'ctrl\x01char',
  'tilde~1',
  'caret^',
  'colon:x',
  'question?',
  'star*',
  'bracket[',
  'back\\slash',
  'at@{brace',
  '@{-1}',
  'foo@{u}',
  'HEAD',
  'refs/heads/x',
  '.',
  '..',
  'a/./b',
  'x/..',
];

// Where we are deliberately stricter than `git check-ref-format --branch`.
const STRICTER_THAN_GIT: ReadonlyArray<{ name: string; gitAccepts: boolean }> = [
  { name: '@', gitAccepts: true },
  { name: 'x'.repeat(MAX_BRANCH_NAME_BYTES + 1), gitAccepts: true },
  // 34 three-byte characters: 34 UTF-16 units but 102 bytes.
  { name: '語'.repeat(34), gitAccepts: true },
];

describe('isValidBranchName', () => {
  let scratch = '';

  before(async () => {
    // A directory outside any repository, so --branch cannot resolve @{-1}
    // and friends against some repository's history.
    scratch = await mkdtemp(join(tmpdir(), 'gantry-refname-'));
  });
  after(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  async function gitAccepts(name: string): Promise<boolean> {
    try {
      await runGit(['check-ref-format', '--branch', name], {
        cwd: scratch,
        env: { GIT_CEILING_DIRECTORIES: dirname(scratch) },
      });
      return true;
    } catch (err) {
      if (err instanceof GitCommandError && err.exitCode === 128) return false;
      throw err;
    }
  }

  it('agrees with git check-ref-format --branch on tricky names', async () => {
    const mismatches: string[] = [];
    for (const name of TRICKY_NAMES) {
      const expected = await gitAccepts(name);
      if (isValidBranchName(name) !== expected) {
        mismatches.push(`${JSON.stringify(name)}: git says ${expected ? 'valid' : 'invalid'}`);
      }
    }
    assert.deepEqual(mismatches, []);
  });

  it('is stricter than git only where intended', async () => {
    for (const { name, gitAccepts: expected } of STRICTER_THAN_GIT) {
      assert.equal(await gitAccepts(name), expected, `git on ${JSON.stringify(name)}`);
      assert.equal(isValidBranchName(name), false, JSON.stringify(name));
    }
  });

  it('accepts exactly the byte limit', () => {
    assert.equal(isValidBranchName('x'.repeat(MAX_BRANCH_NAME_BYTES)), true);
    assert.equal(isValidBranchName('語'.repeat(33)), true); // 99 bytes
  });

  it('rejects NUL and lone surrogates', () => {
    assert.equal(isValidBranchName('a\0b'), false);
    assert.equal(isValidBranchName('a\uD800b'), false);
    assert.equal(isValidBranchName('emoji-😀'), true);
  });
});
