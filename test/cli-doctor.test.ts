// `gantry doctor` as an operator runs it: a real process against a real data
// folder and database, its lines, its exit code and its JSON. Each scenario is
// a state an installation really gets into: freshly installed and running, a
// lost key file, an upgrade not yet migrated, a folder it may not write, a
// wrong database password.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess, ExecFileOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { testDialects } from './support/server.ts';
import { createScratchPgDatabase } from './support/pg-database.ts';
import { freePort } from './support/free-port.ts';
import { GANTRY, waitForHealthy } from './support/gantry-process.ts';

// Doctor's own deadline per check; the machine may be busy with other suites.
const CHECK_TIMEOUT = ['--timeout', '60'];

interface DoctorRun {
  code: number;
  stdout: string;
  stderr: string;
}

interface JsonReport {
  ok: boolean;
  summary: { ok: number; warn: number; fail: number; skip: number };
  checks: { check: string; status: 'ok' | 'warn' | 'fail' | 'skip'; found: string; fix?: string }[];
}

function doctor(env: NodeJS.ProcessEnv, args: string[] = [], options: ExecFileOptions = {}): Promise<DoctorRun> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [GANTRY, 'doctor', ...CHECK_TIMEOUT, ...args],
      { env, timeout: 240_000, ...options },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : (error as { code?: unknown }).code;
        if (typeof code !== 'number') return reject(error ?? new Error('doctor did not exit'));
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
  });
}

/** The line of one check: "<status>  <check>  <found> → <fix>". */
function lineOf(output: string, check: string): string {
  const line = output.split('\n').find((l) => new RegExp(`^(ok|warn|FAIL|skip)\\s+${check}\\s{2}`).test(l));
  assert.ok(line, `no line for check "${check}" in:\n${output}`);
  return line;
}

async function run(env: NodeJS.ProcessEnv, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [GANTRY, ...args], { env }, (error, stdout, stderr) =>
      error ? reject(new Error(`${args.join(' ')}: ${stderr}`)) : resolve(String(stdout)),
    );
  });
}

interface Installation {
  dataDir: string;
  env: NodeJS.ProcessEnv;
  /** PostgreSQL only: the scratch database's URL. */
  databaseUrl: string | null;
  remove(): Promise<void>;
}

