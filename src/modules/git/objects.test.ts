import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseCommit, parseTree } from './objects.ts';

function treeEntry(mode: string, name: string, oidHex: string): Buffer {
  return Buffer.concat([Buffer.from(`${mode} ${name}\0`, 'utf8'), Buffer.from(oidHex, 'hex')]);
}

const A40 = 'a'.repeat(40);
const B40 = '0123456789abcdef0123456789abcdef01234567';
const C64 = 'c0ffee'.repeat(10) + 'beef';

describe('parseTree', () => {
  it('reads every kind of entry, names verbatim', () => {
    const content = Buffer.concat([
      treeEntry('100644', 'README.md', A40),
      treeEntry('100755', 'run.sh', B40),
      treeEntry('120000', 'link', A40),
      treeEntry('160000', 'vendor lib', B40),
      treeEntry('40000', 'ünï cødé 日本', A40),
    ]);
    assert.deepEqual(parseTree(content, 20), [
      { mode: '100644', name: 'README.md', oid: A40, kind: 'blob' },
      { mode: '100755', name: 'run.sh', oid: B40, kind: 'blob' },
      { mode: '120000', name: 'link', oid: A40, kind: 'symlink' },
      { mode: '160000', name: 'vendor lib', oid: B40, kind: 'commit' },
      { mode: '40000', name: 'ünï cødé 日本', oid: A40, kind: 'tree' },
    ]);
  });

  it('reads sha256 trees and raw ids that contain NUL, space and newline bytes', () => {
    // Raw id bytes 0x00, 0x20 and 0x0a must not be taken for separators.
    const tricky = '00200a' + '0'.repeat(58);
    const content = Buffer.concat([treeEntry('100644', 'a', tricky), treeEntry('100644', 'b', C64)]);
    assert.deepEqual(
      parseTree(content, 32).map((e) => e.oid),
      [tricky, C64],
    );
  });

  it('accepts the empty tree and old modes such as 100664', () => {
    assert.deepEqual(parseTree(Buffer.alloc(0), 20), []);
    assert.equal(parseTree(treeEntry('100664', 'x', A40), 20)[0]?.kind, 'blob');
  });

  it('rejects truncated or malformed trees', () => {
    const whole = treeEntry('100644', 'a', A40);
    assert.throws(() => parseTree(whole.subarray(0, whole.length - 1), 20), /truncated/);
    assert.throws(() => parseTree(Buffer.from('100644 a'), 20), /truncated/);
    assert.throws(() => parseTree(treeEntry('abc', 'a', A40), 20), /bad mode/);
    assert.throws(() => parseTree(treeEntry('070000', 'a', A40), 20), /unknown mode/);
    assert.throws(() => parseTree(treeEntry('100644', '', A40), 20), /empty name/);
    // A sha256 tree read as sha1 goes out of step and fails instead of inventing entries.
    assert.throws(() => parseTree(Buffer.concat([treeEntry('100644', 'a', C64), treeEntry('100644', 'b', C64)]), 20));
  });
});

describe('parseCommit', () => {
  it('reads a plain commit', () => {
    const raw = [
      `tree ${A40}`,
      `parent ${B40}`,
      'author Zoë Ångström <zoe@example.test> 1700000000 +0100',
      'committer C O Mitter <c@example.test> 1700000100 -0730',
      '',
      'Subject ✨',
      '',
      'Body line.',
      '',
    ].join('\n');
    assert.deepEqual(parseCommit(Buffer.from(raw, 'utf8')), {
      tree: A40,
      parents: [B40],
      author: { name: 'Zoë Ångström', email: 'zoe@example.test', timestampSec: 1_700_000_000, tz: '+0100' },
      committer: { name: 'C O Mitter', email: 'c@example.test', timestampSec: 1_700_000_100, tz: '-0730' },
      encoding: null,
      message: 'Subject ✨\n\nBody line.\n',
    });
  });

  it('skips multi-line gpgsig and mergetag headers and keeps every parent', () => {
    const raw = [
      `tree ${A40}`,
      `parent ${A40}`,
      `parent ${B40}`,
      'author A <a@x> 1 +0000',
      'committer C <c@x> 2 +0000',
      'mergetag object 1111111111111111111111111111111111111111',
      ' type commit',
      ' tag v1',
      ' tagger T <t@x> 3 +0000',
      ' ',
      ' parent ffffffffffffffffffffffffffffffffffffffff',
      'gpgsig -----BEGIN PGP SIGNATURE-----',
      ' ',
      ' author Evil <evil@x> 9 +0000',
      ' tree ffffffffffffffffffffffffffffffffffffffff',
      ' -----END PGP SIGNATURE-----',
      '',
      'Merge',
      '',
    ].join('\n');
    const commit = parseCommit(Buffer.from(raw));
    assert.equal(commit.tree, A40);
    assert.deepEqual(commit.parents, [A40, B40]);
    assert.equal(commit.author.name, 'A');
    assert.equal(commit.committer.timestampSec, 2);
    assert.equal(commit.message, 'Merge\n');
  });

  it('decodes names and message with the encoding header', () => {
    const head = `tree ${C64}\nauthor `;
    const raw = Buffer.concat([
      Buffer.from(head, 'latin1'),
      Buffer.from(
        'J\xfcrgen <j@x> 5 +0200\ncommitter J\xfcrgen <j@x> 5 +0200\nencoding ISO-8859-1\n\nGr\xfc\xdfe\n',
        'latin1',
      ),
    ]);
    const commit = parseCommit(raw);
    assert.equal(commit.encoding, 'ISO-8859-1');
    assert.equal(commit.author.name, 'Jürgen');
    assert.equal(commit.message, 'Grüße\n');
    assert.equal(commit.tree, C64);

    // An encoding Node does not know falls back to UTF-8.
    const odd = parseCommit(
      Buffer.from(`tree ${A40}\nauthor A <a@x> 1 +0000\ncommitter A <a@x> 1 +0000\nencoding x-klingon\n\nqapla’\n`),
    );
    assert.equal(odd.message, 'qapla’\n');
  });

  it('reads a root commit with no message and odd identities', () => {
    const commit = parseCommit(Buffer.from(`tree ${A40}\nauthor <> 0 +0000\ncommitter Name <mail> \n`));
    assert.deepEqual(commit.parents, []);
    assert.deepEqual(commit.author, { name: '', email: '', timestampSec: 0, tz: '+0000' });
    assert.deepEqual(commit.committer, { name: 'Name', email: 'mail', timestampSec: 0, tz: '+0000' });
    assert.equal(commit.message, '');
  });

  it('rejects commits without the required headers', () => {
    assert.throws(() => parseCommit(Buffer.from('author A <a@x> 1 +0000\ncommitter A <a@x> 1 +0000\n\nm')), /missing/);
    assert.throws(
      () => parseCommit(Buffer.from(`tree nothex\nauthor A <a@x> 1 +0000\ncommitter A <a@x> 1 +0000\n\nm`)),
      /bad object id/,
    );
    assert.throws(
      () => parseCommit(Buffer.from(`tree ${A40}\nauthor no email\ncommitter A <a@x> 1 +0000\n\nm`)),
      /bad identity/,
    );
  });
});
