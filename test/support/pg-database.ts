// One fresh database per test (or suite) inside a shared cluster: far cheaper
// than a cluster each, and tests can't see each other's rows.

import { randomBytes } from 'node:crypto';
import pg from 'pg';

export interface ScratchPgDatabase {
  url: string;
  drop(): Promise<void>;
}

async function withAdminClient<T>(adminUrl: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export async function createScratchPgDatabase(adminUrl: string): Promise<ScratchPgDatabase> {
  // Hex only, so the name needs no escaping beyond the quotes.
  const name = `gantry_t_${randomBytes(6).toString('hex')}`;
  await withAdminClient(adminUrl, (client) => client.query(`CREATE DATABASE "${name}"`));

  const url = new URL(adminUrl);
  url.pathname = `/${name}`;

  let dropped = false;
  return {
    url: url.toString(),
    async drop(): Promise<void> {
      if (dropped) return;
      dropped = true;
      // FORCE (PostgreSQL 13+) kicks out connections a test forgot to close.
      await withAdminClient(adminUrl, (client) => client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    },
  };
}
