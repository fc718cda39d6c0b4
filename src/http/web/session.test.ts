// Unit tests of the console's cookie settings and of the sign-in redirect target.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { safeRedirectTarget } from './render.ts';
import { cookieSettings } from './session.ts';

test('the session cookie is Secure exactly when the root URL is https, and scoped to its path', () => {
  assert.deepEqual(cookieSettings('https://ci.example.com/'), { secure: true, path: '/', site: '' });
  assert.deepEqual(cookieSettings('http://127.0.0.1:3000/'), { secure: false, path: '/', site: '' });
  assert.deepEqual(cookieSettings('https://example.com/gantry/'), { secure: true, path: '/gantry/', site: '/gantry' });
});

test('after sign-in only a same-site path is followed; anything else goes home', () => {
  assert.equal(safeRedirectTarget('/acme/app/actions?status=2'), '/acme/app/actions?status=2');
  for (const hostile of ['https://evil.example/', '//evil.example/x', '/\\evil.example', 'javascript:alert(1)', '', 42])
    assert.equal(safeRedirectTarget(hostile), '/');
});
