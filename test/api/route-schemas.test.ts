// Every route's body schema and response schemas compile. They are compiled
// on a route's first use (src/http/lazy-schema-compilers.ts), so a schema the
// compiler refuses would otherwise surface as a 500 on the first request of a
// route no test happens to call; here a started server compiles them all.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { compileEveryPending } from '../../src/http/lazy-schema-compilers.ts';
import { startTestServer } from '../support/server.ts';
import type { TestServer } from '../support/server.ts';

describe('route schemas', () => {
  let s: TestServer;

  before(async () => {
    s = await startTestServer('sqlite');
  });

  after(async () => {
    await s.stop();
  });

  test('every route schema of a started server compiles, and a route first used afterwards still answers', async () => {
    const compiled = compileEveryPending(s.server.app);
    // Hundreds of routes carry a body or response schema; a handful would mean the list is not kept.
    assert.ok(compiled > 100, `only ${compiled} schemas were waiting to be compiled`);
    assert.equal(compileEveryPending(s.server.app), 0, 'each compiled once');
    const version = await s.api('GET', '/version');
    assert.equal(version.status, 200, version.text);
  });
});