async function newInstallation(dialect: string): Promise<Installation> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-doctor-'));
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    GANTRY_DATA_DIR: dataDir,
    GANTRY_HTTP_ADDR: '127.0.0.1',
    GANTRY_HTTP_PORT: String(port),
    GANTRY_LOG_LEVEL: 'warn',
  };
  delete env.GANTRY_DATABASE_URL;
  delete env.GANTRY_SECRET_KEY;
  delete env.GANTRY_SECRET_KEY_PREVIOUS;
  delete env.GANTRY_ROOT_URL;
  let drop: (() => Promise<void>) | null = null;
  if (dialect === 'postgres') {
    const scratch = await createScratchPgDatabase(process.env.GANTRY_TEST_PG_URL as string);
    env.GANTRY_DATABASE_URL = scratch.url;
    drop = scratch.drop;
  }
  return {
    dataDir,
    env,
    databaseUrl: env.GANTRY_DATABASE_URL ?? null,
    remove: async () => {
      await drop?.();
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}

for (const dialect of testDialects()) {
  describe(`gantry doctor [${dialect}]`, () => {
    describe('an installation that is set up and running', () => {
      let install: Installation;
      let server: ChildProcess;
      let logs = '';
      const secretValue = `s3cret-${randomBytes(8).toString('hex')}`;

      before(async () => {
        install = await newInstallation(dialect);
        const url = `http://127.0.0.1:${install.env.GANTRY_HTTP_PORT}`;
        server = spawn(process.execPath, [GANTRY, 'web'], { env: install.env, stdio: ['ignore', 'pipe', 'pipe'] });
        server.stdout?.on('data', (chunk: Buffer) => (logs += chunk.toString()));
        server.stderr?.on('data', (chunk: Buffer) => (logs += chunk.toString()));
        await waitForHealthy(url, server, () => logs);
      });

      after(async () => {
        if (server.exitCode === null) server.kill('SIGKILL');
        await install.remove();
      });

      test('every check is ok and the exit code is 0; --json gives the same results', async () => {
        const result = await doctor(install.env);
        assert.equal(result.code, 0, result.stdout + result.stderr);
        const lines = result.stdout.split('\n').filter((l) => /^(ok|warn|FAIL|skip)\s/.test(l));
        const names = [
          'configuration',
          'data folder',
          'disk space',
          'key file permissions',
          'data permissions',
          'repositories folder',
          'database',
          'migrations',
          'git',
          'git init',
          'secret key',
          'encrypted values',
          'http port',
          'root url',
        ];
        for (const name of names) lineOf(result.stdout, name);
        for (const line of lines) {
          // Disk space depends on the machine running the tests, not on Gantry.
          if (/^warn\s+disk space/.test(line)) continue;
          assert.match(line, /^ok\s/, `not ok:\n${result.stdout}`);
        }
        assert.match(lineOf(result.stdout, 'http port'), /served by a running Gantry \(healthy\)/);
        assert.match(lineOf(result.stdout, 'migrations'), /all \d+ migrations applied/);
        if (dialect === 'sqlite') {
          assert.match(lineOf(result.stdout, 'sqlite integrity'), /integrity_check: ok/);
          assert.match(lineOf(result.stdout, 'sqlite journal mode'), /^ok\s+sqlite journal mode\s+WAL/);
        } else {
          assert.match(lineOf(result.stdout, 'postgresql version'), /^ok\s+postgresql version\s+PostgreSQL \d+/);
        }

        const json = await doctor(install.env, ['--json']);
        assert.equal(json.code, 0);
        const report = JSON.parse(json.stdout) as JsonReport;
        assert.equal(report.ok, true);
        assert.equal(report.summary.fail, 0);
        assert.deepEqual(
          report.checks.map((c) => c.check).filter((name) => names.includes(name)),
          names,
        );
        assert.equal(report.checks.find((c) => c.check === 'database')?.status, 'ok');
      });

      test('a lost key file with secrets stored: FAIL with what to restore, exit 1; the old key in GANTRY_SECRET_KEY_PREVIOUS makes them readable again', async () => {
        await run(install.env, [
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
        ]);
        const token = (
          await run(install.env, ['admin', 'user', 'generate-access-token', '--username', 'root', '--raw'])
        ).trim();
        const base = `http://127.0.0.1:${install.env.GANTRY_HTTP_PORT}/api/v1`;
        const headers = { authorization: `token ${token}`, 'content-type': 'application/json' };
        const put = await fetch(`${base}/user/actions/secrets/DEPLOY_KEY`, {
          method: 'PUT',
          headers,
          body: JSON.stringify({ data: secretValue }),
        });
        assert.ok(put.status === 201 || put.status === 204, `PUT secret: ${put.status}`);
        const registration = await fetch(`${base}/user/actions/runners/registration-token`, { headers });
        assert.equal(registration.status, 200);

        const healthy = await doctor(install.env);
        assert.equal(healthy.code, 0, healthy.stdout);
        assert.match(
          lineOf(healthy.stdout, 'encrypted values'),
          /^ok\s+encrypted values\s+2 stored value\(s\) under the current key [0-9a-f]{8}; sampled 2, all decrypt/,
        );

        const exitCode = new Promise<number | null>((resolve) => server.once('exit', (code) => resolve(code)));
        server.kill('SIGTERM');
        assert.equal(await exitCode, 0);

        const keyFile = path.join(install.dataDir, 'secret.key');
        const keyMaterial = (await fs.readFile(keyFile, 'utf8')).trim();
        await fs.rename(keyFile, `${keyFile}.lost`);

        const lost = await doctor(install.env);
        assert.equal(lost.code, 1, lost.stdout);
        assert.match(
          lineOf(lost.stdout, 'secret key'),
          /^FAIL\s+secret key\s+no key: GANTRY_SECRET_KEY is unset .* but 2 stored value\(s\) are encrypted with key\(s\) [0-9a-f]{8} → restore secret\.key and secret-keys\/ from the backup/,
        );
        assert.match(
          lineOf(lost.stdout, 'encrypted values'),
          /^FAIL\s+encrypted values\s+2 of 2 stored value\(s\) are encrypted with key\(s\) [0-9a-f]{8}, which no configured key or key file holds → .*GANTRY_SECRET_KEY_PREVIOUS/,
        );
        // Doctor generated no key in its place.
        assert.equal(existsSync(keyFile), false);
        assert.doesNotMatch(
          lost.stdout + lost.stderr,
          new RegExp(`${secretValue}|${keyMaterial.replace(/[+/=]/g, '\\$&')}`),
        );

        // Following the advice: the old key as GANTRY_SECRET_KEY_PREVIOUS decrypts them; doctor now only asks for a rotation.
        const withPrevious = await doctor({ ...install.env, GANTRY_SECRET_KEY_PREVIOUS: keyMaterial });
        assert.equal(withPrevious.code, 0, withPrevious.stdout);
        assert.match(
          lineOf(withPrevious.stdout, 'encrypted values'),
          /^warn\s+encrypted values\s+2 of 2 stored value\(s\) still use older key\(s\) .*→ run `gantry admin rotate-secret-key --resume`/,
        );
        assert.ok(!withPrevious.stdout.includes(keyMaterial), 'the key never appears in the output');
        await fs.rename(`${keyFile}.lost`, keyFile);
      });

      test('a key file readable by other users: a warning that says chmod 600', async () => {
        const keyFile = path.join(install.dataDir, 'secret.key');
        await fs.chmod(keyFile, 0o644);
        const result = await doctor(install.env);
        assert.match(
          lineOf(result.stdout, 'key file permissions'),
          new RegExp(
            `^warn\\s+key file permissions\\s+readable by other users: ${keyFile} \\(0644\\) → chmod 600 ${keyFile}`,
          ),
        );
        await fs.chmod(keyFile, 0o600);
      });

      test('a data folder or database open to other users (as older versions created them): a warning that says chmod -R go-rwx', async () => {
        const dir = install.dataDir;
        const db = path.join(dir, 'gantry.db');
        const opened = dialect === 'sqlite' ? [dir, db] : [dir];
        await fs.chmod(dir, 0o755);
        if (dialect === 'sqlite') await fs.chmod(db, 0o644);
        try {
          const result = await doctor(install.env);
          const line = lineOf(result.stdout, 'data permissions');
          assert.match(line, /^warn\s+data permissions\s+open to other users: /);
          for (const file of opened) assert.ok(line.includes(`${file} (${file === dir ? '0755' : '0644'})`), line);
          assert.ok(line.includes(`→ chmod -R go-rwx ${dir};`), line);
          assert.equal(result.code, 0, 'a warning, not a failure');
        } finally {
          await fs.chmod(dir, 0o700);
          if (dialect === 'sqlite') await fs.chmod(db, 0o600);
        }
        assert.match(lineOf((await doctor(install.env)).stdout, 'data permissions'), /^ok\s+data permissions\s/);
      });
    });

    test('pending migrations: says to run gantry migrate and migrates nothing', async () => {
      const install = await newInstallation(dialect);
      try {
        const result = await doctor(install.env);
        assert.equal(result.code, 0, result.stdout);
        assert.match(
          lineOf(result.stdout, 'migrations'),
          /^warn\s+migrations\s+(\d+) of \1 migration\(s\) not applied: 0001-accounts, .*\(doctor applied none\) → back up the database, then run `gantry migrate`/,
        );
        assert.match(lineOf(result.stdout, 'encrypted values'), /^skip\s/);
        if (install.databaseUrl === null) {
          assert.match(
            lineOf(result.stdout, 'database'),
            /^warn\s+database\s+no SQLite database yet at .*gantry\.db → run `gantry migrate`/,
          );
          assert.equal(existsSync(path.join(install.dataDir, 'gantry.db')), false, 'doctor created no database file');
        } else {
          assert.match(lineOf(result.stdout, 'database'), /^ok\s+database\s+connected to PostgreSQL at postgres:\/\//);
          const client = new pg.Client({ connectionString: install.databaseUrl });
          await client.connect();
          try {
            const tables = await client.query(
              "select count(*)::int as n from information_schema.tables where table_schema = 'public'",
            );
            assert.equal(tables.rows[0].n, 0, 'doctor created no table');
          } finally {
            await client.end();
          }
        }
        // What doctor advises works, and then the warning is gone.
        await run(install.env, ['migrate']);
        const after = await doctor(install.env);
        assert.match(lineOf(after.stdout, 'migrations'), /^ok\s+migrations\s+all \d+ migrations applied/);
      } finally {
        await install.remove();
      }
    });

    test('a data folder the user cannot write to: FAIL with the fix, exit 1', async () => {
      const install = await newInstallation(dialect);
      try {
        const options: ExecFileOptions = {};
        if (process.getuid?.() === 0) {
          // chmod does not stop root: run doctor as an unprivileged user instead, on a folder root owns.
          await fs.chmod(install.dataDir, 0o555);
          options.uid = 65534;
          options.gid = 65534;
        } else {
          await fs.chmod(install.dataDir, 0o500);
        }
        const result = await doctor(install.env, [], options);
        assert.equal(result.code, 1, result.stdout + result.stderr);
        assert.match(
          lineOf(result.stdout, 'data folder'),
          new RegExp(
            `^FAIL\\s+data folder\\s+cannot write in ${install.dataDir}: EACCES.* → make it writable by the user running Gantry`,
          ),
        );
      } finally {
        await fs.chmod(install.dataDir, 0o700);
        await install.remove();
      }
    });
  });
}

test('an invalid setting: FAIL naming the variable and the fix, exit 1; git is still checked', async () => {
  const result = await doctor({ ...process.env, GANTRY_HTTP_PORT: 'eighty' });
  assert.equal(result.code, 1);
  assert.match(
    lineOf(result.stdout, 'configuration'),
    /^FAIL\s+configuration\s+invalid configuration: GANTRY_HTTP_PORT: must be a whole number, got "eighty" → set GANTRY_HTTP_PORT to a valid value/,
  );
  assert.match(lineOf(result.stdout, 'git'), /^ok\s+git\s+git version \d+\.\d+/);
});

const pgAdminUrl = process.env.GANTRY_TEST_PG_URL;

describe(
  'gantry doctor with a wrong PostgreSQL password',
  { skip: testDialects().includes('postgres') && pgAdminUrl ? false : 'PostgreSQL is not part of this run' },
  () => {
    // The test cluster trusts every local connection, which accepts any password. For one
    // scratch database and one role, pg_hba.conf asks for a password (first matching line wins).
    let hbaFile = '';
    let hbaBefore = '';
    let skipReason: string | false = false;
    const role = `doctor_${randomBytes(4).toString('hex')}`;
    const rightPassword = `right-${randomBytes(8).toString('hex')}`;
    let dropDatabase: (() => Promise<void>) | null = null;
    let databaseUrl = '';

    async function admin<T>(query: (client: pg.Client) => Promise<T>): Promise<T> {
      const client = new pg.Client({ connectionString: pgAdminUrl });
      await client.connect();
      try {
        return await query(client);
      } finally {
        await client.end();
      }
    }

    before(async () => {
      const scratch = await createScratchPgDatabase(pgAdminUrl as string);
      dropDatabase = scratch.drop;
      databaseUrl = scratch.url;
      const database = new URL(scratch.url).pathname.slice(1);
      hbaFile = await admin(
        async (c) => (await c.query<{ hba_file: string }>('show hba_file')).rows[0]?.hba_file ?? '',
      );
      try {
        hbaBefore = await fs.readFile(hbaFile, 'utf8');
        await fs.access(hbaFile, fs.constants.W_OK);
      } catch {
        skipReason = `the cluster's pg_hba.conf (${hbaFile}) is not writable here`;
        return;
      }
      await admin((c) => c.query(`create role ${role} login password '${rightPassword}'`));
      await fs.writeFile(hbaFile, `host ${database} ${role} 127.0.0.1/32 md5\n${hbaBefore}`);
      await admin((c) => c.query('select pg_reload_conf()'));
      // The reload is asynchronous: wait until the right password is needed.
      const wrong = new URL(databaseUrl);
      wrong.username = role;
      wrong.password = 'not-the-password';
      const deadline = Date.now() + 30_000;
      for (;;) {
        const client = new pg.Client({ connectionString: wrong.href });
        const refused = await client.connect().then(
          async () => {
            await client.end();
            return false;
          },
          () => true,
        );
        if (refused) break;
        if (Date.now() > deadline) throw new Error('pg_hba.conf change did not take effect');
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    });

    after(async () => {
      if (hbaBefore !== '') {
        await fs.writeFile(hbaFile, hbaBefore);
        await admin((c) => c.query('select pg_reload_conf()'));
      }
      await dropDatabase?.();
      await admin((c) => c.query(`drop role if exists ${role}`)).catch(() => {});
    });

    test('FAIL on the database, exit 1, and the password appears nowhere in the output', async (t) => {
      if (skipReason) return t.skip(skipReason);
      const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-doctor-'));
      try {
        const url = new URL(databaseUrl);
        url.username = role;
        const wrongPassword = `Wr0ng-${randomBytes(8).toString('hex')}`;
        url.password = wrongPassword;
        const env: NodeJS.ProcessEnv = {
          ...process.env,
          GANTRY_DATA_DIR: dataDir,
          GANTRY_DATABASE_URL: url.href,
          GANTRY_HTTP_PORT: String(await freePort()),
        };
        delete env.GANTRY_SECRET_KEY;
        for (const args of [[], ['--json']]) {
          const result = await doctor(env, args);
          assert.equal(result.code, 1, result.stdout);
          assert.ok(
            !(result.stdout + result.stderr).includes(wrongPassword),
            `the password leaked:\n${result.stdout}${result.stderr}`,
          );
          if (args.length === 0) {
            assert.match(
              lineOf(result.stdout, 'database'),
              new RegExp(
                `^FAIL\\s+database\\s+cannot open postgres://${role}@127\\.0\\.0\\.1:\\d+/\\w+: password authentication failed for user "${role}" \\(28P01\\) → check GANTRY_DATABASE_URL`,
              ),
            );
            assert.match(lineOf(result.stdout, 'migrations'), /^skip\s/);
          } else {
            const report = JSON.parse(result.stdout) as JsonReport;
            assert.equal(report.checks.find((c) => c.check === 'database')?.status, 'fail');
          }
        }
      } finally {
        await fs.rm(dataDir, { recursive: true, force: true });
      }
    });
  },
);
