// The operator's path, as a new user takes it: `gantry web` as a real process,
// the admin CLI creating the first user and a token while it runs, the API
// answering with that token, and a graceful stop on SIGTERM.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { statSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { testDialects } from './support/server.ts';
import { createScratchPgDatabase } from './support/pg-database.ts';
import { freePort } from './support/free-port.ts';
import { GANTRY, waitForHealthy } from './support/gantry-process.ts';

const run = promisify(execFile);

for (const dialect of testDialects()) {
  describe(`gantry CLI and server process [${dialect}]`, () => {
    let dataDir: string;
    let env: NodeJS.ProcessEnv;
    let url: string;
    let server: ChildProcess;
    let logs = '';
    let dropDb: (() => Promise<void>) | null = null;

    before(async () => {
      dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-cli-'));
      const port = await freePort();
      url = `http://127.0.0.1:${port}`;
      env = {
        ...process.env,
        GANTRY_DATA_DIR: dataDir,
        GANTRY_HTTP_ADDR: '127.0.0.1',
        GANTRY_HTTP_PORT: String(port),
        GANTRY_LOG_LEVEL: 'info',
      };
      delete env.GANTRY_DATABASE_URL;
      if (dialect === 'postgres') {
        const scratch = await createScratchPgDatabase(process.env.GANTRY_TEST_PG_URL as string);
        env.GANTRY_DATABASE_URL = scratch.url;
        dropDb = scratch.drop;
      }
      server = spawn(process.execPath, [GANTRY, 'web'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      server.stdout?.on('data', (chunk: Buffer) => (logs += chunk.toString()));
      server.stderr?.on('data', (chunk: Buffer) => (logs += chunk.toString()));
      await waitForHealthy(url, server, () => logs);
    });

    after(async () => {
      if (server.exitCode === null) server.kill('SIGKILL');
      await dropDb?.();
      await fs.rm(dataDir, { recursive: true, force: true });
    });

    test('admin user create and generate-access-token --raw work while the server runs', async () => {
      const created = await run(
        process.execPath,
        [
          GANTRY,
          'admin',
          'user',
          'create',
          '--username',
          'root',
          '--password',
          'p4ss-w0rd',
          '--email',
          'root@example.com',
          '--admin',
          '--must-change-password=false',
        ],
        { env },
      );
      assert.match(created.stdout, /New user 'root' has been successfully created!/);
      const token = await run(
        process.execPath,
        [
          GANTRY,
          'admin',
          'user',
          'generate-access-token',
          '--username',
          'root',
          '--token-name',
          'ci',
          '--scopes',
          'all',
          '--raw',
        ],
        { env },
      );
      assert.match(token.stdout, /^[0-9a-f]{40}\n$/);
      const me = await fetch(`${url}/api/v1/user`, { headers: { authorization: `token ${token.stdout.trim()}` } });
      assert.equal(me.status, 200);
      const body = (await me.json()) as { login: string; is_admin: boolean };
      assert.equal(body.login, 'root');
      assert.equal(body.is_admin, true);
      // The password works for basic auth too: the first user was not forced to change it.
      const basic = await fetch(`${url}/api/v1/user`, {
        headers: { authorization: `Basic ${Buffer.from('root:p4ss-w0rd').toString('base64')}` },
      });
      assert.equal(basic.status, 200);
    });

    test('CLI errors are clear and exit non-zero', async () => {
      await assert.rejects(
        run(
          process.execPath,
          [
            GANTRY,
            'admin',
            'user',
            'create',
            '--username',
            'root',
            '--password',
            'p4ss-w0rd',
            '--email',
            'other@example.com',
          ],
          { env },
        ),
        (error: { code: number; stderr: string }) =>
          error.code === 1 && /user already exists \[name: root\]/.test(error.stderr),
      );
      await assert.rejects(
        run(
          process.execPath,
          [
            GANTRY,
            'admin',
            'user',
            'create',
            '--username',
            'shorty',
            '--password',
            'abc',
            '--email',
            'shorty@example.com',
          ],
          { env },
        ),
        (error: { code: number; stderr: string }) =>
          error.code === 1 && /password is too short: use at least 8 characters/.test(error.stderr),
      );
      await assert.rejects(
        run(process.execPath, [GANTRY, 'admin', 'user', 'generate-access-token', '--username', 'ghost', '--raw'], {
          env,
        }),
        (error: { code: number; stderr: string }) => error.code === 1 && /user does not exist/.test(error.stderr),
      );
      await assert.rejects(
        run(process.execPath, [GANTRY, 'web'], { env: { ...env, GANTRY_HTTP_PORT: 'not-a-port' } }),
        (error: { code: number; stderr: string }) => error.code === 2 && /GANTRY_HTTP_PORT/.test(error.stderr),
      );
    });

    test('migrate reports an up-to-date database; the generated key is private', async () => {
      const migrated = await run(process.execPath, [GANTRY, 'migrate'], { env });
      assert.match(migrated.stdout, /database is up to date/);
      const key = statSync(path.join(dataDir, 'secret.key'));
      assert.equal(key.mode & 0o777, 0o600);
    });

    test('SIGTERM stops gracefully with exit code 0', async () => {
      const exited = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)));
      server.kill('SIGTERM');
      assert.equal(await exited, 0);
      assert.match(logs, /"msg":"stopped"/);
    });
  });
}
