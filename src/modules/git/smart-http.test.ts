// Drives the smart HTTP module with the real git client through a tiny
// node:http server that routes exactly as the Fastify routes will.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { once } from 'node:events';
import { pipeline } from 'node:stream/promises';
import { randomBytes } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { initBareRepository } from './bare-repository.ts';
import { ensureHooks, parseRefUpdates, type RefUpdate } from './receive-hooks.ts';
import { GitCommandError } from './run-git.ts';
import {
  UnsupportedContentEncodingError,
  advertiseRefs,
  decodeRequestBody,
  parseGitService,
  rpcRequestContentType,
  serviceRpc,
  type GitResponse,
} from './smart-http.ts';

const ZERO = '0'.repeat(40);

interface Seen {
  method: string;
  path: string;
  repo: string;
  /** From the query for info/refs, from the path for POSTs. */
  service: string | null;
  gitProtocol: string | undefined;
  contentEncoding: string | undefined;
  chunked: boolean;
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function pkt(payload: string): string {
  return (payload.length + 4).toString(16).padStart(4, '0') + payload;
}

describe('smart HTTP', { timeout: 180_000 }, () => {
  let scratch = '';
  let reposDir = '';
  let hooksDir = '';
  let home = '';
  let server: Server;
  let base = '';
  const seen: Seen[] = [];
  // receive-pack `updates` per repository, in completion order.
  const updatesByRepo = new Map<string, RefUpdate[][]>();
  let pending: Promise<unknown>[] = [];

  async function settled(): Promise<void> {
    const now = pending;
    pending = [];
    await Promise.all(now);
  }

  async function respond(res: ServerResponse, r: GitResponse): Promise<void> {
    try {
      await r.started;
    } catch {
      res.writeHead(500, { 'Content-Type': 'text/plain' }).end('git failed\n');
      return;
    }
    res.writeHead(200, { 'Content-Type': r.contentType, 'Cache-Control': 'no-cache' });
    await pipeline(r.body, res).catch(() => {});
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const m = /^\/([a-z0-9-]+)\.git\/(info\/refs|git-upload-pack|git-receive-pack)$/.exec(url.pathname);
    if (m === null) {
      res.writeHead(404).end();
      return;
    }
    const repo = m[1] as string;
    const gitDir = join(reposDir, `${repo}.git`);
    const header = (name: string): string | undefined => {
      const v = req.headers[name];
      return Array.isArray(v) ? v[0] : v;
    };
    const gitProtocol = header('git-protocol');
    seen.push({
      method: req.method ?? '',
      path: m[2] as string,
      repo,
      service: m[2] === 'info/refs' ? url.searchParams.get('service') : (m[2] as string),
      gitProtocol,
      contentEncoding: header('content-encoding'),
      chunked: header('transfer-encoding') === 'chunked',
    });
    if (req.method === 'GET' && m[2] === 'info/refs') {
      const service = parseGitService(url.searchParams.get('service'));
      if (service === null) {
        res.writeHead(403).end();
        return;
      }
      await respond(res, advertiseRefs({ gitDir, service, gitProtocol }));
      return;
    }
    const service = parseGitService(m[2]);
    if (req.method !== 'POST' || service === null) {
      res.writeHead(405).end();
      return;
    }
    if (header('content-type') !== rpcRequestContentType(service)) {
      res.writeHead(415).end();
      return;
    }
    let input: Readable;
    try {
      input = decodeRequestBody(req, header('content-encoding'));
    } catch (err) {
      assert.ok(err instanceof UnsupportedContentEncodingError);
      res.writeHead(415).end();
      return;
    }
    const rpc = serviceRpc({ gitDir, service, input, gitProtocol, hooksDir });
    pending.push(
      rpc.updates.then((updates) => {
        if (service !== 'git-receive-pack') return;
        const list = updatesByRepo.get(repo) ?? [];
        list.push(updates);
        updatesByRepo.set(repo, list);
      }),
    );
    await respond(res, rpc);
  }

  function clientEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) {
      if (k.startsWith('GIT_') || /_proxy$/i.test(k)) continue;
      env[k] = v;
    }
    return {
      ...env,
      GIT_CONFIG_NOSYSTEM: '1',
      HOME: home,
      XDG_CONFIG_HOME: home,
      GIT_TERMINAL_PROMPT: '0',
      GIT_AUTHOR_NAME: 'Ada',
      GIT_AUTHOR_EMAIL: 'ada@example.com',
      GIT_COMMITTER_NAME: 'Ada',
      GIT_COMMITTER_EMAIL: 'ada@example.com',
      LC_ALL: 'C',
      ...extra,
    };
  }

