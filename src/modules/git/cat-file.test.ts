import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initBareRepository } from './bare-repository.ts';
import { CatFileError, CatFilePool, CatFileProcess, ObjectTooLargeError } from './cat-file.ts';
import { runGit } from './run-git.ts';
import { fixtureGit } from './test-fixtures.ts';

const git = (gitDir: string, args: string[], input?: Buffer | string): Promise<string> =>
  fixtureGit(gitDir, args, input);

async function writeBlob(gitDir: string, content: Buffer | string): Promise<string> {
  return git(gitDir, ['hash-object', '-w', '--no-filters', '--stdin'], content);
}

/** A commit whose tree holds one file; returns its id. */
async function commitFile(gitDir: string, name: string, content: string, parents: string[] = []): Promise<string> {
  const blob = await writeBlob(gitDir, content);
  const tree = await git(gitDir, ['mktree', '-z'], `100644 blob ${blob}\t${name}\0`);
  return git(gitDir, ['commit-tree', tree, ...parents.flatMap((p) => ['-p', p]), '-m', `add ${name}`]);
}

/** Children of this process still running git (Linux /proc); [] where /proc is absent. */
function gitChildren(): number[] {
  if (!existsSync('/proc/self/stat')) return [];
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid …: comm may contain spaces, so split after the last ')'.
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === process.pid && comm === 'git') pids.push(Number(entry));
    } catch {
      // Exited while we looked.
    }
  }
  return pids;
}

