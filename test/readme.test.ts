// The README's configuration reference is generated from the settings table:
// this test fails when one changes without the other.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { renderConfigReference } from '../src/config-reference.ts';

test('README configuration reference matches the settings table', () => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  assert.ok(readme.includes(renderConfigReference()), 'regenerate with: node --import tsx src/config-reference.ts');
});

test('README quick start keeps its two commands', () => {
  const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
  assert.ok(readme.includes('npm ci && npm start'));
  assert.ok(readme.includes('npm ci && npm test'));
});
