// Values for fuzz requests: path segments and strings that break parsers,
// numbers past every limit, JSON that JSON.stringify cannot write, and values
// shaped like a route's schema (plausible, or of the wrong type).
import fc from 'fast-check';
import type { Arbitrary } from 'fast-check';
import type { JsonSchema } from './routes.ts';
import type { FuzzWorld } from './world.ts';

/** Percent-encodes the UTF-8 bytes of `text` (lone surrogates become U+FFFD). */
export function pct(text: string): string {
  let out = '';
  for (const byte of Buffer.from(text, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Path segments as sent on the wire: traversal, encodings, unicode, numbers, lengths. */
const HOSTILE_SEGMENTS: string[] = [
  '..',
  '.',
  '%2e%2e',
  '%2E%2e%2F',
  '..%2F..%2Fetc%2Fpasswd',
  '%2e',
  '%00',
  'a%00b',
  '%2F',
  'a%2Fb',
  '%5C',
  '%5C..%5C',
  '%',
  '%zz',
  '%C0%AE%C0%AE',
  '%FF%FE',
  '%ED%A0%80',
  '%EF%BF%BF',
  pct('\u202Eexe.txt'),
  pct('\u200B'),
  pct('🚀'),
  pct('👩‍👩‍👧'),
  pct('é'),
  pct('e\u0301'),
  pct('İ'),
  pct('ß'),
  pct('Ω'),
  pct('ﬁ'),
  pct('Ａ'),
  'x'.repeat(499),
  'x'.repeat(500),
  'x'.repeat(501),
  pct('ä'.repeat(250)),
  '-1',
  '0',
  '00',
  '01',
  '1e309',
  '1e3',
  '9223372036854775807',
  '9223372036854775808',
  '-9223372036854775809',
  '18446744073709551616',
  '99999999999999999999999',
  '0x10',
  '1.5',
  '+1',
  '%2B1',
  'NaN',
  'Infinity',
  '%20',
  '%09',
  '%0A',
  '%0D%0A',
  ';',
  ',',
  "'",
  '%22',
  '%27%20OR%201%3D1--',
  '%3Cscript%3E',
  '~',
  '-',
  '_',
  'a.git',
  '.git',
  'app.git.git',
  'CON',
  'null',
  'undefined',
  '__proto__',
  'constructor',
  'prototype',
  'hasOwnProperty',
  '%24%7Bjndi%7D',
  '*',
  '%2A',
];

export const NUMBERS_AS_TEXT: string[] = [
  '-1',
  '0',
  '1',
  '2',
  '1e309',
  '-1e309',
  '1e3',
  '1.5',
  '4294967296',
  '9007199254740991',
  '9007199254740993',
  '9223372036854775807',
  '9223372036854775808',
  '18446744073709551616',
  '0x10',
  'NaN',
  'Infinity',
  '+1',
  ' 1',
  '1 ',
  '١٢',
  '',
];

export const NAME_LIKE = fc.stringMatching(/^[A-Za-z0-9_.-]{1,30}$/);
export const HEX40 = fc.stringMatching(/^[0-9a-f]{40}$/);

export const segmentText: Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...HOSTILE_SEGMENTS) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }).map(pct) },
  {
    weight: 1,
    arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }).map((s) => pct(s.normalize('NFD'))),
  },
  { weight: 1, arbitrary: fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String) },
  { weight: 1, arbitrary: fc.double().map(String) },
);

/** A JSON text that may hold tokens JSON.stringify cannot write: 1e309, 2^63, deep nesting. */
class RawJson {
  constructor(readonly text: string) {}
}

