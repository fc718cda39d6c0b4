import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { commitsBetween } from './commit-log.ts';
import { runGit } from './run-git.ts';
import { commitTree } from './test-fixtures.ts';

let gitDir = '';

before(async () => {
  gitDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-commit-log-'));
  await runGit(['init', '--bare', '-q', gitDir]);
});

after(async () => {
  await fs.rm(gitDir, { recursive: true, force: true });
});

test('each commit lists the files it added, removed and modified against its first parent', async () => {
  const first = await commitTree(gitDir, { 'a.txt': 'a', 'b.txt': 'b', docs: { 'x.md': 'x' } }, [], 'first');
  const second = await commitTree(
    gitDir,
    { 'a.txt': 'a2', 'c d.txt': 'c', docs: { 'x.md': 'x', 'y.md': 'y' } },
    [first],
    'second\n\nbody',
  );
  // A merge of a side branch: its files are judged against the first parent only.
  const side = await commitTree(
    gitDir,
    { 'a.txt': 'a', 'b.txt': 'b', docs: { 'x.md': 'x' }, 'side.txt': 's' },
    [first],
    'side',
  );
  const merge = await commitTree(
    gitDir,
    { 'a.txt': 'a2', 'c d.txt': 'c', docs: { 'x.md': 'x', 'y.md': 'y' }, 'side.txt': 's' },
    [second, side],
    'merge',
  );

  const log = await commitsBetween(gitDir, first, merge, 20);
  assert.equal(log.total, 3);
  const byOid = new Map(log.commits.map((c) => [c.oid, c]));
  assert.deepEqual(byOid.get(second)?.files, {
    added: ['c d.txt', 'docs/y.md'],
    removed: ['b.txt'],
    modified: ['a.txt'],
  });
  assert.deepEqual(byOid.get(merge)?.files, { added: ['side.txt'], removed: [], modified: [] });
  assert.deepEqual(byOid.get(side)?.files, { added: ['side.txt'], removed: [], modified: [] });
  assert.equal(byOid.get(second)?.message.trim(), 'second\n\nbody');

  // A new ref: the whole history, the root commit adds everything.
  const all = await commitsBetween(gitDir, null, second, 20);
  assert.deepEqual(all.commits.find((c) => c.oid === first)?.files, {
    added: ['a.txt', 'b.txt', 'docs/x.md'],
    removed: [],
    modified: [],
  });
});
