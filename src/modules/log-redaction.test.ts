import { test } from 'node:test';
import assert from 'node:assert/strict';
import { redactQueryCredentials, serializeRequest } from './log-redaction.ts';

test('credential query parameters keep their name and lose their value', () => {
  assert.equal(redactQueryCredentials('/api/v1/user?token=abc&page=2'), '/api/v1/user?token=[redacted]&page=2');
  assert.equal(
    redactQueryCredentials('/x?access_token=abc&ACCESS_TOKEN=d&%74oken=e'),
    '/x?access_token=[redacted]&ACCESS_TOKEN=[redacted]&%74oken=[redacted]',
  );
  assert.equal(
    redactQueryCredentials('/x?registration-token=a&password=b&client_secret=c'),
    '/x?registration-token=[redacted]&password=[redacted]&client_secret=[redacted]',
  );
  assert.equal(redactQueryCredentials('/x?tokens=1&secretary=2&token'), '/x?tokens=1&secretary=2&token');
  assert.equal(
    redactQueryCredentials('/acme/app.git/info/refs?service=git-upload-pack'),
    '/acme/app.git/info/refs?service=git-upload-pack',
  );
  assert.equal(redactQueryCredentials('/plain/path'), '/plain/path');
  assert.equal(redactQueryCredentials('/x?%E0%A4%A=1&token=%zz'), '/x?%E0%A4%A=1&token=[redacted]');
});

test('the user info of an absolute-form target is redacted', () => {
  assert.equal(
    redactQueryCredentials('http://alice:hunter2@host/acme/app.git?token=t'),
    'http://[redacted]@host/acme/app.git?token=[redacted]',
  );
});

test('a request is logged as method, redacted URL, host and peer, without headers', () => {
  const line = serializeRequest({
    method: 'GET',
    url: '/api/v1/user?access_token=abc',
    headers: { host: 'h:1', authorization: 'token abc' },
    socket: { remoteAddress: '127.0.0.1', remotePort: 5 },
  });
  assert.deepEqual(line, {
    method: 'GET',
    url: '/api/v1/user?access_token=[redacted]',
    host: 'h:1',
    remoteAddress: '127.0.0.1',
    remotePort: 5,
  });
});
