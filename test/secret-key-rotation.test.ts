// `gantry admin rotate-secret-key` against a running server: the CLI runs as a
// separate process (as an operator runs it), the server keeps answering PUT and
// DELETE throughout, an interrupted rotation resumes, and no value is lost.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createCurrentUserRepo, orgCreate } from '@llamaduck/forgejo-ts';
import { startTestServer, testDialects } from './support/server.ts';
import type { TestServer, TestUser } from './support/server.ts';
import { loadConfig } from '../src/config.ts';
import { createDeps } from '../src/deps.ts';
import { CliError } from '../src/cli/cli-error.ts';
import { rotateSecretKey } from '../src/cli/rotate-secret-key.ts';
import { openKeyRing } from '../src/modules/crypto/key-ring.ts';
import { SecretCipher } from '../src/modules/crypto/secret-cipher.ts';
import type { Scope } from '../src/modules/scope.ts';
import { secretAssociatedData } from '../src/services/actions/scope.ts';
import { insertStoredSecrets } from './support/white-box.ts';

const run = promisify(execFile);
const GANTRY = path.resolve('bin/gantry.mjs');

type Label = 'user' | 'org' | 'repo';

for (const dialect of testDialects()) {
  describe(`rotate-secret-key with a running server [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    const keys = new Map<Label, Scope>();
    const base: Record<Label, string> = {
      user: '/user/actions',
      org: '/orgs/acme/actions',
      repo: '/repos/alice/app/actions',
    };
    /** What every secret must decrypt to: `${label}/${NAME}` → value. */
    const expected = new Map<string, string>();
    const db = () => s.server.deps.database.db;

    const cliEnv = (): NodeJS.ProcessEnv => {
      const env: NodeJS.ProcessEnv = { ...process.env, GANTRY_DATA_DIR: s.dataDir, GANTRY_LOG_LEVEL: 'warn' };
      delete env.GANTRY_DATABASE_URL;
      delete env.GANTRY_SECRET_KEY;
      delete env.GANTRY_SECRET_KEY_PREVIOUS;
      if (s.server.deps.config.databaseUrl) env.GANTRY_DATABASE_URL = s.server.deps.config.databaseUrl;
      return env;
    };
    const cli = async (...args: string[]): Promise<string> => {
      const { stdout } = await run(process.execPath, [GANTRY, 'admin', 'rotate-secret-key', ...args], {
        env: cliEnv(),
      });
      return stdout;
    };
    /** The CLI as a background process whose output can be watched while it runs. */
    const cliInBackground = (...args: string[]) => {
      const child = spawn(process.execPath, [GANTRY, 'admin', 'rotate-secret-key', ...args], {
        env: cliEnv(),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      let exited = false;
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
      const done = new Promise<string>((resolve, reject) =>
        child.on('close', (code) => {
          exited = true;
          if (code === 0) resolve(out);
          else reject(new Error(`rotate-secret-key exited with ${code}: ${err}${out}`));
        }),
      );
      return { done, output: () => out, exited: () => exited };
    };
    const put = async (label: Label, name: string, value: string): Promise<number> => {
      const res = await s.api('PUT', `${base[label]}/secrets/${name}`, { token: alice.token, body: { data: value } });
      if (res.status === 201 || res.status === 204) expected.set(`${label}/${name}`, value);
      return res.status;
    };
    const del = async (label: Label, name: string): Promise<number> => {
      const res = await s.api('DELETE', `${base[label]}/secrets/${name}`, { token: alice.token });
      if (res.status === 204) expected.delete(`${label}/${name}`);
      return res.status;
    };
    const prefixCounts = async (): Promise<Map<string, number>> => {
      const counts = new Map<string, number>();
      for (const row of await db().selectFrom('secret').select('data').execute()) {
        const id = SecretCipher.keyIdOf(row.data) as string;
        counts.set(id, (counts.get(id) ?? 0) + 1);
      }
      return counts;
    };
    /** Every expected value decrypts, through the running server's service; nothing else is stored. */
    const assertAllValues = async () => {
      for (const [where, value] of expected) {
        const [label, name] = where.split('/') as [Label, string];
        assert.equal(await s.server.deps.services.secrets.readValue(keys.get(label)!, name), value, where);
      }
      const rows = await db().selectFrom('secret').select('id').execute();
      assert.equal(rows.length, expected.size);
    };

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      assert.equal((await orgCreate({ client: alice.client, body: { username: 'acme' } })).status, 201);
      const repo = await createCurrentUserRepo({ client: alice.client, body: { name: 'app' } });
      const org = await s.server.deps.services.accounts.findByName('acme');
      keys.set('user', { kind: 'user', ownerId: alice.user.id, repoId: 0 });
      keys.set('org', { kind: 'org', ownerId: org!.id, repoId: 0 });
      keys.set('repo', { kind: 'repo', ownerId: 0, repoId: repo.data!.id!, repoOwnerId: alice.user.id });
      for (const label of ['user', 'org', 'repo'] as const) {
        for (let i = 0; i < 10; i += 1)
          assert.equal(await put(label, `SEED_${i}`, `${label}-seed-${i}\nmultiline dàtä`), 201);
      }
    });
    after(async () => {
      await s.stop();
    });

    let firstKey = '';
    let secondKey = '';

    test('an interrupted rotation (two batches) leaves a mix of keys, and every value still decrypts', async () => {
      firstKey = s.server.deps.services.keys.currentKeyId();
      assert.deepEqual([...(await prefixCounts())], [[firstKey, 30]]);
      const out = await cli('--batch-size', '5', '--max-batches', '2');
      const created = /created key ([0-9a-f]{8}) \((.+)\)/.exec(out);
      assert.ok(created, out);
      secondKey = created[1] as string;
      assert.notEqual(secondKey, firstKey);
      assert.match(out, /re-encrypting 30 secret\(s\) with key/);
      assert.match(out, /re-encrypted 5\/30\n/);
      assert.match(out, /re-encrypted 10\/30\n/);
      assert.match(out, /stopped: 20 secret\(s\) still use older keys/);
      const keyFile = path.join(s.dataDir, 'secret-keys', `${secondKey}.key`);
      assert.equal(created[2], keyFile);
      assert.equal(statSync(keyFile).mode & 0o777, 0o600);
      assert.equal(readFileSync(path.join(s.dataDir, 'secret-keys', 'current'), 'utf8').trim(), secondKey);
      assert.ok(existsSync(path.join(s.dataDir, 'secret.key')), 'the old key stays');
      const counts = await prefixCounts();
      assert.equal(counts.get(secondKey), 10);
      assert.equal(counts.get(firstKey), 20);
      await assertAllValues();
    });

    test('the server switched to the new key by itself: PUT and DELETE keep working', async () => {
      assert.equal(s.server.deps.services.keys.currentKeyId(), secondKey);
      assert.equal(await put('org', 'AFTER_SWITCH', 'new-value'), 201);
      assert.equal(await put('repo', 'SEED_9', 'replaced'), 204, 'a value still under the old key is replaced');
      assert.equal(await del('user', 'SEED_8'), 204);
      const rows = await db()
        .selectFrom('secret')
        .select(['name', 'data'])
        .where('name', 'in', ['AFTER_SWITCH', 'SEED_9'])
        .where('repo_id', 'in', [0, keys.get('repo')!.repoId])
        .execute();
      for (const row of rows.filter((r) => r.name === 'AFTER_SWITCH' || r.data.includes(secondKey)))
        assert.equal(SecretCipher.keyIdOf(row.data), secondKey);
      await assertAllValues();
    });

    test('--resume finishes the rotation while the server serves PUT and DELETE concurrently', async () => {
      // Many values still under the first key, so the rotation runs long enough to overlap with traffic.
      const firstCipher = new SecretCipher(readFileSync(path.join(s.dataDir, 'secret.key'), 'utf8').trim());
      const org = keys.get('org')!;
      const bulk = Array.from({ length: 300 }, (_, i) => ({ name: `BULK_${i}`, value: `bulk-${i}` }));
      // Stored under the first key, as before the rotation began: the API would encrypt them under the current one.
      await insertStoredSecrets(
        db(),
        bulk.map((b) => ({
          key: { ownerId: org.ownerId, repoId: 0 },
          name: b.name,
          data: firstCipher.encrypt(b.value, secretAssociatedData(org.ownerId, 0, b.name)),
        })),
      );
      for (const b of bulk) expected.set(`org/${b.name}`, b.value);
      const rotation = cliInBackground('--resume', '--batch-size', '1');
      const statuses: number[] = [];
      let duringRotation = 0;
      for (let i = 0; !rotation.exited(); i += 1) {
        const active = /re-encrypting/.test(rotation.output());
        const label = (['user', 'org', 'repo'] as const)[i % 3] as Label;
        // Rewrites of values still under the old key race with their compare-and-swap.
        if (i % 5 === 4) statuses.push(await del(label, `SEED_${i % 10}`));
        else if (i % 3 === 0) statuses.push(await put('org', `BULK_${(i * 7) % 300}`, `live-${i}`));
        else statuses.push(await put(label, i % 2 ? `LIVE_${i % 40}` : `SEED_${i % 10}`, `live-${i}`));
        if (active && !rotation.exited()) duringRotation += 1;
      }
      const out = await rotation.done;
      assert.ok(
        statuses.every((x) => [201, 204, 404].includes(x)),
        statuses.join(','),
      );
      assert.ok(duringRotation > 0, 'requests were served while the rotation ran');
      assert.ok(!/created key/.test(out), 'resume makes no new key');
      assert.match(
        out,
        new RegExp(`done: \\d+ secret\\(s\\) re-encrypted; every secret is now encrypted with key ${secondKey}`),
      );
      assert.deepEqual([...(await prefixCounts()).keys()], [secondKey]);
      await assertAllValues();
      assert.match(await cli('--resume'), /every secret is already encrypted with the current key/);
    });

    test('a new rotation with --prune: everything under a third key, unused key files removed, values intact after a restart', async () => {
      const out = await cli('--prune');
      const thirdKey = (/created key ([0-9a-f]{8})/.exec(out) as RegExpExecArray)[1] as string;
      assert.match(out, new RegExp(`removed unused key ${firstKey} \\(.*secret\\.key\\)`));
      assert.match(out, new RegExp(`removed unused key ${secondKey} `));
      assert.ok(!existsSync(path.join(s.dataDir, 'secret.key')));
      assert.deepEqual(readdirSync(path.join(s.dataDir, 'secret-keys')).sort(), [`${thirdKey}.key`, 'current'].sort());
      assert.deepEqual([...(await prefixCounts()).keys()], [thirdKey]);
      await assertAllValues();
      assert.equal(await put('user', 'AFTER_PRUNE', 'v'), 201);
      // A restarted server reads the ring from the folder alone.
      const { ring } = openKeyRing({ dataDir: s.dataDir, configuredKey: null, previousKeys: [] });
      assert.equal(ring.currentKeyId(), thirdKey);
      for (const row of await db().selectFrom('secret').selectAll().execute()) {
        const label = row.repo_id !== 0 ? 'repo' : row.owner_id === alice.user.id ? 'user' : 'org';
        assert.equal(
          ring.decrypt(row.data, secretAssociatedData(row.owner_id, row.repo_id, row.name)),
          expected.get(`${label}/${row.name}`),
        );
      }
    });
  });
}

describe('rotate-secret-key with GANTRY_SECRET_KEY [sqlite]', () => {
  let dataDir: string;
  before(async () => {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-envkey-'));
  });
  after(async () => {
    await fs.rm(dataDir, { recursive: true, force: true });
  });
  const keyA = 'a'.repeat(20) + 'A'.repeat(20);
  const keyB = 'b'.repeat(20) + 'B'.repeat(20);
  const configWith = (env: Record<string, string>) =>
    loadConfig({ GANTRY_DATA_DIR: dataDir, GANTRY_LOG_LEVEL: 'silent', ...env });
  const scope: Scope = { kind: 'user', ownerId: 1, repoId: 0 };

  test('nothing to do: says what to set; writes no key file', async () => {
    const deps = await createDeps(configWith({ GANTRY_SECRET_KEY: keyA }));
    try {
      for (let i = 0; i < 7; i += 1) await deps.services.secrets.createOrUpdate(scope, `S${i}`, `value-${i}`);
    } finally {
      await deps.close();
    }
    const lines: string[] = [];
    const result = await rotateSecretKey(configWith({ GANTRY_SECRET_KEY: keyA }), { print: (l) => lines.push(l) });
    assert.equal(result.newKeyId, null);
    assert.equal(result.reencrypted, 0);
    const text = lines.join('\n');
    assert.match(text, /every secret is already encrypted with the current key/);
    assert.match(text, /set GANTRY_SECRET_KEY to a new key .* and GANTRY_SECRET_KEY_PREVIOUS to the old one/);
    assert.deepEqual(
      readdirSync(dataDir).filter((f) => f.includes('key')),
      [],
    );
  });

  test('a new configured key with the old one as previous: everything is re-encrypted; without it, nothing is touched', async () => {
    const lost = await rotateSecretKey(configWith({ GANTRY_SECRET_KEY: keyB }), { print: () => {} }).then(
      () => null,
      (error: unknown) => error,
    );
    assert.ok(lost instanceof CliError, 'values under an unknown key are reported, not destroyed');
    assert.match(lost.message, /7 secret\(s\) could not be decrypted/);

    const lines: string[] = [];
    const result = await rotateSecretKey(configWith({ GANTRY_SECRET_KEY: keyB, GANTRY_SECRET_KEY_PREVIOUS: keyA }), {
      print: (l) => lines.push(l),
      batchSize: 2,
    });
    assert.equal(result.reencrypted, 7);
    assert.equal(result.remaining, 0);
    assert.ok(lines.includes('re-encrypted 7/7'), lines.join('\n'));
    const deps = await createDeps(configWith({ GANTRY_SECRET_KEY: keyB }));
    try {
      for (let i = 0; i < 7; i += 1) assert.equal(await deps.services.secrets.readValue(scope, `S${i}`), `value-${i}`);
    } finally {
      await deps.close();
    }
  });
});