  interface GitResult {
    code: number | null;
    stdout: string;
    stderr: string;
  }

  // Asynchronous on purpose: the server lives in this very process.
  function git(args: string[], cwd = scratch, input?: Buffer | string): Promise<GitResult> {
    return new Promise((resolvePromise, reject) => {
      const child = spawn('git', args, { cwd, env: clientEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout.on('data', (c: Buffer) => out.push(c));
      child.stderr.on('data', (c: Buffer) => err.push(c));
      child.on('error', reject);
      child.on('close', (code) =>
        resolvePromise({
          code,
          stdout: Buffer.concat(out).toString('utf8'),
          stderr: Buffer.concat(err).toString('utf8'),
        }),
      );
      child.stdin.end(input);
    });
  }

  async function gitOk(args: string[], cwd = scratch, input?: Buffer | string): Promise<string> {
    const r = await git(args, cwd, input);
    assert.equal(r.code, 0, `git ${args.join(' ')} failed:\n${r.stderr}`);
    return r.stdout;
  }

  async function newRepo(name: string): Promise<string> {
    await initBareRepository(join(reposDir, `${name}.git`), { defaultBranch: 'main' });
    return `${base}/${name}.git`;
  }

  async function commit(dir: string, file: string, content: string | Buffer): Promise<string> {
    await writeFile(join(dir, file), content);
    await gitOk(['add', file], dir);
    await gitOk(['commit', '-q', '-m', `change ${file}`], dir);
    return (await gitOk(['rev-parse', 'HEAD'], dir)).trim();
  }

  async function serverRef(name: string, ref: string): Promise<string> {
    return (await gitOk([`--git-dir=${join(reposDir, `${name}.git`)}`, 'rev-parse', '--verify', ref])).trim();
  }

  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'gantry-smart-http-'));
    reposDir = join(scratch, 'repos');
    home = join(scratch, 'home');
    await mkdir(reposDir);
    await mkdir(home);
    await writeFile(join(home, '.gitconfig'), '[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n');
    hooksDir = await ensureHooks(join(scratch, 'hooks'));
    server = createServer((req, res) => {
      handle(req, res).catch((err: unknown) => {
        res.destroy(err as Error);
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const addr = server.address();
    assert.ok(addr !== null && typeof addr === 'object');
    base = `http://127.0.0.1:${addr.port}`;
  });

  after(async () => {
    server.closeAllConnections();
    server.close();
    await rm(scratch, { recursive: true, force: true });
  });

  it('parses service names strictly', () => {
    assert.equal(parseGitService('git-upload-pack'), 'git-upload-pack');
    assert.equal(parseGitService('git-receive-pack'), 'git-receive-pack');
    for (const bad of ['upload-pack', 'git-upload-archive', '', undefined, null, 42, ['git-upload-pack']]) {
      assert.equal(parseGitService(bad), null);
    }
  });

  it('writes the hooks idempotently, executable by the owner only', async () => {
    const dir = join(scratch, 'hooks-again');
    await ensureHooks(dir);
    await chmod(join(dir, 'post-receive'), 0o600);
    await ensureHooks(dir);
    const st = await stat(join(dir, 'post-receive'));
    assert.equal(st.mode & 0o777, 0o700);
    assert.match(await readFile(join(dir, 'post-receive'), 'utf8'), /^#!\/bin\/sh\n/);
  });

  it('parses post-receive input, dropping an incomplete last line', () => {
    const a = 'a'.repeat(40);
    const b = 'b'.repeat(40);
    assert.deepEqual(parseRefUpdates(`${ZERO} ${a} refs/heads/main\n${a} ${b} refs/tags/v1\n${b} ${ZERO} refs/he`), [
      { oldOid: ZERO, newOid: a, ref: 'refs/heads/main' },
      { oldOid: a, newOid: b, ref: 'refs/tags/v1' },
    ]);
    assert.deepEqual(parseRefUpdates(''), []);
  });

  it('decodes gzip and x-gzip bodies as streams, passes identity through, rejects others', async () => {
    const payload = randomBytes(200_000);
    const gz = gzipSync(payload);
    for (const enc of ['gzip', 'x-gzip', ' GZIP ']) {
      assert.deepEqual(
        await readAll(decodeRequestBody(Readable.from([gz.subarray(0, 1000), gz.subarray(1000)]), enc)),
        payload,
      );
    }
    const raw = Readable.from([payload]);
    assert.equal(decodeRequestBody(raw, undefined), raw);
    assert.equal(decodeRequestBody(raw, 'identity'), raw);
    assert.throws(
      () => decodeRequestBody(raw, 'br'),
      (err: unknown) => {
        assert.ok(err instanceof UnsupportedContentEncodingError);
        assert.equal(err.encoding, 'br');
        return true;
      },
    );
    // A body cut off mid-way fails the decoded stream instead of ending it.
    const cut = new PassThrough();
    const decoded = decodeRequestBody(cut, 'gzip');
    cut.write(gz.subarray(0, 5000));
    cut.destroy();
    await assert.rejects(readAll(decoded), /aborted/);
  });

  it('advertises v0 with the # service= line and v2 as git emits it', async () => {
    await newRepo('adv');
    const gitDir = join(reposDir, 'adv.git');
    const v0 = advertiseRefs({ gitDir, service: 'git-upload-pack' });
    assert.equal(v0.contentType, 'application/x-git-upload-pack-advertisement');
    await v0.started;
    assert.equal((await readAll(v0.body)).toString(), '001e# service=git-upload-pack\n00000000');
    assert.equal((await v0.done).exitCode, 0);

    const v2 = advertiseRefs({ gitDir, service: 'git-upload-pack', gitProtocol: 'version=2' });
    const text = (await readAll(v2.body)).toString();
    assert.ok(text.startsWith('000eversion 2\n'), text);
    assert.match(text, /ls-refs/);
    assert.match(text, /fetch=[^\n]*filter/);

    // git never pushes over v2; receive-pack answers v0, so the line stays.
    const push = advertiseRefs({ gitDir, service: 'git-receive-pack', gitProtocol: 'version=2' });
    assert.equal(push.contentType, 'application/x-git-receive-pack-advertisement');
    assert.match(
      (await readAll(push.body)).toString(),
      /^001f# service=git-receive-pack\n0000[0-9a-f]{4}0{40} capabilities\^\{\}\0report-status/,
    );

    // A header that could carry anything else is ignored (Forgejo's rule).
    const odd = advertiseRefs({ gitDir, service: 'git-upload-pack', gitProtocol: 'version=2\nX=1' });
    assert.ok((await readAll(odd.body)).toString().startsWith('001e# service=git-upload-pack\n0000'));
  });

  it('rejects `started` when git fails before writing (missing repository)', async () => {
    const gitDir = join(reposDir, 'missing.git');
    const adv = advertiseRefs({ gitDir, service: 'git-upload-pack' });
    await assert.rejects(adv.started, (err: unknown) => {
      assert.ok(err instanceof GitCommandError);
      assert.equal(err.exitCode, 128);
      return true;
    });
    assert.equal((await adv.done).exitCode, 128);
    assert.ok(adv.body.destroyed);
    const rpc = serviceRpc({
      gitDir,
      service: 'git-receive-pack',
      input: Readable.from([Buffer.from('0000')]),
      hooksDir,
    });
    await assert.rejects(rpc.started, GitCommandError);
    assert.deepEqual(await rpc.updates, []);
    assert.match((await rpc.done).stderr, /fatal/);
  });

  for (const version of [0, 2]) {
    it(`clones, pushes, fetches and clones again over protocol v${version}`, async () => {
      const name = `flow-v${version}`;
      const url = await newRepo(name);
      const pv = ['-c', `protocol.version=${version}`];
      const work = join(scratch, `${name}-work`);
      const cloned = await git([...pv, 'clone', url, work]);
      assert.equal(cloned.code, 0, cloned.stderr);
      assert.match(cloned.stderr, /empty repository/);

      const c1 = await commit(work, 'a.txt', 'one\n');
      await gitOk(['tag', '-a', '-m', 'release', 'v1'], work);
      const tagOid = (await gitOk(['rev-parse', 'v1'], work)).trim();
      await gitOk(['branch', 'feature'], work);
      await gitOk([...pv, 'push', '-q', 'origin', 'main', 'feature', 'v1'], work);
      await settled();
      const first = updatesByRepo.get(name)?.[0] ?? [];
      assert.deepEqual(
        [...first].sort((a, b) => a.ref.localeCompare(b.ref)),
        [
          { oldOid: ZERO, newOid: c1, ref: 'refs/heads/feature' },
          { oldOid: ZERO, newOid: c1, ref: 'refs/heads/main' },
          { oldOid: ZERO, newOid: tagOid, ref: 'refs/tags/v1' },
        ],
      );
      assert.equal(await serverRef(name, 'refs/heads/main'), c1);

      // A second client clones, a new commit is pushed, the second client fetches.
      const other = join(scratch, `${name}-other`);
      await gitOk([...pv, 'clone', '-q', url, other]);
      const c2 = await commit(work, 'b.txt', 'two\n');
      await gitOk([...pv, 'push', '-q', 'origin', 'main'], work);
      await gitOk([...pv, 'fetch', '-q', 'origin'], other);
      assert.equal((await gitOk(['rev-parse', 'origin/main'], other)).trim(), c2);

      const remote = await gitOk([...pv, 'ls-remote', url]);
      assert.match(remote, new RegExp(`^${c2}\\tHEAD$`, 'm'));
      assert.match(remote, new RegExp(`^${tagOid}\\trefs/tags/v1$`, 'm'));
      assert.match(remote, new RegExp(`^${c1}\\trefs/tags/v1\\^\\{\\}$`, 'm'));

      const again = join(scratch, `${name}-again`);
      await gitOk([...pv, 'clone', '-q', '--mirror', url, again]);
      const refsOf = (dir: string): Promise<string> =>
        gitOk(['for-each-ref', '--format=%(objectname) %(refname)'], dir);
      assert.equal(await refsOf(again), await refsOf(join(reposDir, `${name}.git`)));
      await gitOk(['fsck', '--strict'], again);

      // The client offers v2 for fetches only; pushes always speak v0.
      const uploads = seen.filter((s) => s.repo === name && s.service === 'git-upload-pack');
      assert.ok(uploads.some((s) => s.method === 'POST'));
      for (const s of uploads) assert.equal(s.gitProtocol, version === 2 ? 'version=2' : undefined);
    });
  }

  it('reports created, updated, force-updated and deleted refs exactly', async () => {
    const name = 'updates';
    const url = await newRepo(name);
    const work = join(scratch, `${name}-work`);
    await gitOk(['clone', '-q', url, work]);
    const c1 = await commit(work, 'a', '1');
    await gitOk(['branch', 'gone'], work);
    await gitOk(['branch', 'forced'], work);
    await gitOk(['tag', 'light'], work);
    await gitOk(['push', '-q', 'origin', 'main', 'gone', 'forced', 'light'], work);
    const c2 = await commit(work, 'b', '2');
    await gitOk(['checkout', '-q', '-b', 'side', c1], work);
    const s1 = await commit(work, 'c', '3');
    await gitOk(
      ['push', '-q', '--force', 'origin', 'main', 'side:forced', ':gone', ':light', 'side:refs/heads/new'],
      work,
    );
    await settled();
    const list = updatesByRepo.get(name) ?? [];
    assert.equal(list.length, 2);
    assert.deepEqual(
      [...(list[1] ?? [])].sort((a, b) => a.ref.localeCompare(b.ref)),
      [
        { oldOid: c1, newOid: s1, ref: 'refs/heads/forced' },
        { oldOid: c1, newOid: ZERO, ref: 'refs/heads/gone' },
        { oldOid: c1, newOid: c2, ref: 'refs/heads/main' },
        { oldOid: ZERO, newOid: s1, ref: 'refs/heads/new' },
        { oldOid: c1, newOid: ZERO, ref: 'refs/tags/light' },
      ],
    );

    // Refused by git (deleting the branch HEAD names): nothing changed, nothing reported.
    const refused = await git(['push', 'origin', ':main'], work);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /refusing to delete the current branch/);
    await settled();
    assert.deepEqual(updatesByRepo.get(name)?.[2], []);
    assert.equal(await serverRef(name, 'refs/heads/main'), c2);
  });

  it('never runs hooks from the repository (hooks/ folder or core.hooksPath)', async () => {
    const name = 'hijack';
    const url = await newRepo(name);
    const gitDir = join(reposDir, `${name}.git`);
    const marker = join(scratch, 'hijacked');
    const evil = join(scratch, 'evil-hooks');
    await mkdir(evil);
    const script = `#!/bin/sh\ntouch '${marker}'\ncat >/dev/null\n`;
    for (const dir of [evil, join(gitDir, 'hooks')]) {
      for (const hook of ['pre-receive', 'update', 'post-receive', 'post-update', 'reference-transaction']) {
        await writeFile(join(dir, hook), script, { mode: 0o755 });
      }
    }
    await gitOk([`--git-dir=${gitDir}`, 'config', 'core.hooksPath', evil]);
    const work = join(scratch, `${name}-work`);
    await gitOk(['clone', '-q', url, work]);
    const c1 = await commit(work, 'a', '1');
    await gitOk(['push', '-q', 'origin', 'main'], work);
    await settled();
    assert.deepEqual(updatesByRepo.get(name), [[{ oldOid: ZERO, newOid: c1, ref: 'refs/heads/main' }]]);
    await assert.rejects(stat(marker), { code: 'ENOENT' });
  });

  it('takes gzip-compressed upload-pack requests from git and chunked pushes', async () => {
    const name = 'gzip';
    const url = await newRepo(name);
    const work = join(scratch, `${name}-work`);
    await gitOk(['clone', '-q', url, work]);
    // 60 branches on 60 commits: the fetch request's want lines pass 1 KiB, so git gzips it.
    const refspecs: string[] = [];
    for (let i = 0; i < 60; i++) {
      await commit(work, 'n.txt', `${i}\n`);
      await gitOk(['branch', `b${i}`], work);
      refspecs.push(`b${i}`);
    }
    await writeFile(join(work, 'big.bin'), randomBytes(300_000));
    await gitOk(['add', 'big.bin'], work);
    await gitOk(['commit', '-q', '-m', 'big'], work);
    // A 64 KiB post buffer (git's minimum) forces a chunked request for the ~300 KB pack.
    await gitOk(['-c', 'http.postBuffer=65536', 'push', '-q', 'origin', 'main', ...refspecs], work);
    const pushPosts = seen.filter((s) => s.repo === name && s.path === 'git-receive-pack');
    assert.ok(
      pushPosts.some((s) => s.chunked),
      'expected a chunked push',
    );

    for (const version of [0, 2]) {
      const dir = join(scratch, `${name}-clone-v${version}`);
      await gitOk(['-c', `protocol.version=${version}`, 'clone', '-q', '--no-single-branch', url, dir]);
      assert.equal(
        (await gitOk(['for-each-ref', 'refs/remotes/origin/b*'], dir)).split('\n').filter(Boolean).length,
        60,
      );
    }
    const gz = seen.filter((s) => s.repo === name && s.path === 'git-upload-pack' && s.contentEncoding === 'gzip');
    assert.ok(gz.length >= 2, 'expected gzipped upload-pack requests over v0 and v2');
  });

  it('accepts a gzip-compressed receive-pack request', async () => {
    const name = 'gzip-push';
    const url = await newRepo(name);
    const work = join(scratch, `${name}-work`);
    await gitOk(['clone', '-q', url, work]);
    const c1 = await commit(work, 'a', 'gz\n');
    // git's client never gzips a push; build the request it would send.
    const pack = await new Promise<Buffer>((resolvePack, reject) => {
      const child = spawn('git', ['pack-objects', '--stdout', '--revs', '-q'], { cwd: work, env: clientEnv() });
      const out: Buffer[] = [];
      child.stdout.on('data', (c: Buffer) => out.push(c));
      child.on('error', reject);
      child.on('close', (code) =>
        code === 0 ? resolvePack(Buffer.concat(out)) : reject(new Error(`pack-objects ${code}`)),
      );
      child.stdin.end(`${c1}\n`);
    });
    for (const [enc, ref] of [
      ['gzip', 'refs/heads/gz'],
      ['x-gzip', 'refs/heads/xgz'],
    ] as const) {
      const body = Buffer.concat([Buffer.from(pkt(`${ZERO} ${c1} ${ref}\0report-status\n`) + '0000'), pack]);
      const res = await new Promise<{ status: number; text: string }>((resolveRes, reject) => {
        const req = httpRequest(
          `${url}/git-receive-pack`,
          {
            method: 'POST',
            headers: { 'Content-Type': 'application/x-git-receive-pack-request', 'Content-Encoding': enc },
          },
          (r) => {
            readAll(r).then((b) => resolveRes({ status: r.statusCode ?? 0, text: b.toString('latin1') }), reject);
          },
        );
        req.on('error', reject);
        req.end(gzipSync(body));
      });
      assert.equal(res.status, 200);
      assert.match(res.text, /unpack ok\n/);
      assert.match(res.text, new RegExp(`ok ${ref}\\n`));
      assert.equal(await serverRef(name, ref), c1);
    }
    await settled();
    assert.deepEqual(updatesByRepo.get(name), [
      [{ oldOid: ZERO, newOid: c1, ref: 'refs/heads/gz' }],
      [{ oldOid: ZERO, newOid: c1, ref: 'refs/heads/xgz' }],
    ]);
  });

  it('streams a 20 MB push and clone with flat memory', async (t) => {
    const name = 'big';
    const url = await newRepo(name);
    const work = join(scratch, `${name}-work`);
    await gitOk(['clone', '-q', url, work]);
    const size = 20 * 1024 * 1024;
    const file = createWriteStream(join(work, 'random.bin'));
    for (let i = 0; i < size / (1024 * 1024); i++) {
      if (!file.write(randomBytes(1024 * 1024))) await once(file, 'drain');
    }
    file.end();
    await once(file, 'finish');
    await gitOk(['add', 'random.bin'], work);
    await gitOk(['commit', '-q', '-m', 'random'], work);
    const head = (await gitOk(['rev-parse', 'HEAD'], work)).trim();

    // Without collections, garbage not yet reclaimed (each request chunk is
    // a fresh Buffer) dominates RSS and says nothing about what is retained.
    setFlagsFromString('--expose-gc');
    const collectGarbage = runInNewContext('gc') as () => void;

    // Peak RSS above the starting point, and peak bytes held in Buffers.
    async function peakGrowth(run: () => Promise<void>): Promise<{ rss: number; buffers: number }> {
      collectGarbage();
      const baseline = process.memoryUsage().rss;
      let rss = baseline;
      let buffers = 0;
      const sample = (): void => {
        collectGarbage();
        const m = process.memoryUsage();
        rss = Math.max(rss, m.rss);
        buffers = Math.max(buffers, m.arrayBuffers);
      };
      const sampler = setInterval(sample, 25);
      try {
        await run();
      } finally {
        clearInterval(sampler);
      }
      sample();
      return { rss: rss - baseline, buffers };
    }
    const mb = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MB`;

    const pushGrowth = await peakGrowth(async () => {
      await gitOk(['push', '-q', 'origin', 'main'], work);
    });
    assert.equal(await serverRef(name, 'refs/heads/main'), head);
    const pushPost = seen.filter((s) => s.repo === name && s.path === 'git-receive-pack');
    // git first probes with a 4-byte request (remote-curl.c probe_rpc), then streams chunked.
    assert.ok(pushPost.some((s) => s.chunked));

    const dir = join(scratch, `${name}-clone`);
    const cloneGrowth = await peakGrowth(async () => {
      await gitOk(['clone', '-q', url, dir]);
    });
    assert.deepEqual(await readFile(join(dir, 'random.bin')), await readFile(join(work, 'random.bin')));
    t.diagnostic(
      `pack ${mb(size)}: push RSS +${mb(pushGrowth.rss)} (Buffers peak ${mb(pushGrowth.buffers)}), ` +
        `clone RSS +${mb(cloneGrowth.rss)} (Buffers peak ${mb(cloneGrowth.buffers)})`,
    );
    assert.ok(pushGrowth.rss < size / 4, `push grew RSS by ${mb(pushGrowth.rss)}`);
    assert.ok(cloneGrowth.rss < size / 4, `clone grew RSS by ${mb(cloneGrowth.rss)}`);
    assert.ok(pushGrowth.buffers < size / 4 && cloneGrowth.buffers < size / 4);
  });

  it("keeps git's behaviour under a concurrent push race: one wins, the other is rejected", async () => {
    const name = 'race';
    const url = await newRepo(name);
    const a = join(scratch, `${name}-a`);
    const b = join(scratch, `${name}-b`);
    await gitOk(['clone', '-q', url, a]);
    const c0 = await commit(a, 'base', '0');
    await gitOk(['push', '-q', 'origin', 'main'], a);
    await gitOk(['clone', '-q', url, b]);
    const ca = await commit(a, 'x', randomBytes(2_000_000));
    const cb = await commit(b, 'y', randomBytes(2_000_000));
    await settled();
    updatesByRepo.delete(name);
    const [ra, rb] = await Promise.all([git(['push', 'origin', 'main'], a), git(['push', 'origin', 'main'], b)]);
    const wins = [ra, rb].filter((r) => r.code === 0);
    assert.equal(wins.length, 1, `${ra.stderr}\n---\n${rb.stderr}`);
    const winner = ra.code === 0 ? ca : cb;
    const loser = ra.code === 0 ? rb : ra;
    assert.match(loser.stderr, /rejected|failed to update ref|cannot lock ref|fetch first/);
    assert.equal(await serverRef(name, 'refs/heads/main'), winner);
    await settled();
    const applied = (updatesByRepo.get(name) ?? []).flat();
    assert.deepEqual(applied, [{ oldOid: c0, newOid: winner, ref: 'refs/heads/main' }]);
  });

  it('supports partial clones (uploadpack.allowFilter)', async () => {
    const name = 'partial';
    const url = await newRepo(name);
    const work = join(scratch, `${name}-work`);
    await gitOk(['clone', '-q', url, work]);
    await commit(work, 'a', 'partial\n');
    await gitOk(['push', '-q', 'origin', 'main'], work);
    const dir = join(scratch, `${name}-clone`);
    await gitOk(['-c', 'protocol.version=2', 'clone', '-q', '--filter=blob:none', url, dir]);
    assert.equal(await readFile(join(dir, 'a'), 'utf8'), 'partial\n');
  });

  describe('when the client goes away', () => {
    it('kills git when the response body is destroyed', async () => {
      await newRepo('abort-body');
      const input = new PassThrough(); // a request that never ends
      const rpc = serviceRpc({ gitDir: join(reposDir, 'abort-body.git'), service: 'git-upload-pack', input, hooksDir });
      setTimeout(() => rpc.body.destroy(), 100);
      const exit = await rpc.done;
      assert.equal(exit.killedBy, 'client');
      assert.equal(exit.exitCode, null);
      await assert.rejects(rpc.started, GitCommandError);
    });

    it('kills git when the request body is aborted', async () => {
      await newRepo('abort-input');
      const input = new PassThrough();
      const rpc = serviceRpc({
        gitDir: join(reposDir, 'abort-input.git'),
        service: 'git-receive-pack',
        input,
        hooksDir,
      });
      input.write(pkt(`${ZERO} ${'1'.repeat(40)} refs/heads/x\0report-status\n`));
      setTimeout(() => input.destroy(new Error('aborted')), 100);
      const exit = await rpc.done;
      assert.equal(exit.killedBy, 'client');
      assert.deepEqual(await rpc.updates, []);
    });

    it('lets a fully received push finish and still reports its updates', async () => {
      const name = 'abort-late';
      const url = await newRepo(name);
      const work = join(scratch, `${name}-work`);
      await gitOk(['clone', '-q', url, work]);
      const c1 = await commit(work, 'a', 'late\n');
      const pack = await new Promise<Buffer>((resolvePack, reject) => {
        const child = spawn('git', ['pack-objects', '--stdout', '--revs', '-q'], { cwd: work, env: clientEnv() });
        const out: Buffer[] = [];
        child.stdout.on('data', (c: Buffer) => out.push(c));
        child.on('error', reject);
        child.on('close', () => resolvePack(Buffer.concat(out)));
        child.stdin.end(`${c1}\n`);
      });
      const input = new PassThrough();
      const rpc = serviceRpc({ gitDir: join(reposDir, `${name}.git`), service: 'git-receive-pack', input, hooksDir });
      input.end(Buffer.concat([Buffer.from(pkt(`${ZERO} ${c1} refs/heads/main\0report-status\n`) + '0000'), pack]));
      await once(input, 'end');
      rpc.body.destroy();
      const exit = await rpc.done;
      assert.equal(exit.killedBy, null);
      assert.equal(exit.exitCode, 0);
      assert.deepEqual(await rpc.updates, [{ oldOid: ZERO, newOid: c1, ref: 'refs/heads/main' }]);
      assert.equal(await serverRef(name, 'refs/heads/main'), c1);
    });
  });
});
