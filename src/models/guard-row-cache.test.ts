// The repository guard's rows kept between reads answer what a read would: a
// change of the account, the repository or the variable made on this
// connection is seen by the next read, one made by another process from the
// next turn of the event loop. On SQLite a read served from the cache does
// not run the statement.
import { after, before, describe, test } from 'node:test';
import type { TestContext } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { openScratchDatabase } from '../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../test/support/scratch-database.ts';
import { testDialects } from '../../test/support/server.ts';
import { insertVariable } from './action-variables.ts';
import { compiledArrayStatement } from './compiled-statements.ts';
import type { CompiledStatement } from './compiled-statements.ts';
import type { Db } from './database.ts';
import { GuardRowCache } from './guard-row-cache.ts';
import { findOwnerAndRepository, findOwnerRepositoryAndVariable, updateRepository } from './repos.ts';

const NOW = 1_800_000_000;

/** An account `name` with one repository `app` holding `variable` = `value`; the repository's id. */
async function seed(db: Db, name: string, value: string, variable = 'FOO'): Promise<number> {
  const user = await db
    .insertInto('user')
    .values({
      name,
      lower_name: name,
      email: `${name}@example.com`,
      lower_email: `${name}@example.com`,
      created_unix: NOW,
      updated_unix: NOW,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const repo = await db
    .insertInto('repository')
    .values({
      owner_id: user.id,
      owner_name: name,
      name: 'app',
      lower_name: 'app',
      default_branch: 'main',
      created_unix: NOW,
      updated_unix: NOW,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  await insertVariable(db, { ownerId: 0, repoId: repo.id }, variable, value, NOW);
  return repo.id;
}

const VARIABLE_DATA = compiledArrayStatement((db, arg) =>
  db.selectFrom('action_variable').select('data').where('name', '=', arg<string>(0)),
);

/** VARIABLE_DATA, counting the reads that reach the database. */
function countingStatement(): { statement: CompiledStatement<unknown>; reads: () => number } {
  let reads = 0;
  const statement = {
    takeFirst: (db: Db, args: readonly unknown[]) => {
      reads += 1;
      return VARIABLE_DATA.takeFirst(db, args);
    },
  } as unknown as CompiledStatement<unknown>;
  return { statement, reads: () => reads };
}

for (const dialect of testDialects()) {
  describe(`the repository guard's rows between reads [${dialect}]`, () => {
    let scratch: ScratchDatabase;
    before(async () => {
      scratch = await openScratchDatabase(dialect);
    });
    after(async () => {
      await scratch?.drop();
    });

    /** Cases of the kept rows themselves: PostgreSQL keeps none, so they are defined on SQLite only. */
    const onSqlite = (name: string, fn: (t: TestContext) => Promise<void>): void => {
      if (dialect === 'sqlite') test(name, fn);
    };

    test('a change of the variable, the repository or the account is seen by the next read', async () => {
      const { db } = scratch.handle;
      const repoId = await seed(db, 'alice', 'one');
      const read = () => findOwnerRepositoryAndVariable(db, 'alice', 'app', 'FOO');
      assert.equal((await read())?.variable?.data, 'one');
      assert.equal((await read())?.variable?.data, 'one');

      await db.updateTable('action_variable').set({ data: 'two' }).where('repo_id', '=', repoId).execute();
      assert.equal((await read())?.variable?.data, 'two');

      await updateRepository(db, repoId, { isPrivate: true }, NOW);
      assert.equal((await read())?.repo?.isPrivate, true);
      assert.equal((await findOwnerAndRepository(db, 'alice', 'app'))?.repo?.isPrivate, true);

      await updateRepository(db, repoId, { name: 'renamed' }, NOW);
      assert.equal((await read())?.repo, null, 'the old name finds no repository');
      assert.equal((await findOwnerAndRepository(db, 'alice', 'app'))?.repo, null);

      await db.updateTable('user').set({ visibility: 2 }).where('lower_name', '=', 'alice').execute();
      assert.equal((await findOwnerAndRepository(db, 'alice', 'renamed'))?.owner.visibility, 'private');

      await db.deleteFrom('action_variable').where('repo_id', '=', repoId).execute();
      assert.equal((await findOwnerRepositoryAndVariable(db, 'alice', 'renamed', 'FOO'))?.variable, null);
      await insertVariable(db, { ownerId: 0, repoId }, 'FOO', 'three', NOW);
      assert.equal((await findOwnerRepositoryAndVariable(db, 'alice', 'renamed', 'FOO'))?.variable?.data, 'three');
    });

    onSqlite('a change committed by another process is seen once the event loop turns', async () => {
      const { db } = scratch.handle;
      const repoId = await seed(db, 'bob', 'before');
      const read = () => findOwnerRepositoryAndVariable(db, 'bob', 'app', 'FOO');
      assert.equal((await read())?.variable?.data, 'before');
      // Another connection to the file, as `gantry admin` would open.
      const other = new BetterSqlite3(path.join(scratch.dataDir ?? '', 'gantry.db'));
      try {
        other.prepare("update action_variable set data = 'after' where repo_id = ?").run(repoId);
      } finally {
        other.close();
      }
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal((await read())?.variable?.data, 'after');
    });

    onSqlite('on SQLite a repeated read is served without the statement, until a watched table changes', async () => {
      const { db } = scratch.handle;
      const repoId = await seed(db, 'carol', 'kept', 'CAROL');
      const { statement, reads } = countingStatement();
      const cache = new GuardRowCache(statement);
      const data = async (name: string) => ((await cache.takeFirst(db, [name])) as unknown[] | undefined)?.[0];
      assert.equal(await data('CAROL'), 'kept');
      assert.equal(await data('CAROL'), 'kept');
      assert.equal(await data('NONE'), undefined);
      assert.equal(await data('NONE'), undefined, 'an absent row is kept too');
      assert.equal(reads(), 2);

      // A table the counter does not watch leaves the rows in place.
      await db.insertInto('action_run_index').values({ repo_id: repoId, max_index: 1 }).execute();
      assert.equal(await data('CAROL'), 'kept');
      assert.equal(reads(), 2);

      await db.updateTable('action_variable').set({ data: 'moved' }).where('repo_id', '=', repoId).execute();
      assert.equal(await data('CAROL'), 'moved');
      assert.equal(reads(), 3);
      assert.throws(() =>
        ((cache as unknown as { rows: Map<string, unknown[]> }).rows.values().next().value ?? []).push(1),
      );
    });

    onSqlite('inside a transaction, or while one is open, every read runs the statement', async () => {
      const { db } = scratch.handle;
      const { statement, reads } = countingStatement();
      const cache = new GuardRowCache(statement);
      await db.transaction().execute(async (tx) => {
        await cache.takeFirst(tx, ['FOO']);
        await cache.takeFirst(tx, ['FOO']);
      });
      assert.equal(reads(), 2);
      await cache.takeFirst(db, ['FOO']);
      await cache.takeFirst(db, ['FOO']);
      assert.equal(reads(), 3);
    });

    onSqlite('a write committed between the counter and the row is never served as of before it', async () => {
      const { db } = scratch.handle;
      const repoId = await seed(db, 'dave', 'old', 'DAVE');
      let reads = 0;
      // The first read answers a row as of before a write that commits right after the counter was read.
      const racing = {
        takeFirst: async (inner: Db, args: readonly unknown[]) => {
          reads += 1;
          const row = await VARIABLE_DATA.takeFirst(inner, args);
          if (reads === 1)
            await inner.updateTable('action_variable').set({ data: 'new' }).where('repo_id', '=', repoId).execute();
          return row;
        },
      } as unknown as CompiledStatement<unknown>;
      const cache = new GuardRowCache(racing);
      assert.deepEqual(await cache.takeFirst(db, ['DAVE']), ['old']);
      assert.deepEqual(await cache.takeFirst(db, ['DAVE']), ['new']);
      assert.equal(reads, 2);
    });

    onSqlite('at most its bound of entries, the least recently used dropped first', async () => {
      const { db } = scratch.handle;
      const { statement, reads } = countingStatement();
      const cache = new GuardRowCache(statement, 2);
      await cache.takeFirst(db, ['A']);
      await cache.takeFirst(db, ['B']);
      await cache.takeFirst(db, ['A']);
      await cache.takeFirst(db, ['C']);
      assert.equal(reads(), 3);
      await cache.takeFirst(db, ['A']);
      assert.equal(reads(), 3, 'A was used after B, so B went');
      await cache.takeFirst(db, ['B']);
      assert.equal(reads(), 4);
    });
  });
}
