// The reads whose rows come back as arrays (the repository guard's owner and
// repository, a variable by name) answer on each dialect exactly what the
// plain reads of the same rows answer, every column in its place, also when a
// connection without array rows runs them (the rows come back as objects).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Kysely, SqliteDialect } from 'kysely';
import BetterSqlite3 from 'better-sqlite3';
import { openScratchDatabase } from '../../test/support/scratch-database.ts';
import type { ScratchDatabase } from '../../test/support/scratch-database.ts';
import { testDialects } from '../../test/support/server.ts';
import { insertVariable } from './action-variables.ts';
import { valuesOf } from './array-rows.ts';
import { compiledArrayStatement } from './compiled-statements.ts';
import type { Database } from './tables.ts';
import {
  REPOSITORY_COLUMNS,
  findOwnerAndRepository,
  findOwnerRepositoryAndVariable,
  findRepository,
  insertRepository,
  repositoryRowFromValues,
  updateRepository,
} from './repos.ts';
import type { Repository } from './repos.ts';
import { SCOPED_VALUE_COLUMNS, findScopedValue, scopedValueRowFromValues } from './scoped-values.ts';
import { USER_COLUMNS, findAccountByName, insertAccount, userRowFromValues } from './users.ts';
import type { User } from './users.ts';

/** What the repository guards read of an account and a repository (AccountAccess, RepositoryAccess). */
function accessOf(owner: User, repo: Repository | null) {
  return {
    owner: { id: owner.id, name: owner.name, isOrganization: owner.isOrganization, visibility: owner.visibility },
    repo:
      repo === null
        ? null
        : {
            id: repo.id,
            ownerId: repo.ownerId,
            name: repo.name,
            isPrivate: repo.isPrivate,
            isArchived: repo.isArchived,
            units: repo.units,
          },
  };
}

const NOW = 1_800_000_000;

const NAME_AND_DATA = compiledArrayStatement((db, arg) =>
  db.selectFrom('action_variable').select(['name', 'data', 'repo_id']).where('repo_id', '=', arg<number>(0)),
);

test('each row builder reads its column list in order: column i is value i', () => {
  const lists = [
    [USER_COLUMNS, userRowFromValues],
    [REPOSITORY_COLUMNS, repositoryRowFromValues],
    [SCOPED_VALUE_COLUMNS, scopedValueRowFromValues],
  ] as const;
  for (const [columns, build] of lists) {
    // The names as their own values, two places in: each key must get its own name.
    const row = build(['', '', ...columns], 2);
    assert.deepEqual(
      Object.entries(row),
      columns.map((column) => [column, column]),
    );
  }
});

test('valuesOf: an array row as it is, an object row as its values in column order', () => {
  const row = ['a', 1, null];
  assert.equal(valuesOf(row), row);
  assert.deepEqual(valuesOf({ x: 'a', y: 1, z: null }), ['a', 1, null]);
});

