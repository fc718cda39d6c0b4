import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  CI_NAME_MESSAGE,
  INVALID_NAME_MESSAGE,
  MAX_VALUE_BYTES,
  normalizeLineBreaks,
  normalizeName,
  secretNameProblem,
  valueTooLarge,
  variableNameProblem,
} from './actions-names.ts';

test('secret names: Forgejo cases (tests/integration/api_repo_secrets_test.go)', () => {
  for (const ok of ['_', 'ci', 'CI', 'TOKEN', 'my_secret_2', 'a', '_9', 'FORGEJO', 'GITHUBX'])
    assert.equal(secretNameProblem(ok), null, ok);
  for (const bad of [
    '',
    '-',
    '2secret',
    '123var',
    'FORGEJO_secret',
    'GITEA_secret',
    'GITHUB_secret',
    'github_x',
    'var@test',
    'a b',
    'ä',
    'ſecret',
    'a-b',
    'x\n',
  ]) {
    assert.equal(secretNameProblem(bad), INVALID_NAME_MESSAGE, JSON.stringify(bad));
  }
});

test('variable names: the secret rules plus CI in any case', () => {
  for (const ok of ['_', 'TEST_VAR', 'test_var', 'CIX', 'C_I']) assert.equal(variableNameProblem(ok), null, ok);
  for (const ci of ['ci', 'CI', 'Ci', 'cI']) assert.equal(variableNameProblem(ci), CI_NAME_MESSAGE, ci);
  for (const bad of ['-', '123var', 'var@test', 'forgejo_var', 'github_var', 'gitea_var'])
    assert.equal(variableNameProblem(bad), INVALID_NAME_MESSAGE, bad);
});

test('names longer than 255 bytes are invalid, 255 is fine', () => {
  assert.equal(secretNameProblem('A'.repeat(255)), null);
  assert.equal(secretNameProblem('A'.repeat(256)), INVALID_NAME_MESSAGE);
  assert.equal(variableNameProblem('A'.repeat(256)), INVALID_NAME_MESSAGE);
  assert.equal(normalizeName('my_Secret'), 'MY_SECRET');
  assert.equal(normalizeName('straße'), 'STRAßE', 'only ASCII letters change');
});

test('values: only CRLF becomes LF; no trimming; unicode kept; size limit in UTF-8 bytes', () => {
  assert.equal(normalizeLineBreaks('   \r\ndàtä\t   \r\n  '), '   \ndàtä\t   \n  ');
  assert.equal(normalizeLineBreaks('  \tvalüé\r\nX  \r\n'), '  \tvalüé\nX  \n');
  assert.equal(normalizeLineBreaks('a\rb\n\r\r\n'), 'a\rb\n\r\n');
  assert.equal(valueTooLarge('x'.repeat(MAX_VALUE_BYTES)), false);
  assert.equal(valueTooLarge('x'.repeat(MAX_VALUE_BYTES + 1)), true);
  assert.equal(valueTooLarge('é'.repeat(MAX_VALUE_BYTES / 2)), false);
  assert.equal(valueTooLarge('é'.repeat(MAX_VALUE_BYTES / 2 + 1)), true, 'bytes, not characters');
});
