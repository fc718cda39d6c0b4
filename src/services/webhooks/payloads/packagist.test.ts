import { test } from 'node:test';
import assert from 'node:assert/strict';
import { packagist } from './packagist.ts';
import { EVENTS, HOOK_URL, input, pushPayload, requestOf } from './test-fixtures.ts';

test('every event: the same update request, without Forgejo headers', () => {
  for (const [eventType, payload] of EVENTS) {
    const request = requestOf(
      packagist(input(eventType, payload, { package_url: 'https://packagist.org/packages/acme/app' })),
    );
    assert.deepEqual([request.method, request.url, request.forgejoHeaders], ['POST', HOOK_URL, false], eventType);
    assert.deepEqual(
      JSON.parse(request.body),
      { repository: { url: 'https://packagist.org/packages/acme/app' } },
      eventType,
    );
  }
});

test('without a package URL in the settings the repository URL stands in (action runs name it inside run)', () => {
  for (const [eventType, payload] of EVENTS) {
    assert.deepEqual(
      JSON.parse(requestOf(packagist(input(eventType, payload))).body),
      { repository: { url: 'https://git.example.com/acme/app' } },
      eventType,
    );
  }
  assert.deepEqual(packagist(input('ping', { zen: 'x' })), {
    kind: 'skip',
    reason: 'packagist hooks need a package URL, and this ping event names no repository',
  });
  assert.equal(packagist(input('push', pushPayload(0))).kind, 'skip');
});
