import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import Fastify from 'fastify';
import type { FastifyBaseLogger } from 'fastify';
import pino from 'pino';
import { serializeRequest, serializeResponse } from '../modules/log-redaction.ts';
import { RequestLog } from './request-log.ts';

/** The lines a pino logger with the server's serializers writes, and the logger. */
function capturedLogger(options: pino.LoggerOptions = {}): { lines: string[]; logger: pino.Logger } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  const logger = pino(
    { level: 'info', serializers: { req: serializeRequest, res: serializeResponse }, ...options },
    stream,
  );
  return { lines, logger };
}

/** The line without its two clock readings, which differ between any two lines. */
const withoutClock = (line: string) =>
  line.replace(/"time":\d+/, '"time":0').replace(/"responseTime":[\d.e+-]+/, '"responseTime":0');

/**
 * A server writing its request lines, which also has pino write the same
 * line (as the request log wrote it before) in a field `expected`.
 */
async function serverWritingBoth(options: pino.LoggerOptions = {}) {
  const { lines, logger } = capturedLogger(options);
  const expected: string[] = [];
  const app = Fastify({ loggerInstance: logger as unknown as FastifyBaseLogger, logController: new RequestLog() });
  app.get('/thing/:name', async (req) => ({ name: (req.params as { name: string }).name }));
  app.addHook('onResponse', (req, reply, done) => {
    const before = lines.length;
    reply.log.info({ req, res: reply, responseTime: reply.elapsedTime }, 'request completed');
    expected.push(...lines.splice(before));
    done();
  });
  return { app, lines, expected };
}

test('the request line is what pino wrote for it through the serializers, without any header', async () => {
  const { app, lines, expected } = await serverWritingBoth();
  try {
    await app.inject({ method: 'GET', url: '/thing/a', headers: { authorization: 'token secret-in-header-1234' } });
    await app.inject({ method: 'GET', url: '/thing/b?token=secret-in-query-5678&page=2', headers: { host: 'h"ost' } });
    await app.inject({ method: 'GET', url: '/missing?access_token=x', headers: { host: 'hôte\u2028' } });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address() as { port: number };
    const res = await fetch(`http://127.0.0.1:${address.port}/thing/%E2%9C%93?Password=p`, {
      headers: { cookie: 'session=secret-cookie-9012' },
    });
    assert.equal(res.status, 200);
  } finally {
    await app.close();
  }
  const completed = lines.filter((line) => line.includes('request completed'));
  assert.equal(completed.length, 4);
  assert.equal(expected.length, 4);
  assert.deepEqual(completed.map(withoutClock), expected.map(withoutClock));
  const last = JSON.parse(completed[3] as string) as { req: Record<string, unknown>; res: unknown; reqId: string };
  assert.deepEqual(Object.keys(last.req), ['method', 'url', 'host', 'remoteAddress', 'remotePort']);
  assert.equal(last.req.url, '/thing/%E2%9C%93?Password=[redacted]');
  assert.deepEqual(last.res, { statusCode: 200 });
  assert.ok(last.reqId);
  for (const line of completed) assert.doesNotMatch(line, /secret-in|authorization|cookie/i);
});

test('a logger whose options change the line still gets it from pino', async () => {
  const { app, lines, expected } = await serverWritingBoth({ mixin: () => ({ extra: 1 }) });
  try {
    await app.inject({ method: 'GET', url: '/thing/a?secret=s' });
  } finally {
    await app.close();
  }
  const completed = lines.filter((line) => line.includes('request completed'));
  assert.deepEqual(completed.map(withoutClock), expected.map(withoutClock));
  assert.match(completed[0] as string, /"extra":1/);
});