for (const dialect of testDialects()) {
  describe(`rows read as arrays [${dialect}]`, () => {
    let scratch: ScratchDatabase;

    before(async () => {
      scratch = await openScratchDatabase(dialect);
    });

    after(async () => {
      await scratch?.drop();
    });

    test("a statement marked for array rows reads them as arrays, in its columns' order, prepared or not", async () => {
      const { db } = scratch.handle;
      await insertVariable(db, { ownerId: 0, repoId: 4241 }, 'ORDER_VAR', 'v', NOW);
      // Enough runs for PostgreSQL to prepare the text (pg-prepared.ts).
      for (let run = 0; run < 4; run += 1) {
        const { rows } = await NAME_AND_DATA.execute(db, [4241]);
        assert.deepEqual(rows, [['ORDER_VAR', 'v', 4241]]);
      }
    });

    test('owner and repository: every column as the plain reads answer it; null parts stay null', async () => {
      const { db } = scratch.handle;
      await insertAccount(db, {
        name: 'Array-Owner',
        fullName: 'Array Owner',
        email: 'array-owner@example.invalid',
        isOrganization: false,
        visibility: 'limited',
        restricted: true,
        description: 'd',
        website: 'https://example.invalid',
        location: 'l',
        nowSec: NOW,
      });
      const owner = await findAccountByName(db, 'array-owner');
      assert.ok(owner);
      await insertRepository(db, {
        ownerId: owner.id,
        ownerName: owner.name,
        name: 'Array-Repo',
        description: 'a repository',
        defaultBranch: 'trunk',
        objectFormatName: 'sha256',
        isPrivate: true,
        isTemplate: true,
        nowSec: NOW + 1,
      });
      const repo = await findRepository(db, owner.id, 'array-repo');
      assert.ok(repo);

      assert.deepEqual(await findOwnerAndRepository(db, 'ARRAY-OWNER', 'Array-repo'), { owner, repo });
      assert.deepEqual(await findOwnerAndRepository(db, 'array-owner', 'no-such-repo'), { owner, repo: null });
      assert.equal(await findOwnerAndRepository(db, 'no-such-owner', 'array-repo'), null);
    });

    test("the variable GET's guard row: the account's and repository's access fields as the plain reads answer them, and the variable", async () => {
      const { db } = scratch.handle;
      for (const [index, visibility] of (['public', 'limited', 'private'] as const).entries()) {
        const org = await insertAccount(db, {
          name: `Access-Org-${index}`,
          isOrganization: true,
          visibility,
          nowSec: NOW,
        });
        await insertRepository(db, {
          ownerId: org.id,
          ownerName: org.name,
          name: 'Access-Repo',
          description: '',
          defaultBranch: 'main',
          objectFormatName: 'sha1',
          isPrivate: index !== 0,
          isTemplate: false,
          nowSec: NOW,
        });
        const stored = await findRepository(db, org.id, 'access-repo');
        assert.ok(stored);
        // Units on and off in a pattern per account, and archived once: each field from its own column.
        await updateRepository(
          db,
          stored.id,
          {
            isArchived: index === 1,
            units: { issues: index === 0, wiki: index === 1, actions: index !== 2, packages: index === 2 },
          },
          NOW + 1,
        );
        const owner = await findAccountByName(db, `access-org-${index}`);
        const repo = await findRepository(db, org.id, 'access-repo');
        assert.ok(owner && repo);
        const variable = await insertVariable(db, { ownerId: 0, repoId: repo.id }, 'ACCESS_VAR', `v${index}`, NOW);

        assert.deepEqual(
          await findOwnerRepositoryAndVariable(db, owner.name.toUpperCase(), 'ACCESS-repo', 'ACCESS_VAR'),
          {
            ...accessOf(owner, repo),
            variable,
          },
        );
        assert.deepEqual(await findOwnerRepositoryAndVariable(db, owner.name, 'access-repo', 'OTHER_VAR'), {
          ...accessOf(owner, repo),
          variable: null,
        });
        assert.deepEqual(await findOwnerRepositoryAndVariable(db, owner.name, 'no-such-repo', 'ACCESS_VAR'), {
          ...accessOf(owner, null),
          variable: null,
        });
      }
      assert.equal(await findOwnerRepositoryAndVariable(db, 'no-such-owner', 'access-repo', 'ACCESS_VAR'), null);
    });

    test('a variable by name: every column as inserted', async () => {
      const { db } = scratch.handle;
      const inserted = await insertVariable(db, { ownerId: 0, repoId: 4242 }, 'ARRAY_VAR', 'the value', NOW);
      assert.deepEqual(
        await findScopedValue(db, 'action_variable', { ownerId: 0, repoId: 4242 }, 'ARRAY_VAR'),
        inserted,
      );
      assert.equal(await findScopedValue(db, 'action_variable', { ownerId: 0, repoId: 4243 }, 'ARRAY_VAR'), null);
    });
  });
}

test('on a SQLite connection without array rows, the same reads answer the same', async () => {
  const scratch = await openScratchDatabase('sqlite');
  try {
    const { db, sqlitePath } = scratch.handle;
    const inserted = await insertVariable(db, { ownerId: 0, repoId: 7 }, 'PLAIN_VAR', 'plain', NOW);
    const owner = await insertAccount(db, { name: 'plain-owner', isOrganization: false, nowSec: NOW });
    const plain = new Kysely<Database>({
      dialect: new SqliteDialect({ database: new BetterSqlite3(sqlitePath as string) }),
    });
    try {
      assert.deepEqual(
        await findScopedValue(plain, 'action_variable', { ownerId: 0, repoId: 7 }, 'PLAIN_VAR'),
        inserted,
      );
      assert.deepEqual(await findOwnerAndRepository(plain, 'plain-owner', 'none'), { owner, repo: null });
    } finally {
      await plain.destroy();
    }
  } finally {
    await scratch.drop();
  }
});
