// The webhook allow list (GANTRY_WEBHOOK_ALLOWED_HOSTS): which addresses each
// entry admits, and that a host name is judged by the address it resolves to
// when the connection is made (so DNS cannot point an allowed name inside).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startWebhookReceiver } from '../../../test/support/webhook-receiver.ts';
import { buildRequest, sendRequest } from './sender.ts';
import { createGuardedAgent, isAddressAllowed, parseAllowedHosts } from './ssrf.ts';

test('external refuses loopback, private, link-local, CGNAT and NAT64; the other entries allow them', () => {
  const external = parseAllowedHosts('external');
  for (const ip of [
    '127.0.0.1',
    '::1',
    '10.1.2.3',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '64:ff9b::a00:1',
    '::ffff:127.0.0.1',
    'fd00::1',
    '0.0.0.0',
  ])
    assert.equal(isAddressAllowed(external, ip), false, ip);
  for (const ip of ['8.8.8.8', '2606:4700::1111']) assert.equal(isAddressAllowed(external, ip), true, ip);
  assert.equal(isAddressAllowed(parseAllowedHosts('loopback'), '127.0.0.2'), true);
  assert.equal(isAddressAllowed(parseAllowedHosts('private'), '172.16.5.4'), true);
  assert.equal(isAddressAllowed(parseAllowedHosts('10.0.0.0/8, 2001:db8::/32'), '2001:db8::5'), true);
  assert.equal(isAddressAllowed(parseAllowedHosts('*'), '127.0.0.1'), true);
});

test('a host name is judged by the address it resolves to at connect time; a name glob allows it', async () => {
  const receiver = await startWebhookReceiver();
  const port = new URL(receiver.url).port;
  const request = buildRequest({
    url: `http://localhost:${port}/x`,
    contentType: 'json',
    uuid: 'u',
    eventType: 'push',
    payload: '{}',
    secret: '',
    authorizationHeader: '',
    hookId: 1,
    ownerId: 1,
    attempt: 1,
  });
  const external = await createGuardedAgent('external');
  const byName = await createGuardedAgent('external, LOCALHOST');
  try {
    const refused = await sendRequest(request, { dispatcher: external });
    assert.equal(refused.status, 0);
    // The host name only: never the address it resolved to (that would map the inside for an SSRF probe).
    assert.match(refused.error, /deny 'localhost'$/);
    assert.doesNotMatch(refused.error, /127\.0\.0\.1|::1/);
    assert.equal(refused.refused, true);
    assert.equal((await sendRequest(request, { dispatcher: byName })).status, 200);
    assert.equal(receiver.received.length, 1);
  } finally {
    await external.close();
    await byName.close();
    await receiver.close();
  }
});
