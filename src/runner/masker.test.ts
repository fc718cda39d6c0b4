import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Masker } from './masker.ts';

test('values, each line of a multi-line value, longest first; blank values mask nothing', () => {
  const masker = new Masker();
  masker.add('abc');
  masker.add('abcdef');
  masker.add('line-one\nline-two');
  masker.add('');
  masker.add('\n');
  assert.equal(masker.mask('x abcdef y abc z'), 'x *** y *** z');
  assert.equal(masker.mask('line-two alone'), '*** alone');
  assert.equal(masker.mask('nothing here'), 'nothing here');
});