export function jsonText(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (Array.isArray(value)) return `[${value.map(jsonText).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value as Record<string, unknown>)
      .map(([k, v]) => `${JSON.stringify(k)}:${jsonText(v)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

const RAW_NUMBERS = [
  '1e309',
  '-1e309',
  '9223372036854775808',
  '-9223372036854775809',
  '18446744073709551616',
  '1e-400',
  '0.0000001',
  '-0',
  '4294967296',
  '2147483648',
];

export const wrongValue: Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(null, true, false, 0, -1, 1.5, '', [], {}, [null], { '': null }),
  fc.constantFrom(...RAW_NUMBERS).map((n) => new RawJson(n)),
  fc.jsonValue({ maxDepth: 2 }),
);

// Globs that made the old RegExp matchers backtrack for minutes (issue 13), at and
// over the limits (1,000 characters, 64 wildcards), and deep or unclosed braces.
const HOSTILE_GLOBS = [
  `${'*a'.repeat(20)}*b`,
  `${'*a'.repeat(32)}*`,
  `${'*a'.repeat(65)}*b`,
  `${'{a,aa}'.repeat(150)}b`,
  '{'.repeat(999),
  `${'{a,'.repeat(300)}b${'}'.repeat(300)}`,
  '*'.repeat(1001),
  '{unclosed',
  'release-*',
];

/** Strings that look like names, refs, URLs or nothing at all; some create things, some break things. */
export function stringsFor(field: string, world: FuzzWorld, strict = false): Arbitrary<string> {
  const plausible: Record<string, string[]> = {
    type: ['forgejo', 'gitea', 'gogs', 'slack', 'discord', 'matrix', 'packagist', 'bogus'],
    url: [
      'http://example.com/hook',
      'https://example.com/h?a=b',
      'http://127.0.0.1:9/x',
      'http://[::1]/',
      'file:///etc/passwd',
      'ftp://x',
      'http://',
      'http://exa mple.com',
      'javascript:alert(1)',
    ],
    content_type: ['json', 'form', 'xml', ''],
    permission: ['read', 'write', 'admin', 'owner', 'none', 'bogus'],
    visibility: ['public', 'limited', 'private', 'bogus'],
    ref: [
      'main',
      'refs/heads/main',
      'v1',
      'refs/tags/nope',
      world.values.sha,
      'HEAD',
      '-h',
      '--upload-pack=x',
      '..',
      'main..other',
      'main^{}',
      'main@{1}',
    ],
    default_branch: ['main', 'dev', '-x', 'a..b', 'a b', 'refs/heads/main', '.lock', 'x.lock'],
    object_format_name: ['sha1', 'sha256', 'md5'],
    branch_filter: ['*', 'main', '{main,dev}', '[', '**/*', '\\', ...HOSTILE_GLOBS],
    email: ['a@example.com', 'root@example.com', 'not-an-email', '@', 'a@b'],
    events: ['push', 'create', 'delete', 'repository', 'pull_request', 'bogus'],
    units: ['repo.code', 'repo.actions', 'repo.bogus'],
    scopes: ['all', 'read:repository', 'write:admin', 'public-only', 'bogus:scope', 'read:'],
  };
  const known = plausible[field] ?? ['fuzz-thing', 'alice', 'acme', 'app', 'FUZZ_VAR', 'ci.yml', 'main'];
  if (strict) return fc.oneof({ weight: 2, arbitrary: fc.constantFrom(...known) }, { weight: 1, arbitrary: NAME_LIKE });
  return fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...known) },
    { weight: 2, arbitrary: NAME_LIKE },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        '',
        ' ',
        '..',
        '../x',
        '.git',
        'a/b',
        '-rf',
        'x'.repeat(300),
        'x'.repeat(70_000),
        '\u202Eevil',
        '🚀',
        'e\u0301',
        'é',
        '\r\n',
        'a\u0000b',
        '\uD800',
        '%00',
        '${{ secrets.X }}',
        '<script>',
        "'; DROP TABLE user; --",
      ),
    },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 50 }) },
    // Long and random, so it does not compress below PostgreSQL's index entry limit (~2.7 KB).
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 3000, maxLength: 4000 }) },
  );
}

/** A value for `schema`: mostly of the right type; `strict` leaves out the wrong ones and keeps required keys. */
export function valueFor(
  schema: JsonSchema | undefined,
  field: string,
  world: FuzzWorld,
  depth: number,
  strict = false,
): Arbitrary<unknown> {
  if (schema === undefined || depth > 3) return wrongValue;
  const good = goodValueFor(schema, field, world, depth, strict);
  return strict ? good : fc.oneof({ weight: 4, arbitrary: good }, { weight: 1, arbitrary: wrongValue });
}

function goodValueFor(
  schema: JsonSchema,
  field: string,
  world: FuzzWorld,
  depth: number,
  strict: boolean,
): Arbitrary<unknown> {
  if (schema.enum && schema.enum.length > 0) return fc.constantFrom(...schema.enum);
  if (schema.anyOf && schema.anyOf.length > 0)
    return fc.oneof(...schema.anyOf.map((s) => valueFor(s, field, world, depth + 1, strict)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      return stringsFor(field, world, strict);
    case 'integer':
    case 'number':
      return strict
        ? fc.integer({ min: 0, max: 100 })
        : fc.oneof(
            fc.integer({ min: -5, max: 100 }),
            fc.constantFrom(...RAW_NUMBERS).map((n) => new RawJson(n)),
            fc.double(),
          );
    case 'boolean':
      return fc.boolean();
    case 'array':
      return fc.array(valueFor(schema.items, field, world, depth + 1, strict), { maxLength: strict ? 3 : 6 });
    case 'object': {
      const props = schema.properties ?? {};
      const known = fc.record(
        Object.fromEntries(Object.entries(props).map(([key, s]) => [key, valueFor(s, key, world, depth + 1, strict)])),
        { requiredKeys: strict ? (schema.required ?? []).filter((key) => key in props) : [] },
      );
      const extra =
        typeof schema.additionalProperties === 'object'
          ? fc.dictionary(
              stringsFor(field, world, strict),
              valueFor(schema.additionalProperties, field, world, depth + 1, strict),
              { maxKeys: 4 },
            )
          : fc.constant({});
      return fc.tuple(known, extra).map(([a, b]) => ({ ...b, ...a }));
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}
