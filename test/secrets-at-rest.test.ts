// A secret's plaintext appears nowhere but in the request that sets it: not in
// the SQLite files (database, WAL, shared memory), not in the server log at
// trace level, not in any response, success or error.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createCurrentUserRepo, orgCreate } from '@llamaduck/forgejo-ts';
import { startTestServer } from './support/server.ts';
import type { ApiResponse } from './support/server.ts';

describe('secrets at rest [sqlite]', () => {
  test('the plaintext is absent from gantry.db, its WAL, the trace log and every response', async () => {
    const logFile = path.join(os.tmpdir(), `gantry-log-${randomBytes(6).toString('hex')}.jsonl`);
    const s = await startTestServer('sqlite', { GANTRY_LOG_LEVEL: 'trace' }, { logFile });
    try {
      const marker = `PLAINTEXT-${randomBytes(8).toString('hex')}`;
      const alice = await s.createUser('alice');
      assert.equal((await orgCreate({ client: alice.client, body: { username: 'acme' } })).status, 201);
      assert.equal((await createCurrentUserRepo({ client: alice.client, body: { name: 'app' } })).status, 201);

      const responses: ApiResponse[] = [];
      const call = async (
        method: string,
        apiPath: string,
        options: Parameters<typeof s.api>[2] = {},
      ): Promise<ApiResponse> => {
        const res = await s.api(method, apiPath, { token: alice.token, ...options });
        responses.push(res);
        return res;
      };
      const bases = { user: '/user/actions', org: '/orgs/acme/actions', repo: '/repos/alice/app/actions' };
      for (const [label, base] of Object.entries(bases)) {
        assert.equal(
          (await call('PUT', `${base}/secrets/AT_REST`, { body: { data: `${marker}-${label}` } })).status,
          201,
        );
        assert.equal(
          (await call('PUT', `${base}/secrets/at_rest`, { body: { data: `${marker}-${label}-v2\r\nline two` } }))
            .status,
          204,
        );
        assert.equal((await call('PUT', `${base}/secrets/GONE`, { body: { data: `${marker}-gone` } })).status, 201);
        assert.equal((await call('DELETE', `${base}/secrets/GONE`)).status, 204);
        // Refused requests carrying the value do not echo it either.
        assert.equal((await call('PUT', `${base}/secrets/bad-name`, { body: { data: marker } })).status, 400);
        assert.equal(
          (await call('PUT', `${base}/secrets/TOO_BIG`, { body: { data: `${marker}${'x'.repeat(65_536)}` } })).status,
          422,
        );
        assert.equal((await call('PUT', `${base}/secrets/WRONG`, { body: { data: [marker] } })).status, 422);
        const malformed = await call('PUT', `${base}/secrets/MALFORMED`, {
          rawBody: `{"data": ${marker}}`,
          headers: { 'content-type': 'application/json' },
        });
        assert.equal(malformed.status, 422);
        assert.match((malformed.json as { message: string }).message, /^\[\]: invalid JSON body/);
        if (label !== 'user') assert.equal((await call('GET', `${base}/secrets`)).status, 200);
      }

      // The values are really there, behind the service.
      const services = s.server.deps.services;
      const org = await services.accounts.findByName('acme');
      assert.equal(
        await services.secrets.readValue({ kind: 'org', ownerId: org!.id, repoId: 0 }, 'AT_REST'),
        `${marker}-org-v2\nline two`,
      );

      for (const res of responses) {
        assert.ok(!res.text.includes(marker), `response body: ${res.text.slice(0, 200)}`);
        for (const [name, value] of res.headers) assert.ok(!value.includes(marker), `response header ${name}`);
      }

      const log = readFileSync(logFile, 'utf8');
      assert.match(log, /\/actions\/secrets\/AT_REST/, 'the log saw the requests');
      assert.ok(!log.includes(marker), 'the plaintext is not in the log');

      const databaseFiles = () =>
        ['gantry.db', 'gantry.db-wal', 'gantry.db-shm']
          .map((f) => path.join(s.dataDir, f))
          .filter((f) => existsSync(f));
      const assertAbsent = () => {
        const files = databaseFiles();
        assert.ok(files.some((f) => f.endsWith('gantry.db')));
        for (const file of files)
          assert.equal(readFileSync(file).indexOf(marker), -1, `${path.basename(file)} holds the plaintext`);
      };
      assertAbsent();
      // Stopping checkpoints the WAL into the database file: still nothing.
      await s.server.stop();
      assertAbsent();
    } finally {
      await s.stop();
      await fs.rm(logFile, { force: true });
    }
  });
});
