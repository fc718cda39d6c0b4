import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidScopeError, parseScopes, scopeAllows, scopeToList } from './scopes.ts';

test('write implies read and the list is normalised to canonical order', () => {
  const scope = parseScopes(['read:user', 'write:repository,read:repository', 'read:organization']);
  assert.deepEqual(scopeToList(scope), ['read:organization', 'write:repository', 'read:user']);
  assert.equal(scopeAllows(scope, 'repository', 'read'), true);
  assert.equal(scopeAllows(scope, 'user', 'write'), false);
  assert.equal(scopeAllows(scope, 'admin', 'read'), false);
});

test('every write scope collapses to all; all allows everything', () => {
  const every = [
    'activitypub',
    'admin',
    'misc',
    'notification',
    'organization',
    'package',
    'issue',
    'repository',
    'user',
  ].map((c) => `write:${c}`);
  assert.deepEqual(scopeToList(parseScopes(every)), ['all']);
  const all = parseScopes(['all']);
  assert.equal(scopeAllows(all, 'admin', 'write'), true);
  assert.deepEqual(scopeToList(parseScopes(['public-only', 'read:repository'])), ['public-only', 'read:repository']);
});

test('unknown scopes are rejected by name', () => {
  assert.throws(
    () => parseScopes(['read:repository', 'write:everything']),
    (e: unknown) => e instanceof InvalidScopeError && e.scope === 'write:everything',
  );
  assert.throws(() => parseScopes(['repo']), InvalidScopeError);
});
