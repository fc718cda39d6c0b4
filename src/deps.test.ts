import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from './config.ts';
import { createLogger } from './deps.ts';

test('the process logger writes no header of a logged request or response, whatever carries them', () => {
  const lines: string[] = [];
  const logger = createLogger(loadConfig({ GANTRY_LOG_LEVEL: 'info' }, '/srv/gantry'), {
    write: (line: string) => void lines.push(line),
  });
  const headers = {
    host: 'gantry.example:3000',
    authorization: 'token secret-in-authorization',
    'proxy-authorization': 'Basic secret-in-proxy-authorization',
    cookie: 'gantry_session=secret-in-cookie',
    'x-runner-token': 'secret-in-runner-token',
    sudo: 'secret-in-sudo',
  };
  const req = {
    method: 'GET',
    url: '/api/v1/user?token=secret-in-query',
    headers,
    socket: { remoteAddress: '127.0.0.1', remotePort: 5 },
  };
  const res = { statusCode: 200, headers: { 'set-cookie': 'gantry_session=secret-in-set-cookie' } };
  logger.info({ req, res, responseTime: 1 }, 'request completed');
  logger.child({ reqId: 'r1' }).error({ req, res }, 'request errored');

  assert.equal(lines.length, 2);
  for (const line of lines) {
    assert.doesNotMatch(line, /secret-in/);
    const logged = JSON.parse(line) as { req: unknown; res: unknown };
    assert.deepEqual(logged.req, {
      method: 'GET',
      url: '/api/v1/user?token=[redacted]',
      host: 'gantry.example:3000',
      remoteAddress: '127.0.0.1',
      remotePort: 5,
    });
    assert.deepEqual(logged.res, { statusCode: 200 });
  }
});
