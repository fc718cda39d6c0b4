import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ActionError, parseUses } from './action-resolver.ts';

test('uses: local paths, docker images, short references against the instance, full URLs', () => {
  const instance = 'http://ci.example:3000/';
  assert.deepEqual(parseUses('./.forgejo/actions/x', instance), { kind: 'local', path: './.forgejo/actions/x' });
  assert.deepEqual(parseUses('docker://alpine:3', instance), { kind: 'docker', image: 'alpine:3' });
  assert.deepEqual(parseUses('actions/checkout@v4', instance), {
    kind: 'remote',
    baseUrl: 'http://ci.example:3000',
    owner: 'actions',
    repo: 'checkout',
    subpath: '',
    ref: 'v4',
  });
  assert.deepEqual(parseUses('https://code.example/o/r/sub/dir@main', instance), {
    kind: 'remote',
    baseUrl: 'https://code.example',
    owner: 'o',
    repo: 'r',
    subpath: 'sub/dir',
    ref: 'main',
  });
  assert.throws(() => parseUses('owner/repo', instance), ActionError);
});
