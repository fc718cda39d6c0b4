// The `Range: bytes=…` header as Go's http.ServeContent reads it
// (net/http/fs.go parseRange), for one range: Forgejo serves job logs that way.
//
// - No header, or several ranges: the whole content (a server may ignore a
//   Range; Go would answer multipart/byteranges, which no log client asks for).
// - `bytes=a-b`, `bytes=a-`, `bytes=-n` (the last n bytes): a range clamped
//   to the content, as Go clamps it.
// - A malformed value, or a start at or past the end: unsatisfiable (416),
//   as Go answers both.

export type ByteRange = { kind: 'whole' } | { kind: 'partial'; start: number; end: number } | { kind: 'unsatisfiable' };

const DIGITS = /^\d+$/;

export function parseByteRange(header: string | undefined, size: number): ByteRange {
  if (header === undefined || header === '') return { kind: 'whole' };
  if (!header.startsWith('bytes=')) return { kind: 'unsatisfiable' };
  const specs = header
    .slice('bytes='.length)
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
  if (specs.length === 0) return { kind: 'unsatisfiable' };
  if (specs.length > 1) return { kind: 'whole' };
  const spec = specs[0] as string;
  const dash = spec.indexOf('-');
  if (dash < 0) return { kind: 'unsatisfiable' };
  const first = spec.slice(0, dash).trim();
  const last = spec.slice(dash + 1).trim();
  if (first === '') {
    // A suffix: the last n bytes (all of them when n exceeds the size); n = 0 selects nothing.
    if (!DIGITS.test(last)) return { kind: 'unsatisfiable' };
    const n = Math.min(Number(last), size);
    if (n === 0) return { kind: 'unsatisfiable' };
    return { kind: 'partial', start: size - n, end: size - 1 };
  }
  if (!DIGITS.test(first) || (last !== '' && !DIGITS.test(last))) return { kind: 'unsatisfiable' };
  const start = Number(first);
  if (last !== '' && Number(last) < start) return { kind: 'unsatisfiable' };
  if (start >= size) return { kind: 'unsatisfiable' };
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  return { kind: 'partial', start, end };
}
