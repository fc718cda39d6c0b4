import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isAlphaDashDot, isValidEmail, isValidUsername, repoNameProblem, usernameProblem } from './names.ts';

test('usernames follow Forgejo rule', () => {
  for (const ok of ['root', 'a', 'user-1', 'first.last', 'a_b', '9lives']) assert.equal(isValidUsername(ok), true, ok);
  for (const bad of ['', '-lead', '.dot', 'trail-', 'double--dash', 'a._b', 'sp ace', 'ünï'])
    assert.equal(isValidUsername(bad), false, bad);
});

test('reserved names and patterns', () => {
  assert.deepEqual(usernameProblem('Admin'), { kind: 'reserved', name: 'Admin' });
  assert.deepEqual(usernameProblem('x.keys'), { kind: 'pattern', pattern: '*.keys' });
  assert.equal(usernameProblem('alice'), null);
  assert.deepEqual(repoNameProblem('thing.git'), { kind: 'pattern', pattern: '*.git' });
  assert.deepEqual(repoNameProblem('..'), { kind: 'reserved', name: '..' });
  assert.equal(isAlphaDashDot('my-repo.v2_x'), true);
  assert.equal(isAlphaDashDot('no/slash'), false);
});

test('emails', () => {
  assert.equal(isValidEmail('root@example.com'), true);
  assert.equal(isValidEmail('no-at-sign'), false);
  assert.equal(isValidEmail('a@b@c'), false);
});
