// Git over HTTP as a user meets it: clone and push with the system git client,
// credentials prompted for (401 + WWW-Authenticate), access rules enforced.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createCurrentUserRepo, repoAddCollaborator, repoEdit } from '@llamaduck/forgejo-ts';
import { startTestServer, testDialects } from './support/server.ts';
import type { TestServer, TestUser } from './support/server.ts';
import { createWorkDir, remoteUrl } from './support/workdir.ts';
import type { WorkDir } from './support/workdir.ts';

for (const dialect of testDialects()) {
  describe(`git over HTTP [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let bob: TestUser;
    let work: WorkDir;
    const scratch: WorkDir[] = [];

    const cloneAs = async (
      credentials: { user: string; password: string } | undefined,
      repo = 'secret',
      extra: string[] = [],
    ) => {
      const dir = await createWorkDir(remoteUrl(s.url, 'alice', repo, credentials));
      scratch.push(dir);
      return dir.git([...extra, 'fetch', '-q', 'origin'], { allowFailure: true });
    };

    before(async () => {
      s = await startTestServer(dialect);
      alice = await s.createUser('alice');
      bob = await s.createUser('bob');
      assert.equal(
        (await createCurrentUserRepo({ client: alice.client, body: { name: 'secret', private: true } })).status,
        201,
      );
      assert.equal(
        (await createCurrentUserRepo({ client: alice.client, body: { name: 'open', auto_init: true } })).status,
        201,
      );
      work = await createWorkDir(remoteUrl(s.url, 'alice', 'secret', { user: 'alice', password: alice.password }));
      await work.commit({ 'a.txt': 'hello\n' }, 'First');
      const pushed = await work.push('main');
      assert.equal(pushed.code, 0, pushed.stderr);
    });

    after(async () => {
      for (const dir of [work, ...scratch]) await dir.remove();
      await s.stop();
    });

    test('info/refs asks anonymous clients of a private repository for credentials', async () => {
      const res = await fetch(`${s.url}/alice/secret.git/info/refs?service=git-upload-pack`);
      assert.equal(res.status, 401);
      assert.match(res.headers.get('www-authenticate') ?? '', /^Basic realm=/);
      const wrong = await fetch(`${s.url}/alice/secret.git/info/refs?service=git-upload-pack`, {
        headers: { authorization: `Basic ${Buffer.from('alice:wrong').toString('base64')}` },
      });
      assert.equal(wrong.status, 401);
    });

    test('clone with a password, with a token, over protocol v2 and v0', async () => {
      assert.equal((await cloneAs({ user: 'alice', password: alice.password })).code, 0);
      assert.equal(
        (await cloneAs({ user: 'anything', password: alice.token }, 'secret', ['-c', 'protocol.version=2'])).code,
        0,
      );
      assert.equal(
        (await cloneAs({ user: 'alice', password: alice.token }, 'secret', ['-c', 'protocol.version=0'])).code,
        0,
      );
    });

    test('anonymous clone of a public repository works; of a private one fails asking for credentials', async () => {
      assert.equal((await cloneAs(undefined, 'open')).code, 0);
      const refused = await cloneAs(undefined, 'secret');
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /could not read Username|Authentication failed/);
    });

    test('a user without access gets 404; a reader can clone but not push', async () => {
      const res = await fetch(`${s.url}/alice/secret.git/info/refs?service=git-upload-pack`, {
        headers: { authorization: `token ${bob.token}`.replace('token ', 'Basic ') },
      });
      assert.equal(res.status, 401, 'a malformed basic credential is a challenge');
      const denied = await cloneAs({ user: 'bob', password: bob.token });
      assert.notEqual(denied.code, 0);
      assert.match(denied.stderr, /not found/i);
      assert.equal(
        (
          await repoAddCollaborator({
            client: alice.client,
            path: { owner: 'alice', repo: 'secret', collaborator: 'bob' },
            body: { permission: 'read' },
          })
        ).status,
        204,
      );
      const bobWork = await createWorkDir(remoteUrl(s.url, 'alice', 'secret', { user: 'bob', password: bob.token }));
      scratch.push(bobWork);
      assert.equal((await bobWork.git(['fetch', '-q', 'origin'])).code, 0);
      await bobWork.git(['checkout', '-q', '-b', 'main', 'origin/main']);
      await bobWork.commit({ 'b.txt': 'bob\n' }, 'Bob');
      const push = await bobWork.push('main');
      assert.notEqual(push.code, 0);
      assert.match(push.stderr, /may not push/);
    });

    test('a read-only token cannot push', async () => {
      const readOnly = await s.tokenFor(alice, ['read:repository']);
      const dir = await createWorkDir(remoteUrl(s.url, 'alice', 'secret', { user: 'alice', password: readOnly }));
      scratch.push(dir);
      assert.equal((await dir.git(['fetch', '-q', 'origin'])).code, 0);
      await dir.git(['checkout', '-q', '-b', 'main', 'origin/main']);
      await dir.commit({ 'c.txt': 'c\n' }, 'C');
      const push = await dir.push('main');
      assert.notEqual(push.code, 0);
      assert.match(push.stderr, /write:repository/);
    });

    test('a push to an archived repository is refused with a message saying so', async () => {
      assert.equal(
        (await repoEdit({ client: alice.client, path: { owner: 'alice', repo: 'secret' }, body: { archived: true } }))
          .status,
        200,
      );
      await work.commit({ 'd.txt': 'd\n' }, 'D');
      const push = await work.push('main');
      assert.notEqual(push.code, 0);
      assert.match(push.stderr, /archived/);
      assert.equal(
        (await repoEdit({ client: alice.client, path: { owner: 'alice', repo: 'secret' }, body: { archived: false } }))
          .status,
        200,
      );
      assert.equal((await work.push('main')).code, 0);
    });

    test('what was pushed is what a fresh clone gets', async () => {
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-clone-'));
      try {
        const clone = await createWorkDir(
          remoteUrl(s.url, 'alice', 'secret', { user: 'alice', password: alice.token }),
        );
        scratch.push(clone);
        await clone.git(['fetch', '-q', 'origin', 'main']);
        const remoteHead = (await clone.git(['rev-parse', 'FETCH_HEAD'])).stdout.trim();
        assert.equal(remoteHead, await work.head());
      } finally {
        await fs.rm(dir, { recursive: true, force: true });
      }
    });
  });
}
