import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { getVersion, userGetCurrent } from '@llamaduck/forgejo-ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer } from '../support/server.ts';

for (const dialect of testDialects()) {
  describe(`smoke [${dialect}]`, () => {
    let s: TestServer;
    before(async () => {
      s = await startTestServer(dialect);
    });
    after(async () => {
      await s.stop();
    });

    test('version and current user through the forgejo-ts client', async () => {
      const version = await getVersion({ client: s.anonymous });
      assert.match(version.data?.version ?? '', /^15\.0\.\d+\+gantry-/);
      const me = await userGetCurrent({ client: s.admin.client });
      assert.equal(me.status, 200);
      assert.equal(me.data?.login, 'root');
      assert.equal(me.data?.is_admin, true);
    });
  });
}
