import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GitCommandError, runGit } from './run-git.ts';

describe('runGit', () => {
  let scratch = '';

  before(async () => {
    scratch = await mkdtemp(join(tmpdir(), 'gantry-rungit-'));
  });
  after(async () => {
    await rm(scratch, { recursive: true, force: true });
  });

  it('returns stdout as a Buffer', async () => {
    const out = await runGit(['--version']);
    assert.ok(Buffer.isBuffer(out));
    assert.match(out.toString('utf8'), /^git version /);
  });

  it('feeds input through stdin', async () => {
    const out = await runGit(['hash-object', '--stdin'], { input: 'hello\n', cwd: scratch });
    // Well-known id of the blob "hello\n".
    assert.equal(out.toString('utf8').trim(), 'ce013625030ba8dba906f756967f9e9ca394464a');
  });

  it('throws GitCommandError with args, exit code and trimmed stderr', async () => {
    const err = await runGit(['rev-parse', '--verify', 'no-such-rev'], { gitDir: join(scratch, 'nope') }).then(
      () => assert.fail('expected failure'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof GitCommandError);
    assert.deepEqual(err.args, ['rev-parse', '--verify', 'no-such-rev']);
    assert.equal(err.exitCode, 128);
    assert.equal(err.stderr, err.stderr.trim());
    assert.match(err.message, /^git rev-parse failed \(exit 128\): fatal: /);
    assert.ok(!err.message.includes('\n'));
  });

  it('ignores inherited GIT_* variables and user/system config', async () => {
    const saved = { ...process.env };
    try {
      process.env.GIT_CONFIG_COUNT = '1';
      process.env.GIT_CONFIG_KEY_0 = 'user.name';
      process.env.GIT_CONFIG_VALUE_0 = 'leaked';
      process.env.GIT_DIR = join(scratch, 'elsewhere');
      const out = await runGit(['config', '--list', '--show-origin'], { cwd: scratch });
      assert.equal(out.toString('utf8'), '');
      const env = await runGit(['var', 'GIT_EDITOR'], { cwd: scratch, env: { GIT_EDITOR: 'true' } });
      assert.equal(env.toString('utf8').trim(), 'true');
    } finally {
      for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
      Object.assign(process.env, saved);
    }
  });

  it('kills git and its children on timeout', async () => {
    const started = Date.now();
    // An alias that runs a long shell command: the sleep is a grandchild
    // holding git's stdout open, so this also checks the process-group kill.
    const err = await runGit(['hang'], {
      cwd: scratch,
      timeoutMs: 300,
      env: { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'alias.hang', GIT_CONFIG_VALUE_0: '!sleep 30' },
    }).then(
      () => assert.fail('expected timeout'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof GitCommandError);
    assert.equal(err.timedOut, true);
    assert.equal(err.exitCode, null);
    assert.match(err.message, /^git hang timed out after 300 ms/);
    assert.ok(Date.now() - started < 10_000);
  });

  it('rejects when git is not found', async () => {
    const saved = process.env.PATH;
    process.env.PATH = '/nonexistent';
    try {
      await assert.rejects(runGit(['--version']), { code: 'ENOENT' });
    } finally {
      process.env.PATH = saved;
    }
  });
});
