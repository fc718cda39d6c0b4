import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EnvFileError, parseEnvFile } from './env-files.ts';

test('NAME=value and NAME<<DELIMITER lines; a later value replaces an earlier one', () => {
  const values = parseEnvFile('A=1\nB=x=y\r\nSTORY<<EOF\nonce\n\nupon\nEOF\nA=2\n');
  assert.deepEqual(Object.fromEntries(values), { A: '2', B: 'x=y', STORY: 'once\n\nupon' });
});

test('a value whose delimiter never comes, or a line of neither form, is an error', () => {
  assert.throws(() => parseEnvFile('X<<END\nline\n'), EnvFileError);
  assert.throws(() => parseEnvFile('just words\n'), EnvFileError);
});
