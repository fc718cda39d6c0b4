// Parsers for the raw tree and commit objects cat-file hands out. Pure
// functions over bytes: no git, no I/O, so they are cheap on the hot path and
// tested without a repository.
import { TextDecoder } from 'node:util';

export type TreeEntryKind = 'blob' | 'tree' | 'commit' | 'symlink';

export interface TreeEntry {
  /** As stored, e.g. `100644`, `100755`, `40000`, `120000`, `160000`. */
  mode: string;
  name: string;
  oid: string;
  /** `commit` is a submodule (gitlink): its id names a commit of another repository. */
  kind: TreeEntryKind;
}

export interface Signature {
  name: string;
  email: string;
  timestampSec: number;
  /** As written, e.g. `+0100`. */
  tz: string;
}

export interface Commit {
  tree: string;
  parents: string[];
  author: Signature;
  committer: Signature;
  /** The `encoding` header, when the commit declares one; message and names are decoded with it. */
  encoding: string | null;
  message: string;
}

const SPACE = 0x20;
const NUL = 0x00;
const NEWLINE = 0x0a;
// The file-type bits of a mode (S_IFMT); git only ever stores these four types.
const S_IFMT = 0o170000;
const OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

function kindOfMode(mode: string): TreeEntryKind {
  if (!/^[0-7]{5,6}$/.test(mode)) throw new Error(`malformed tree: bad mode ${JSON.stringify(mode)}`);
  switch (Number.parseInt(mode, 8) & S_IFMT) {
    case 0o100000:
      return 'blob';
    case 0o040000:
      return 'tree';
    case 0o120000:
      return 'symlink';
    case 0o160000:
      return 'commit';
    default:
      throw new Error(`malformed tree: unknown mode ${mode}`);
  }
}

/**
 * Entries of a raw tree: `<mode> <name>\0<oid as raw bytes>` repeated. The
 * id length is not in the data, so the caller says it (20 for sha1, 32 for
 * sha256, i.e. half the hex length of any id from the same repository).
 */
export function parseTree(content: Buffer, oidBytes: 20 | 32): TreeEntry[] {
  const entries: TreeEntry[] = [];
  let pos = 0;
  while (pos < content.length) {
    const space = content.indexOf(SPACE, pos);
    const nul = space === -1 ? -1 : content.indexOf(NUL, space + 1);
    if (space === -1 || nul === -1 || nul + 1 + oidBytes > content.length) {
      throw new Error(`malformed tree: truncated entry at byte ${pos}`);
    }
    const mode = content.toString('latin1', pos, space);
    const name = content.toString('utf8', space + 1, nul);
    if (name.length === 0) throw new Error(`malformed tree: empty name at byte ${pos}`);
    const oid = content.toString('hex', nul + 1, nul + 1 + oidBytes);
    entries.push({ mode, name, oid, kind: kindOfMode(mode) });
    pos = nul + 1 + oidBytes;
  }
  return entries;
}

/**
 * `Name <email> 1700000000 +0100`, split as git's split_ident_line does: the
 * email runs from the first `<` to the next `>`, the date follows the last `>`.
 */
function parseSignature(value: string): Signature {
  const lt = value.indexOf('<');
  const gt = lt === -1 ? -1 : value.indexOf('>', lt);
  if (gt === -1) throw new Error(`malformed commit: bad identity ${JSON.stringify(value)}`);
  const date = value.slice(value.lastIndexOf('>') + 1).trim();
  const match = /^(\d+) ([+-]\d{4})$/.exec(date);
  // git writes both; a commit missing them (very old or hand-made) still parses, at the epoch.
  return {
    name: value.slice(0, lt).trim(),
    email: value.slice(lt + 1, gt),
    timestampSec: match !== null ? Number(match[1]) : 0,
    tz: match !== null ? (match[2] as string) : '+0000',
  };
}

function decoderFor(encoding: string | null): TextDecoder {
  if (encoding !== null) {
    try {
      return new TextDecoder(encoding);
    } catch {
      // An encoding this Node does not know: UTF-8 is what git itself assumes by default.
    }
  }
  return new TextDecoder('utf-8');
}

/**
 * A raw commit: headers, a blank line, the message. Headers we do not use
 * (gpgsig, mergetag, …) may span lines, continued by a leading space; they
 * are skipped whole so their lines are never read as headers.
 */
export function parseCommit(content: Buffer): Commit {
  const headers: Array<[string, Buffer]> = [];
  let pos = 0;
  let bodyStart = content.length;
  while (pos < content.length) {
    let end = content.indexOf(NEWLINE, pos);
    if (end === -1) end = content.length;
    if (end === pos) {
      bodyStart = end + 1;
      break;
    }
    if (content[pos] !== SPACE) {
      const space = content.indexOf(SPACE, pos);
      const keyEnd = space === -1 || space > end ? end : space;
      const key = content.toString('latin1', pos, keyEnd);
      headers.push([key, content.subarray(Math.min(keyEnd + 1, end), end)]);
    }
    pos = end + 1;
  }

  const encodingHeader = headers.find(([key]) => key === 'encoding');
  const encoding = encodingHeader !== undefined ? encodingHeader[1].toString('latin1') : null;
  const decoder = decoderFor(encoding);

  let tree: string | null = null;
  const parents: string[] = [];
  let author: Signature | null = null;
  let committer: Signature | null = null;
  for (const [key, value] of headers) {
    if (key === 'tree') tree = value.toString('latin1');
    else if (key === 'parent') parents.push(value.toString('latin1'));
    else if (key === 'author') author = parseSignature(decoder.decode(value));
    else if (key === 'committer') committer = parseSignature(decoder.decode(value));
  }
  if (tree === null || author === null || committer === null) {
    throw new Error('malformed commit: tree, author or committer header missing');
  }
  for (const oid of [tree, ...parents]) {
    if (!OID.test(oid)) throw new Error(`malformed commit: bad object id ${JSON.stringify(oid)}`);
  }
  const message = bodyStart < content.length ? decoder.decode(content.subarray(bodyStart)) : '';
  return { tree, parents, author, committer, encoding, message };
}
