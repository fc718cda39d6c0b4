// Self-check of the PostgreSQL test harness: if this fails, every
// PostgreSQL-backed test result is suspect.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { createScratchPgDatabase } from './support/pg-database.ts';

const adminUrl = process.env.GANTRY_TEST_PG_URL;
const databases = process.env.GANTRY_TEST_DATABASES;
// An explicit SQLite-only run (--sqlite-only) opts out knowingly; under CI a
// merely missing URL must fail, or PostgreSQL coverage would vanish silently.
const postgresOptedOut = databases !== undefined && !databases.split(',').includes('postgres');
const skip =
  adminUrl === undefined && (postgresOptedOut || process.env.CI !== 'true')
    ? 'GANTRY_TEST_PG_URL is not set (no PostgreSQL to test against)'
    : false;

async function databaseExists(url: string, name: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const result = await client.query('select 1 from pg_database where datname = $1', [name]);
    return result.rowCount === 1;
  } finally {
    await client.end();
  }
}

test('createScratchPgDatabase creates a usable database and drop() removes it', { skip }, async () => {
  assert.ok(adminUrl, 'GANTRY_TEST_PG_URL must be set when CI=true (run through scripts/run-tests.ts)');

  const scratch = await createScratchPgDatabase(adminUrl);
  const name = new URL(scratch.url).pathname.slice(1);
  assert.match(name, /^gantry_t_[0-9a-f]{12}$/);

  try {
    const client = new pg.Client({ connectionString: scratch.url });
    await client.connect();
    try {
      const result = await client.query<{ one: number; db: string }>('select 1 as one, current_database() as db');
      assert.deepEqual(result.rows, [{ one: 1, db: name }]);
    } finally {
      await client.end();
    }
    assert.equal(await databaseExists(adminUrl, name), true);
  } finally {
    await scratch.drop();
  }

  assert.equal(await databaseExists(adminUrl, name), false);
  await scratch.drop(); // idempotent
});
