import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ExpressionScope } from '../modules/workflows/expressions.ts';
import { hashFiles, hashFilesFunction } from './hash-files.ts';

function workspace(files: Record<string, string>): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'gantry-hashfiles-'));
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), text);
  }
  return root;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

test('one sha256 over the selected files in walk order; a later ! pattern deselects; none selected is empty', () => {
  const root = workspace({
    'b/package-lock.json': 'B',
    'a/x/package-lock.json': 'A',
    'package-lock.json': 'ROOT',
    'a/other.json': 'O',
  });
  try {
    // Walk order: a/x/package-lock.json, b/package-lock.json, package-lock.json.
    assert.equal(hashFiles(root, ['**/package-lock.json']), sha256('ABROOT'));
    assert.equal(hashFiles(root, ['**/*.json', '!a/**']), sha256('BROOT'));
    assert.equal(hashFiles(root, ['./package-lock.json']), sha256('ROOT'));
    assert.equal(hashFiles(root, ['**/*.none']), '');
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test('a symbolic link is not followed: a job cannot hash files outside its workspace', () => {
  const outside = workspace({ 'secret.txt': 'host file' });
  const root = workspace({ 'mine.txt': 'mine' });
  try {
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(root, 'link.txt'));
    fs.symlinkSync(outside, path.join(root, 'linked-dir'));
    assert.equal(hashFiles(root, ['**/*.txt']), sha256('mine'));
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(outside, { recursive: true, force: true });
  }
});

test('in an expression: several patterns, and a non-string argument is an error', () => {
  const root = workspace({ 'go.sum': 'G', 'x/go.sum': 'X' });
  try {
    const scope = ExpressionScope.of({ runner: { os: 'Linux' } }, [hashFilesFunction(() => root)]);
    assert.equal(scope.evaluate("${{ runner.os }}-${{ hashFiles('go.sum', 'x/go.sum') }}"), `Linux-${sha256('GX')}`);
    assert.throws(() => scope.evaluate('${{ hashFiles(1) }}'), /patterns as strings/);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});