describe('cat-file', () => {
  let scratch = '';
  let repo = '';
  let first = '';
  let readmeBlob = '';

  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'gantry-cat-file-'));
    repo = join(scratch, 'repo.git');
    await initBareRepository(repo, { defaultBranch: 'main' });
    first = await commitFile(repo, 'README.md', '# hello\n');
    readmeBlob = await git(repo, ['rev-parse', `${first}:README.md`]);
    await git(repo, ['update-ref', 'refs/heads/main', first]);
  });
  after(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  describe('CatFileProcess', () => {
    it('reads objects of every type, byte for byte', async () => {
      const proc = new CatFileProcess(repo);
      try {
        // Every byte value, newlines, and text that looks like protocol.
        const binary = Buffer.concat([
          Buffer.from(Array.from({ length: 256 }, (_, i) => i)),
          Buffer.from('\nx missing\n0 blob 5\n'),
        ]);
        const binaryOid = await writeBlob(repo, binary);
        const emptyOid = await writeBlob(repo, '');
        await git(repo, ['tag', '-a', '-m', 'release', 'v1', first]);

        const blob = await proc.read(binaryOid);
        assert.deepEqual(blob && { ...blob, content: Buffer.compare(blob.content, binary) }, {
          oid: binaryOid,
          type: 'blob',
          size: binary.length,
          content: 0,
        });
        assert.deepEqual(await proc.read(emptyOid), { oid: emptyOid, type: 'blob', size: 0, content: Buffer.alloc(0) });

        const commit = await proc.read('refs/heads/main');
        assert.equal(commit?.type, 'commit');
        assert.equal(commit?.oid, first);
        assert.equal(
          commit?.content.toString('utf8'),
          (await runGit(['cat-file', 'commit', first], { gitDir: repo })).toString('utf8'),
        );

        const tree = await proc.read(`${first}^{tree}`);
        assert.equal(tree?.type, 'tree');
        assert.equal(tree?.content.subarray(0, 17).toString('latin1'), '100644 README.md\0');

        const tag = await proc.read('refs/tags/v1');
        assert.equal(tag?.type, 'tag');
        assert.match(tag?.content.toString('utf8') ?? '', new RegExp(`^object ${first}\ntype commit\ntag v1\n`));

        const info = await proc.readInfo(readmeBlob);
        assert.deepEqual(info, { oid: readmeBlob, type: 'blob', size: 8 });
      } finally {
        await proc.close();
      }
    });

    it('answers missing and ambiguous names with null', async () => {
      // Two blobs whose ids share their first 4 hex digits, found by hashing locally.
      const seen = new Map<string, string>();
      let pair: [string, string] | null = null;
      for (let i = 0; pair === null; i++) {
        const content = `collide ${i}\n`;
        const prefix = createHash('sha1')
          .update(`blob ${Buffer.byteLength(content)}\0${content}`)
          .digest('hex')
          .slice(0, 4);
        const other = seen.get(prefix);
        if (other !== undefined) pair = [other, content];
        else seen.set(prefix, content);
      }
      const a = await writeBlob(repo, pair[0]);
      await writeBlob(repo, pair[1]);

      const proc = new CatFileProcess(repo);
      try {
        assert.equal(await proc.read('0'.repeat(40)), null);
        assert.equal(await proc.read('refs/heads/nope'), null);
        assert.equal(await proc.read('a name with spaces'), null);
        assert.equal(await proc.read(a.slice(0, 4)), null, 'ambiguous');
        assert.equal((await proc.read(a))?.oid, a, 'the process is still in step');
      } finally {
        await proc.close();
      }
    });

    it('pipelines many requests and answers each in order', async () => {
      const contents = Array.from({ length: 300 }, (_, i) => `file number ${i}\n`.repeat(i % 7));
      const oids = await Promise.all(contents.map((c) => writeBlob(repo, c)));
      const proc = new CatFileProcess(repo);
      try {
        const names = oids.flatMap((oid, i) => (i % 10 === 0 ? [oid, 'refs/heads/missing'] : [oid]));
        const results = await Promise.all(names.map((name) => proc.read(name)));
        let next = 0;
        for (const [i, name] of names.entries()) {
          if (name === 'refs/heads/missing') {
            assert.equal(results[i], null);
            continue;
          }
          assert.equal(results[i]?.oid, oids[next]);
          assert.equal(results[i]?.content.toString('utf8'), contents[next]);
          next += 1;
        }
      } finally {
        await proc.close();
      }
    });

    it('streams a big object and enforces maxSize without losing step', async () => {
      const big = randomBytes(24 * 1024 * 1024);
      const bigOid = await writeBlob(repo, big);
      const proc = new CatFileProcess(repo);
      try {
        const [object, readme] = await Promise.all([proc.read(bigOid), proc.read(readmeBlob)]);
        assert.equal(object?.size, big.length);
        assert.ok(object !== null && object.content.equals(big));
        assert.equal(readme?.content.toString('utf8'), '# hello\n');

        await assert.rejects(proc.read(bigOid, { maxSize: 1024 }), (err: unknown) => {
          assert.ok(err instanceof ObjectTooLargeError);
          assert.deepEqual(err.object, { oid: bigOid, type: 'blob', size: big.length });
          return true;
        });
        assert.equal((await proc.read(readmeBlob))?.content.toString('utf8'), '# hello\n');
      } finally {
        await proc.close();
      }
    });

    it('refuses names that would break the line protocol', async () => {
      const proc = new CatFileProcess(repo);
      try {
        for (const bad of ['', 'a\nb', 'HEAD\n', 'x\r', 'a\0b']) {
          await assert.rejects(proc.read(bad), TypeError);
        }
        assert.equal(proc.pending, 0);
        assert.equal((await proc.read(readmeBlob))?.oid, readmeBlob);
      } finally {
        await proc.close();
      }
    });

    it('rejects pending requests when git dies, then respawns', async () => {
      const proc = new CatFileProcess(repo);
      try {
        assert.equal((await proc.read(readmeBlob))?.oid, readmeBlob);
        // Relative path syntax makes cat-file exit in a bare repository.
        const killer = proc.read(`${first}:./README.md`);
        const behind = proc.read(readmeBlob);
        await assert.rejects(
          killer,
          (err: unknown) =>
            err instanceof CatFileError && /exited with code 128: fatal: relative path syntax/.test(err.message),
        );
        await assert.rejects(behind, CatFileError);
        assert.equal((await proc.read(readmeBlob))?.oid, readmeBlob);
      } finally {
        await proc.close();
      }
    });

    it('times out a request git never answers, then respawns', async (t) => {
      // A loose object that is a FIFO: git blocks opening it, forever.
      const stuck = 'ab'.padEnd(40, 'c');
      const dir = join(repo, 'objects', 'ab');
      await mkdir(dir, { recursive: true });
      try {
        execFileSync('mkfifo', [join(dir, stuck.slice(2))]);
      } catch {
        t.skip('mkfifo not available');
        return;
      }
      const proc = new CatFileProcess(repo, { requestTimeoutMs: 200 });
      try {
        const started = Date.now();
        const hung = proc.read(stuck);
        const behind = proc.read(readmeBlob);
        await assert.rejects(hung, /no answer for "abc+" within 200 ms/);
        await assert.rejects(behind, CatFileError);
        assert.ok(Date.now() - started < 5000);
        assert.equal((await proc.read(readmeBlob))?.oid, readmeBlob);
      } finally {
        await proc.close();
        await rm(join(dir, stuck.slice(2)), { force: true });
      }
    });

    it('fails clearly on a path that is not a repository', async () => {
      const proc = new CatFileProcess(join(scratch, 'nothing-here'));
      try {
        await assert.rejects(proc.read('HEAD'), /cat-file --batch .*nothing-here.*not a git repository/);
        await assert.rejects(proc.objectFormat(), /not a git repository/);
      } finally {
        await proc.close();
      }
    });

    // The question a long-lived process raises: does it see what was written after it started?
    it('sees commits, moved and packed refs, new tags and new packs written after it started', async () => {
      const fresh = join(scratch, 'fresh.git');
      await initBareRepository(fresh, { defaultBranch: 'main' });
      const c1 = await commitFile(fresh, 'a', '1');
      await git(fresh, ['update-ref', 'refs/heads/main', c1]);
      const proc = new CatFileProcess(fresh);
      try {
        assert.equal((await proc.read('refs/heads/main'))?.oid, c1);
        assert.equal(await proc.read('refs/tags/v1'), null);

        // A new commit (loose objects) and the branch moved onto it.
        const c2 = await commitFile(fresh, 'b', '2', [c1]);
        await git(fresh, ['update-ref', 'refs/heads/main', c2]);
        assert.equal((await proc.read('refs/heads/main'))?.oid, c2);
        assert.equal((await proc.read('refs/heads/main^{commit}'))?.oid, c2);
        assert.equal((await proc.read(c2.slice(0, 10)))?.oid, c2, 'abbreviation of an object written later');

        // A new annotated tag, peeled.
        await git(fresh, ['tag', '-a', '-m', 'one', 'v1', c2]);
        assert.equal((await proc.read('refs/tags/v1^{commit}'))?.oid, c2);

        // Refs moved into packed-refs, then one moved again while packed.
        await git(fresh, ['pack-refs', '--all']);
        assert.equal((await proc.read('refs/heads/main'))?.oid, c2);
        const c3 = await commitFile(fresh, 'c', '3', [c2]);
        await git(fresh, ['update-ref', 'refs/heads/main', c3]);
        await git(fresh, ['pack-refs', '--all']);
        assert.equal((await proc.read('refs/heads/main'))?.oid, c3);

        // Everything repacked and the loose copies pruned.
        await git(fresh, ['gc', '--quiet', '--prune=now']);
        assert.equal((await proc.read('refs/heads/main'))?.oid, c3);
        assert.equal((await proc.read(`${c1}:a`))?.content.toString('utf8'), '1');

        // Objects that arrive only as a new pack, as a big push delivers them.
        const other = join(scratch, 'other.git');
        await initBareRepository(other, { defaultBranch: 'main' });
        const c4 = await commitFile(other, 'd', '4');
        await git(other, ['update-ref', 'refs/heads/side', c4]);
        await runGit(['-c', 'fetch.unpackLimit=1', 'fetch', '--quiet', other, 'refs/heads/side:refs/heads/side'], {
          gitDir: fresh,
        });
        assert.equal(existsSync(join(fresh, 'objects', c4.slice(0, 2), c4.slice(2))), false, 'arrived packed');
        assert.equal((await proc.read('refs/heads/side'))?.oid, c4);
        assert.equal((await proc.read(`${c4}:d`))?.content.toString('utf8'), '4');

        // A deleted branch is gone at once.
        await git(fresh, ['update-ref', '-d', 'refs/heads/side']);
        assert.equal(await proc.read('refs/heads/side'), null);
      } finally {
        await proc.close();
      }
    });

    it('ignores replace refs', async () => {
      const c1 = await commitFile(repo, 'x', 'original');
      const c2 = await commitFile(repo, 'x', 'replacement');
      await git(repo, ['update-ref', `refs/replace/${c1}`, c2]);
      const proc = new CatFileProcess(repo);
      try {
        assert.equal((await proc.read(`${c1}:x`))?.content.toString('utf8'), 'original');
      } finally {
        await proc.close();
        await git(repo, ['update-ref', '-d', `refs/replace/${c1}`]);
      }
    });

    it('reports the object format once', async () => {
      const sha256 = join(scratch, 'sha256.git');
      await initBareRepository(sha256, { defaultBranch: 'main', objectFormat: 'sha256' });
      const a = new CatFileProcess(sha256);
      const b = new CatFileProcess(repo);
      assert.equal(await a.objectFormat(), 'sha256');
      assert.equal(await b.objectFormat(), 'sha1');
      const c = await commitFile(sha256, 'f', 'x');
      assert.equal((await a.read(c))?.oid, c);
      assert.equal(c.length, 64);
      await Promise.all([a.close(), b.close()]);
    });

    it('measures throughput on small objects', async (t) => {
      const proc = new CatFileProcess(repo);
      try {
        await proc.read(readmeBlob);
        const n = 20_000;
        let start = performance.now();
        for (let i = 0; i < 2_000; i++) await proc.read(readmeBlob);
        const sequential = 2_000 / ((performance.now() - start) / 1000);
        start = performance.now();
        const window = 64;
        for (let i = 0; i < n; i += window) {
          await Promise.all(Array.from({ length: window }, () => proc.read(readmeBlob)));
        }
        const pipelined = n / ((performance.now() - start) / 1000);
        t.diagnostic(
          `one process: ${Math.round(sequential)} reads/s one at a time, ${Math.round(pipelined)} reads/s with ${window} in flight`,
        );
        assert.ok(sequential > 500, `sequential ${sequential}`);
      } finally {
        await proc.close();
      }
    });
  });

  describe('CatFilePool', () => {
    it('keeps at most maxProcesses, reuses them, and evicts the least recently used idle one', async () => {
      const repos = await Promise.all(
        ['p1', 'p2', 'p3'].map(async (name) => {
          const dir = join(scratch, `${name}.git`);
          await initBareRepository(dir, { defaultBranch: 'main' });
          const commit = await commitFile(dir, 'f', name);
          await git(dir, ['update-ref', 'refs/heads/main', commit]);
          return { dir, commit };
        }),
      );
      const pool = new CatFilePool({ maxProcesses: 2 });
      try {
        const [r1, r2, r3] = repos as [(typeof repos)[0], (typeof repos)[0], (typeof repos)[0]];
        assert.equal((await pool.readObject(r1.dir, 'refs/heads/main'))?.oid, r1.commit);
        assert.equal((await pool.readObject(r2.dir, 'refs/heads/main'))?.oid, r2.commit);
        assert.equal((await pool.readObject(r1.dir, 'refs/heads/main'))?.oid, r1.commit);
        assert.equal(gitChildren().length <= 2, true);
        // r2 is the least recently used: r3 takes its place.
        assert.equal((await pool.readObject(r3.dir, 'HEAD'))?.oid, r3.commit);
        assert.equal(pool.size, 2);
        assert.equal(
          (await pool.readObjectInfo(join(r1.dir, '.'), 'HEAD'))?.oid,
          r1.commit,
          'same repository, other spelling',
        );
        assert.equal(pool.size, 2);

        // All busy: a third repository waits for a free slot instead of exceeding the cap.
        const many = await Promise.all([
          ...Array.from({ length: 50 }, () => pool.readObject(r1.dir, 'HEAD')),
          ...Array.from({ length: 50 }, () => pool.readObject(r3.dir, 'HEAD')),
          pool.readObject(r2.dir, 'HEAD'),
        ]);
        assert.equal(many.at(-1)?.oid, r2.commit);
        assert.equal(pool.size, 2);
        assert.ok(gitChildren().length <= 3, 'an evicted child may still be exiting');
      } finally {
        await pool.close();
      }
      assert.deepEqual(gitChildren(), []);
    });

    it('forgets a repository on evict and follows it to a new one at the same path', async () => {
      const dir = join(scratch, 'evict.git');
      await initBareRepository(dir, { defaultBranch: 'main' });
      const c1 = await commitFile(dir, 'f', 'one');
      await git(dir, ['update-ref', 'refs/heads/main', c1]);
      const pool = new CatFilePool();
      try {
        assert.equal((await pool.readObject(dir, 'HEAD'))?.oid, c1);
        await pool.evict(dir);
        assert.equal(pool.size, 0);
        await rm(dir, { recursive: true });
        await initBareRepository(dir, { defaultBranch: 'main', objectFormat: 'sha256' });
        assert.equal(await pool.objectFormat(dir), 'sha256');
        assert.equal(await pool.readObject(dir, 'HEAD'), null);
      } finally {
        await pool.close();
      }
    });

    it('ends idle processes after the idle timeout', async () => {
      const pool = new CatFilePool({ idleTimeoutMs: 50 });
      try {
        await pool.readObject(repo, readmeBlob);
        assert.equal(pool.size, 1);
        await new Promise((r) => setTimeout(r, 200));
        assert.equal(pool.size, 0);
        assert.equal((await pool.readObject(repo, readmeBlob))?.oid, readmeBlob);
      } finally {
        await pool.close();
      }
    });

    it('close kills every child, rejects what was pending and refuses new reads', async () => {
      const pool = new CatFilePool();
      await pool.readObject(repo, readmeBlob);
      // Written just before the kill: answered in time or rejected, it settles either way.
      const pending = pool.readObject(repo, readmeBlob).catch((err: unknown) => err);
      await pool.close();
      const outcome = await pending;
      assert.ok(outcome instanceof CatFileError || (outcome as { oid?: string }).oid === readmeBlob);
      await assert.rejects(pool.readObject(repo, readmeBlob), /pool is closed/);
      assert.deepEqual(gitChildren(), []);
    });
  });
});
