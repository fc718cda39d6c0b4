// What Gantry writes to its data folder is private to the user running it,
// whatever umask the process inherited: the folder and every folder under it
// 0700, every file 0600 (git's read-only objects 0400) — the SQLite database
// with its -wal and -shm, the generated key, git repositories, Actions logs.
// The server is started with umask 000, the loosest an operator can leave,
// on a data folder that does not exist yet. On every database.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createCurrentUserRepo, dispatchWorkflow, repoGetRunnerRegistrationToken } from '@llamaduck/forgejo-ts';
import type { Task } from '../../src/gen/runner/v1/messages_pb.ts';
import { decodeTask, registerRunner } from '../support/runner-client.ts';
import { startTestServer, testDialects } from '../support/server.ts';
import type { TestServer, TestUser } from '../support/server.ts';
import { createWorkDir, remoteUrl } from '../support/workdir.ts';

/** Every folder and file under `root` (itself included) with its permission bits. */
async function walk(root: string): Promise<Array<{ file: string; dir: boolean; mode: number }>> {
  const out: Array<{ file: string; dir: boolean; mode: number }> = [];
  const visit = async (file: string): Promise<void> => {
    const stat = await fs.lstat(file);
    out.push({ file, dir: stat.isDirectory(), mode: stat.mode & 0o777 });
    if (stat.isDirectory()) for (const name of await fs.readdir(file)) await visit(path.join(file, name));
  };
  await visit(root);
  return out;
}

const octal = (mode: number): string => mode.toString(8).padStart(4, '0');

for (const dialect of testDialects()) {
  describe(`data folder permissions [${dialect}]`, () => {
    let s: TestServer;
    let alice: TestUser;
    let parent: string;
    let dataDir: string;
    let umaskBefore: number;

    before(async () => {
      umaskBefore = process.umask(0o000);
      parent = await fs.mkdtemp(path.join(os.tmpdir(), 'gantry-modes-'));
      await fs.chmod(parent, 0o755);
      // Not there yet: Gantry creates it.
      dataDir = path.join(parent, 'data');
      s = await startTestServer(dialect, { GANTRY_DATA_DIR: dataDir });
      alice = await s.createUser('alice');
    });
    after(async () => {
      await s?.stop();
      await fs.rm(parent, { recursive: true, force: true });
      process.umask(umaskBefore);
    });

    test('after a push, a run and a finished task log, nothing in the data folder is open to group or others (folders 0700, files 0600 or 0400)', async () => {
      assert.equal(
        (
          await createCurrentUserRepo({
            client: alice.client,
            body: { name: 'app', auto_init: true, default_branch: 'main' },
          })
        ).status,
        201,
      );
      const work = await createWorkDir(remoteUrl(s.url, 'alice', 'app', { user: 'alice', password: alice.token }));
      try {
        await work.git(['pull', '-q', 'origin', 'main']);
        await work.commit(
          {
            '.forgejo/workflows/ci.yml':
              'on: workflow_dispatch\njobs:\n  build:\n    runs-on: modes\n    steps:\n      - run: echo hi\n',
          },
          'ci',
        );
        assert.equal((await work.push('main')).code, 0);
      } finally {
        await work.remove();
      }
      const registration = await repoGetRunnerRegistrationToken({
        client: alice.client,
        path: { owner: 'alice', repo: 'app' },
      });
      const runner = await registerRunner(s.url, (registration.data as { token: string }).token, { labels: ['modes'] });
      const dispatched = await dispatchWorkflow({
        client: alice.client,
        path: { owner: 'alice', repo: 'app', workflowfilename: 'ci.yml' },
        body: { ref: 'main', inputs: {} },
      });
      assert.equal(dispatched.status, 204, JSON.stringify(dispatched.error));
      const fetched = await runner.runner.fetchTask({ tasksVersion: 0n });
      assert.ok(fetched.task, 'a task');
      const task = decodeTask(fetched.task as Task);
      const time = { seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 };
      await runner.runner.updateLog({
        taskId: BigInt(task.id),
        index: 0n,
        rows: [{ time, content: 'hi' }],
        noMore: false,
      });
      await runner.runner.updateLog({ taskId: BigInt(task.id), index: 1n, rows: [], noMore: true });

      const entries = await walk(dataDir);
      const names = entries.map((e) => path.relative(dataDir, e.file));
      // What the walk must have seen, so that a missing file cannot pass for a private one.
      for (const expected of ['secret.key', 'git', 'actions_log'])
        assert.ok(names.includes(expected), `${expected} in ${names.join(', ')}`);
      if (dialect === 'sqlite')
        for (const expected of ['gantry.db', 'gantry.db-wal', 'gantry.db-shm'])
          assert.ok(names.includes(expected), expected);
      assert.ok(
        names.some((n) => n.endsWith('.git/HEAD')),
        'a git repository',
      );
      assert.ok(
        names.some((n) => n.includes('/objects/pack/') || /\/objects\/[0-9a-f]{2}\//.test(n)),
        'git objects',
      );
      assert.ok(
        entries.some((e) => !e.dir && path.relative(dataDir, e.file).startsWith('actions_log/')),
        'a log file',
      );

      const open = entries
        .filter((e) => (e.mode & 0o077) !== 0)
        .map((e) => `${path.relative(parent, e.file)} ${octal(e.mode)}`);
      assert.deepEqual(open, [], 'readable, writable or searchable by group or others');
      const stat = (name: string) => entries.find((e) => e.file === path.join(dataDir, name))?.mode;
      assert.equal(octal(stat('') ?? 0), '0700', 'the data folder');
      assert.equal(octal(stat('secret.key') ?? 0), '0600');
      if (dialect === 'sqlite')
        for (const name of ['gantry.db', 'gantry.db-wal', 'gantry.db-shm'])
          assert.equal(octal(stat(name) ?? 0), '0600', name);
    });
  });
}
