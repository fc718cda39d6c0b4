// A SQLite server never loads pg (database.ts loads it for a PostgreSQL URL
// only): checked in a child process, since this one may have it loaded.
// PostgreSQL itself is covered by every test run against it.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const CHILD = `
import { createRequire } from 'node:module';
const { openDatabase, migrateToLatest } = await import('./src/models/database.ts');
const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes('/node_modules/pg/'));
const handle = openDatabase({ databaseUrl: null, dataDir: process.env.DATA_DIR });
const { applied } = await migrateToLatest(handle.db);
await handle.destroy();
console.log(JSON.stringify({ migrated: applied.length > 0, pgLoaded: loaded() }));
`;

test('a SQLite database opens and migrates without loading pg', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gantry-pg-loading-'));
  t.after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', CHILD],
    { cwd: ROOT, env: { ...process.env, DATA_DIR: dataDir } },
  );
  assert.deepEqual(JSON.parse(stdout.trim().split('\n').at(-1) ?? ''), { migrated: true, pgLoaded: false });
});
