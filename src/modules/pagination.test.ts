import { test } from 'node:test';
import assert from 'node:assert/strict';
import { linkHeader, parseIdParam, parsePage } from './pagination.ts';

const defaults = { defaultPagingNum: 30, maxResponseItems: 50 };

test('page and limit are parsed leniently and bounded', () => {
  assert.deepEqual(parsePage({}, defaults), { page: 1, limit: 30, offset: 0 });
  assert.deepEqual(parsePage({ page: '3', limit: '10' }, defaults), { page: 3, limit: 10, offset: 20 });
  assert.deepEqual(parsePage({ page: 'abc', limit: '-4' }, defaults), { page: 1, limit: 30, offset: 0 });
  assert.deepEqual(parsePage({ limit: '500' }, defaults), { page: 1, limit: 50, offset: 0 });
  assert.deepEqual(parsePage({ page: ['2', '9'], limit: '5' }, defaults), { page: 2, limit: 5, offset: 5 });
});

test('Link header lists next, last, first, prev in Forgejo order', () => {
  const url = new URL('http://h/api/v1/x?limit=2&page=2');
  assert.equal(
    linkHeader(url, { page: 2, limit: 2, offset: 2 }, 7),
    '<http://h/api/v1/x?limit=2&page=3>; rel="next",<http://h/api/v1/x?limit=2&page=4>; rel="last",<http://h/api/v1/x?limit=2&page=1>; rel="first",<http://h/api/v1/x?limit=2&page=1>; rel="prev"',
  );
  assert.equal(linkHeader(url, { page: 1, limit: 10, offset: 0 }, 7), null);
});

test('id params parse like ParamsInt64', () => {
  assert.equal(parseIdParam('42'), 42);
  assert.equal(parseIdParam('+007'), 7);
  assert.equal(parseIdParam('abc'), 0);
  assert.equal(parseIdParam('99999999999999999999'), 0);
});
