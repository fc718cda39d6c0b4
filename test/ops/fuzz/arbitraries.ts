// fast-check arbitraries for hostile HTTP requests against one route: path
// segments, query strings, headers, credentials and bodies, each a mix of
// values that reach deep into the handlers (the fixture's real names, bodies
// shaped like the route's schema) and values meant to break parsers.
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import type { Arbitrary } from 'fast-check';
import { ScalarType, fromJson, toBinary } from '@bufbuild/protobuf';
import type { DescField, DescMessage, JsonValue } from '@bufbuild/protobuf';
import type { FuzzRoute, JsonSchema } from './routes.ts';
import { HTTP_METHODS } from './routes.ts';

/** What the arbitraries need to know about the fixture. */
export interface FuzzWorld {
  identities: Record<'admin' | 'user', { name: string; password: string; token: string }>;
  runner: { uuid: string; token: string };
  /** Existing names and ids per path parameter (`owner`, `repo`, `run_id`…). */
  pools: Record<string, string[]>;
  /** Names and ids that DELETE and PATCH may destroy, per parameter. */
  disposable: Record<string, string[]>;
  /** Existing [owner, repo] pairs, and those DELETE and PATCH may destroy: drawn together, so both exist. */
  repos: { existing: [string, string][]; disposable: [string, string][] };
  /** Values that make sense inside bodies and queries (a commit id, a task id…). */
  values: { sha: string; taskId: string; runnerUuid: string; registrationToken: string; labels: string[] };
}

export interface FuzzRequest {
  method: string;
  /** The raw request target: path and query exactly as sent (no normalization). */
  path: string;
  headers: Record<string, string | string[]>;
  body: Buffer | null;
  /** For reports: what the request was built to exercise. */
  route: string;
  auth: string;
}

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
  '..', '.', '%2e%2e', '%2E%2e%2F', '..%2F..%2Fetc%2Fpasswd', '%2e', '%00', 'a%00b', '%2F', 'a%2Fb', '%5C', '%5C..%5C',
  '%', '%zz', '%C0%AE%C0%AE', '%FF%FE', '%ED%A0%80', '%EF%BF%BF', pct('\u202Eexe.txt'), pct('\u200B'), pct('🚀'), pct('👩‍👩‍👧'),
  pct('é'), pct('e\u0301'), pct('İ'), pct('ß'), pct('Ω'), pct('ﬁ'), pct('Ａ'), 'x'.repeat(499), 'x'.repeat(500), 'x'.repeat(501),
  pct('ä'.repeat(250)), '-1', '0', '00', '01', '1e309', '1e3', '9223372036854775807', '9223372036854775808', '-9223372036854775809',
  '18446744073709551616', '99999999999999999999999', '0x10', '1.5', '+1', '%2B1', 'NaN', 'Infinity', '%20', '%09', '%0A',
  '%0D%0A', ';', ',', "'", '%22', '%27%20OR%201%3D1--', '%3Cscript%3E', '~', '-', '_', 'a.git', '.git', 'app.git.git',
  'CON', 'null', 'undefined', '__proto__', 'constructor', 'prototype', 'hasOwnProperty', '%24%7Bjndi%7D', '*', '%2A',
];

const NUMBERS_AS_TEXT: string[] = [
  '-1', '0', '1', '2', '1e309', '-1e309', '1e3', '1.5', '4294967296', '9007199254740991', '9007199254740993', '9223372036854775807', '9223372036854775808',
  '18446744073709551616', '0x10', 'NaN', 'Infinity', '+1', ' 1', '1 ', '١٢', '',
];

const NAME_LIKE = fc.stringMatching(/^[A-Za-z0-9_.-]{1,30}$/);
const HEX40 = fc.stringMatching(/^[0-9a-f]{40}$/);

const segmentText: Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...HOSTILE_SEGMENTS) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }).map(pct) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 20 }).map((s) => pct(s.normalize('NFD'))) },
  { weight: 1, arbitrary: fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String) },
  { weight: 1, arbitrary: fc.double().map(String) },
);

/** The fixture's values for a parameter: the disposable ones when the request may destroy its target. */
function destroys(name: string, route: FuzzRoute, method: string): boolean {
  return (method === 'DELETE' || method === 'PATCH') && name === route.params[route.params.length - 1];
}

function validValues(name: string, world: FuzzWorld, route: FuzzRoute, method: string): string[] {
  const valid = destroys(name, route, method) ? (world.disposable[name] ?? []) : (world.pools[name] ?? []);
  return route.kind === 'git' && name === 'repo' ? valid.flatMap((r) => [`${r}.git`, r]) : valid;
}

function hostileSegment(name: string): Arbitrary<string> {
  // Token ids are never guessed: a DELETE must not revoke the tokens the fuzzer signs in with.
  return name === 'token' ? segmentText.filter((s) => !/^(\+|%2B)?\d+$/.test(s)) : segmentText;
}

/** Real values for every parameter; `owner` and `repo` as a pair that exists. */
function realSegments(world: FuzzWorld, route: FuzzRoute, method: string): Arbitrary<string[]> {
  const each = route.params.map((name) => {
    const values = validValues(name, world, route, method);
    return values.length > 0 ? fc.constantFrom(...values.map(pct)) : hostileSegment(name);
  });
  const owner = route.params.indexOf('owner');
  const repo = route.params.indexOf('repo');
  if (owner < 0 || repo < 0) return fc.tuple(...each);
  const pairs = destroys('repo', route, method) ? world.repos.disposable : world.repos.existing;
  const suffix = route.kind === 'git' ? fc.constantFrom('.git', '') : fc.constant('');
  return fc.tuple(fc.tuple(...each), fc.constantFrom(...pairs), suffix).map(([values, [o, r], end]) => {
    const out = [...values];
    out[owner] = pct(o);
    out[repo] = `${pct(r)}${end}`;
    return out;
  });
}

/**
 * The route's parameters: all real values in half the requests (so they
 * reach the handlers), otherwise each one real or hostile at random.
 */
function segmentsFor(world: FuzzWorld, route: FuzzRoute, method: string): Arbitrary<string[]> {
  const hostile = route.params.map(hostileSegment);
  return fc
    .tuple(realSegments(world, route, method), fc.tuple(...hostile), fc.boolean(), fc.array(fc.boolean(), { minLength: route.params.length, maxLength: route.params.length }))
    .map(([good, bad, allValid, pickBad]) => good.map((g, i) => (!allValid && pickBad[i] === true ? (bad[i] as string) : g)));
}

const QUERY_KEYS = [
  'page', 'limit', 'status', 'event', 'labels', 'visible', 'run_number', 'head_sha', 'ref', 'workflow_id', 'return_run_details',
  'service', 'sudo', 'token', 'access_token', 'page[]', 'limit[0]', 'page[a]', 'status[]', '__proto__', 'constructor', '',
];

function queryValues(world: FuzzWorld): Arbitrary<string> {
  return fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...NUMBERS_AS_TEXT.map(pct)) },
    {
      weight: 4,
      arbitrary: fc.constantFrom(
        'true', 'false', 'on', 'success', 'failure', 'waiting', 'running', 'cancelled', 'skipped', 'blocked', 'unknown', 'bogus',
        'push', 'workflow_dispatch', 'git-upload-pack', 'git-receive-pack', 'git-upload-archive', 'alice', 'root', 'acme', 'nobody',
        'main', 'refs/heads/main', 'ci.yml', world.values.sha, ...world.values.labels, 'a,b,,c', '%00', '%', '%zz', pct('🚀'), 'x'.repeat(3000),
      ),
    },
    { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }).map(pct) },
  );
}

function queryFor(route: FuzzRoute, world: FuzzWorld): Arbitrary<string> {
  const key = fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...route.query, ...QUERY_KEYS) }, { weight: 1, arbitrary: fc.string({ maxLength: 10 }).map(pct) });
  const pair = fc.oneof(
    { weight: 8, arbitrary: fc.tuple(key, queryValues(world)).map(([k, v]) => `${k}=${v}`) },
    { weight: 1, arbitrary: key },
    { weight: 1, arbitrary: fc.constantFrom('=', '&', '==', 'a=b=c', '%26=%3D', ';', '?') },
  );
  return fc.array(pair, { maxLength: 8 }).map((pairs) => (pairs.length === 0 ? '' : `?${pairs.join('&')}`));
}

/** A JSON text that may hold tokens JSON.stringify cannot write: 1e309, 2^63, deep nesting. */
class RawJson {
  constructor(readonly text: string) {}
}

function jsonText(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (Array.isArray(value)) return `[${value.map(jsonText).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value as Record<string, unknown>).map(([k, v]) => `${JSON.stringify(k)}:${jsonText(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

const RAW_NUMBERS = ['1e309', '-1e309', '9223372036854775808', '-9223372036854775809', '18446744073709551616', '1e-400', '0.0000001', '-0', '4294967296', '2147483648'];

const wrongValue: Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(null, true, false, 0, -1, 1.5, '', [], {}, [null], { '': null }),
  fc.constantFrom(...RAW_NUMBERS).map((n) => new RawJson(n)),
  fc.jsonValue({ maxDepth: 2 }),
);

/** Strings that look like names, refs, URLs or nothing at all; some create things, some break things. */
function stringsFor(field: string, world: FuzzWorld, strict = false): Arbitrary<string> {
  const plausible: Record<string, string[]> = {
    type: ['forgejo', 'gitea', 'gogs', 'slack', 'discord', 'matrix', 'packagist', 'bogus'],
    url: ['http://example.com/hook', 'https://example.com/h?a=b', 'http://127.0.0.1:9/x', 'http://[::1]/', 'file:///etc/passwd', 'ftp://x', 'http://', 'http://exa mple.com', 'javascript:alert(1)'],
    content_type: ['json', 'form', 'xml', ''],
    permission: ['read', 'write', 'admin', 'owner', 'none', 'bogus'],
    visibility: ['public', 'limited', 'private', 'bogus'],
    ref: ['main', 'refs/heads/main', 'v1', 'refs/tags/nope', world.values.sha, 'HEAD', '-h', '--upload-pack=x', '..', 'main..other', 'main^{}', 'main@{1}'],
    default_branch: ['main', 'dev', '-x', 'a..b', 'a b', 'refs/heads/main', '.lock', 'x.lock'],
    object_format_name: ['sha1', 'sha256', 'md5'],
    branch_filter: ['*', 'main', '{main,dev}', '[', '**/*', '\\'],
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
        '', ' ', '..', '../x', '.git', 'a/b', '-rf', 'x'.repeat(300), 'x'.repeat(70_000), '\u202Eevil', '🚀', 'e\u0301', 'é', '\r\n', 'a\u0000b',
        '\uD800', '%00', '${{ secrets.X }}', '<script>', "'; DROP TABLE user; --",
      ),
    },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 50 }) },
  );
}

/** A value for `schema`: mostly of the right type; `strict` leaves out the wrong ones and keeps required keys. */
function valueFor(schema: JsonSchema | undefined, field: string, world: FuzzWorld, depth: number, strict = false): Arbitrary<unknown> {
  if (schema === undefined || depth > 3) return wrongValue;
  const good = goodValueFor(schema, field, world, depth, strict);
  return strict ? good : fc.oneof({ weight: 4, arbitrary: good }, { weight: 1, arbitrary: wrongValue });
}

function goodValueFor(schema: JsonSchema, field: string, world: FuzzWorld, depth: number, strict: boolean): Arbitrary<unknown> {
  if (schema.enum && schema.enum.length > 0) return fc.constantFrom(...schema.enum);
  if (schema.anyOf && schema.anyOf.length > 0) return fc.oneof(...schema.anyOf.map((s) => valueFor(s, field, world, depth + 1, strict)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      return stringsFor(field, world, strict);
    case 'integer':
    case 'number':
      return strict ? fc.integer({ min: 0, max: 100 }) : fc.oneof(fc.integer({ min: -5, max: 100 }), fc.constantFrom(...RAW_NUMBERS).map((n) => new RawJson(n)), fc.double());
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
          ? fc.dictionary(stringsFor(field, world, strict), valueFor(schema.additionalProperties, field, world, depth + 1, strict), { maxKeys: 4 })
          : fc.constant({});
      return fc.tuple(known, extra).map(([a, b]) => ({ ...b, ...a }));
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

interface Body {
  contentType: string | null;
  body: Buffer | null;
  encoding?: string;
}

const JSON_TYPES = [
  'application/json', 'application/json; charset=utf-8', 'application/json;charset=UTF-8', 'APPLICATION/JSON', 'application/json; charset=latin1',
  'application/json; charset=utf-16', 'application/json;', 'application/vnd.api+json', 'text/json', 'application/json, text/plain',
];
const OTHER_TYPES = [
  'text/plain', 'application/xml', 'multipart/form-data; boundary=x', 'multipart/form-data', 'application/octet-stream', '*/*', 'application/x-www-form-urlencoded',
  'application/proto', 'application/connect+proto', 'application/grpc', 'application/x-git-upload-pack-request', 'application/x-git-receive-pack-request', ';', 'a/b/c',
];

const json = (text: string, contentType = 'application/json'): Body => ({ contentType, body: Buffer.from(text) });

function deepNesting(): Arbitrary<Body> {
  return fc
    .tuple(fc.integer({ min: 500, max: 400_000 }), fc.constantFrom('[', '{"a":'), fc.boolean())
    .map(([depth, open, closed]) => {
      const close = open === '[' ? ']' : '}';
      return json(`${open.repeat(depth)}1${closed ? close.repeat(depth) : ''}`);
    });
}

function hugeString(fields: string[]): Arbitrary<Body> {
  return fc
    .tuple(fc.constantFrom(...fields, 'data'), fc.integer({ min: 60_000, max: 1_100_000 }), fc.constantFrom('x', 'é', '\\u0000', '\\ud800'))
    .map(([field, length, unit]) => json(`{${JSON.stringify(field)}:"${unit.repeat(Math.floor(length / Math.max(1, Buffer.byteLength(unit))))}"}`));
}

function shaped(schema: JsonSchema | null, world: FuzzWorld): Arbitrary<unknown> {
  return schema ? valueFor(schema, '', world, 0) : fc.jsonValue({ maxDepth: 3 });
}

/** Bodies for REST routes: shaped like the schema, wrong, malformed, oversized, or not JSON at all. */
function apiBody(route: FuzzRoute, world: FuzzWorld): Arbitrary<Body> {
  const fields = Object.keys(route.body?.properties ?? {});
  const fieldNames = fields.length > 0 ? fields : ['name', 'data', 'value'];
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant<Body>({ contentType: null, body: null }) },
    { weight: 8, arbitrary: fc.tuple(shaped(route.body, world), fc.constantFrom(...JSON_TYPES)).map(([v, t]) => json(jsonText(v), t)) },
    { weight: 2, arbitrary: fc.jsonValue().map((v) => json(JSON.stringify(v))) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(shaped(route.body, world), fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty'), fc.jsonValue({ maxDepth: 2 }))
        .map(([v, k, inner]) => {
          const text = jsonText(v);
          const extra = `${JSON.stringify(k)}:${JSON.stringify(inner) ?? 'null'}`;
          return json(text.startsWith('{') && text !== '{}' ? `{${extra},${text.slice(1)}` : `{${extra}}`);
        }),
    },
    { weight: 1, arbitrary: deepNesting() },
    { weight: 1, arbitrary: hugeString(fieldNames) },
    {
      weight: 1,
      arbitrary: fc.tuple(fc.constantFrom(...fieldNames), fc.uint8Array({ minLength: 1, maxLength: 12 })).map(([field, bytes]) => ({
        contentType: 'application/json',
        body: Buffer.concat([Buffer.from(`{"${field}":"`), Buffer.from([0xff, 0xfe, 0xc0, 0xaf, 0xed, 0xa0, 0x80]), Buffer.from(bytes), Buffer.from('"}')]),
      })),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(shaped(route.body, world), fc.nat()).map(([v, cut]) => {
        const text = jsonText(v);
        return json(text.slice(0, text.length > 1 ? cut % text.length : 0));
      }),
    },
    {
      weight: 1,
      arbitrary: fc
        .array(fc.tuple(fc.constantFrom(...fieldNames, 'inputs[x]', 'inputs[]', 'inputs[__proto__]', 'return_run_info'), fc.string({ unit: 'binary', maxLength: 20 })), { maxLength: 6 })
        .map((pairs) => ({ contentType: 'application/x-www-form-urlencoded', body: Buffer.from(pairs.map(([k, v]) => `${pct(k)}=${pct(v)}`).join('&')) })),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(fc.constantFrom(...OTHER_TYPES), fc.uint8Array({ maxLength: 64 })).map(([t, bytes]) => ({ contentType: t, body: Buffer.from(bytes) })),
    },
    { weight: 1, arbitrary: fc.constantFrom(...JSON_TYPES).map((t) => ({ contentType: t, body: Buffer.alloc(0) })) },
    { weight: 1, arbitrary: fc.constantFrom('   ', '\n', 'null', '""', '0', 'true', '[]', '{}', '{"a":1}garbage', '\uFEFF{}').map((text) => json(text)) },
  );
}

function scalarValue(scalar: ScalarType, field: string, world: FuzzWorld, strict: boolean): Arbitrary<unknown> {
  switch (scalar) {
    case ScalarType.STRING:
      // Register's token: the fixture's registration token most of the time, so registration goes through.
      if (field === 'token') {
        return strict ? fc.constant(world.values.registrationToken) : fc.oneof({ weight: 3, arbitrary: fc.constant(world.values.registrationToken) }, { weight: 1, arbitrary: fc.constantFrom(world.runner.token, '') }, { weight: 1, arbitrary: stringsFor(field, world) });
      }
      return stringsFor(field, world, strict);
    case ScalarType.BOOL:
      return fc.boolean();
    case ScalarType.BYTES:
      return fc.uint8Array({ maxLength: 32 }).map((b) => Buffer.from(b).toString('base64'));
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return fc.double();
    default:
      // Integers: JSON numbers or strings (int64 travels as a string), the fixture's task id, edge values.
      if (strict) return fc.constantFrom(world.values.taskId, '0', '1', '2');
      return fc.oneof(
        fc.constantFrom(world.values.taskId, Number(world.values.taskId), 0, 1, -1, 2147483648),
        fc.constantFrom(...NUMBERS_AS_TEXT),
        fc.bigInt({ min: -(2n ** 64n), max: 2n ** 65n }).map(String),
      );
  }
}

/** A request message as protobuf JSON: fields of the right kind, some of the wrong one unless `strict`. */
function messageValue(desc: DescMessage, world: FuzzWorld, depth: number, strict = false): Arbitrary<unknown> {
  if (desc.typeName === 'google.protobuf.Timestamp') {
    const now = fc.date({ min: new Date('2020-01-01T00:00:00Z'), max: new Date('2030-01-01T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString());
    return strict ? now : fc.oneof(now, fc.date({ noInvalidDate: true }).map((d) => d.toISOString()), fc.constantFrom('0001-01-01T00:00:00Z', '9999-12-31T23:59:59Z', 'yesterday', ''));
  }
  if (desc.typeName === 'google.protobuf.Struct' || depth > 3) return fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 });
  const entries = desc.fields.map((f) => {
    const good = fieldValue(f, world, depth, strict);
    return [f.jsonName, strict ? good : fc.oneof({ weight: 5, arbitrary: good }, { weight: 1, arbitrary: wrongValue })] as const;
  });
  return fc.record(Object.fromEntries(entries), { requiredKeys: [] });
}

function fieldValue(field: DescField, world: FuzzWorld, depth: number, strict: boolean): Arbitrary<unknown> {
  switch (field.fieldKind) {
    case 'scalar':
      return scalarValue(field.scalar, field.localName, world, strict);
    case 'enum':
      return strict ? fc.constantFrom(...field.enum.values.map((v) => v.name)) : fc.oneof(fc.constantFrom(...field.enum.values.map((v) => v.name)), fc.integer({ min: -2, max: 10 }));
    case 'message':
      return messageValue(field.message, world, depth + 1, strict);
    case 'list': {
      const item =
        field.listKind === 'message'
          ? messageValue(field.message, world, depth + 1, strict)
          : field.listKind === 'enum'
            ? fc.constantFrom(...field.enum.values.map((v) => v.name))
            : scalarValue(field.scalar, field.localName, world, strict);
      return fc.array(item, { maxLength: field.localName === 'rows' ? 40 : 5 });
    }
    case 'map':
      return fc.dictionary(fc.string({ maxLength: 10 }), strict ? NAME_LIKE : fc.string({ unit: 'binary', maxLength: 20 }), { maxKeys: 4 });
  }
}

/** A message as binary protobuf when it encodes, else its JSON under the binary type. */
function asBinary(message: DescMessage | null, value: unknown): Body {
  if (message) {
    try {
      return { contentType: 'application/proto', body: Buffer.from(toBinary(message, fromJson(message, value as JsonValue, { ignoreUnknownFields: true }))) };
    } catch {
      // Not a valid message: sent as it is.
    }
  }
  return { contentType: 'application/proto', body: Buffer.from(JSON.stringify(value) ?? '') };
}

/** Bodies for Connect routes: protobuf (binary or JSON) shaped like the method's request, gzip, or junk. */
function rpcBody(route: FuzzRoute, world: FuzzWorld): Arbitrary<Body> {
  const message = route.message;
  const shapedMessage: Arbitrary<unknown> = message ? messageValue(message, world, 0) : fc.jsonValue();
  const binary = shapedMessage.map((value) => asBinary(message, value));
  return fc.oneof(
    { weight: 4, arbitrary: fc.tuple(shapedMessage, fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/json; charset=latin1')).map(([v, t]) => json(jsonText(v), t)) },
    { weight: 4, arbitrary: binary },
    { weight: 1, arbitrary: binary.map((b) => ({ ...b, body: b.body ? gzipSync(b.body) : null, encoding: 'gzip' })) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => ({ contentType: 'application/proto', body: Buffer.from(b), encoding: 'gzip' })) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => ({ contentType: 'application/proto', body: Buffer.from(b) })) },
    { weight: 1, arbitrary: apiBody(route, world) },
  );
}

function pktLine(text: string): string {
  return `${(text.length + 4).toString(16).padStart(4, '0')}${text}`;
}

/** Bodies for git's smart HTTP: pkt-lines that are almost right, broken lengths, gzip, junk. */
function gitBody(route: FuzzRoute, world: FuzzWorld): Arbitrary<Body> {
  const zero = '0'.repeat(40);
  const sha = fc.oneof(fc.constantFrom(world.values.sha, zero), HEX40);
  const line = fc.oneof(
    sha.map((s) => pktLine(`want ${s}\n`)),
    sha.map((s) => pktLine(`have ${s}\n`)),
    fc.tuple(sha, sha, fc.constantFrom('refs/heads/main', 'refs/heads/x', 'refs/tags/v1', 'HEAD', 'refs/heads/../x', 'refs/heads/a..b', 'refs/heads/😀'))
      .map(([a, b, ref]) => pktLine(`${a} ${b} ${ref}\u0000report-status side-band-64k\n`)),
    fc.constantFrom('0000', '0001', '0002', pktLine('done\n'), pktLine('command=ls-refs\n'), pktLine('command=fetch\n'), pktLine('deepen 2147483648\n'), pktLine('agent=git/2.40\n'), 'zzzz', 'ffff', '0004', '0003'),
    fc.string({ maxLength: 30 }).map(pktLine),
  );
  const type = route.template.endsWith('git-receive-pack') ? 'application/x-git-receive-pack-request' : 'application/x-git-upload-pack-request';
  const pkt = fc.array(line, { maxLength: 8 }).map((lines) => Buffer.from(lines.join('')));
  return fc.oneof(
    { weight: 4, arbitrary: pkt.map((b) => ({ contentType: type, body: b })) },
    { weight: 1, arbitrary: pkt.map((b) => ({ contentType: type, body: gzipSync(b), encoding: 'gzip' })) },
    { weight: 1, arbitrary: fc.tuple(fc.uint8Array({ maxLength: 300 }), fc.constantFrom('gzip', 'x-gzip', 'deflate', 'br', 'bogus')).map(([b, e]) => ({ contentType: type, body: Buffer.from(b), encoding: e })) },
    { weight: 1, arbitrary: apiBody(route, world) },
  );
}

/** What a well-behaved client sends: a body of the schema's shape, right types, required keys. */
function plausibleBody(route: FuzzRoute, world: FuzzWorld): Arbitrary<Body> {
  if (route.kind === 'rpc') {
    const value = route.message ? messageValue(route.message, world, 0, true) : fc.constant({});
    return fc.oneof(value.map((v) => json(jsonText(v))), value.map((v) => asBinary(route.message, v)));
  }
  if (route.kind === 'git') return gitBody(route, world);
  if (route.body === null) return fc.constant<Body>({ contentType: null, body: null });
  return valueFor(route.body, '', world, 0, true).map((v) => json(jsonText(v)));
}

/** A query a well-behaved client might send. */
function plausibleQuery(route: FuzzRoute, world: FuzzWorld): Arbitrary<string> {
  if (route.kind === 'git') return fc.constantFrom('?service=git-upload-pack', '?service=git-receive-pack');
  const pair = fc.oneof(
    fc.integer({ min: 1, max: 3 }).map((n) => `page=${n}`),
    fc.integer({ min: 1, max: 60 }).map((n) => `limit=${n}`),
    fc.constantFrom('status=success', 'status=waiting', 'status=running', 'event=push', 'event=workflow_dispatch', 'visible=true', `head_sha=${world.values.sha}`, 'ref=refs/heads/main', 'workflow_id=ci.yml', 'run_number=1', 'labels=fuzz'),
  );
  return fc.oneof({ weight: 2, arbitrary: fc.constant('') }, { weight: 1, arbitrary: fc.array(pair, { minLength: 1, maxLength: 3 }).map((pairs) => `?${pairs.join('&')}`) });
}

type Auth = { label: string; headers: Record<string, string | string[]> };

/** A signed-in client: the admin or the user with a token, or the runner on the runner protocol. */
function plausibleAuth(world: FuzzWorld, route: FuzzRoute): Arbitrary<Auth> {
  if (route.kind === 'rpc') {
    // A deadline, as runners send: a fetch then answers at once instead of holding the batch for its long poll.
    const headers = { 'x-runner-uuid': world.runner.uuid, 'x-runner-token': world.runner.token, 'connect-protocol-version': '1', 'connect-timeout-ms': '1000' };
    return fc.constant<Auth>({ label: 'runner', headers });
  }
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant<Auth>({ label: 'admin', headers: { authorization: `token ${world.identities.admin.token}` } }) },
    { weight: 3, arbitrary: fc.constant<Auth>({ label: 'user', headers: { authorization: `token ${world.identities.user.token}` } }) },
    // Passwords cost a hash each: rarer. Token routes need them (Forgejo's reqBasicAuth).
    { weight: 1, arbitrary: fc.constant<Auth>({ label: 'user', headers: { authorization: basic(world.identities.user.name, world.identities.user.password) } }) },
  );
}

function basic(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
}

function authArbitrary(world: FuzzWorld, route: FuzzRoute): Arbitrary<Auth> {
  const as = (who: 'admin' | 'user'): Arbitrary<Auth> => {
    const id = world.identities[who];
    return fc
      .constantFrom(`token ${id.token}`, `Bearer ${id.token}`, `token ${id.token}`, basic(id.name, id.password), basic(id.name, id.token), basic(id.token, 'x-oauth-basic'), `TOKEN ${id.token}`, `token  ${id.token} `)
      .map((value) => ({ label: who, headers: { authorization: value } }));
  };
  const garbage: Arbitrary<Auth> = fc
    .oneof(
      fc.tuple(fc.constantFrom('token', 'Bearer', 'Basic', 'Digest', 'Negotiate', 'bearer', '', 'token token'), fc.string({ maxLength: 60 }))
        .map(([scheme, v]) => `${scheme} ${v}`),
      fc.constantFrom('Basic', 'Basic ', 'Basic !!!', `Basic ${Buffer.from('nocolon').toString('base64')}`, `Basic ${Buffer.from(':').toString('base64')}`, 'token', 'Bearer ', 'token ' + 'f'.repeat(40), 'Basic ' + 'A'.repeat(12_000)),
      HEX40.map((t) => `token ${t}`),
    )
    .map((value) => ({ label: 'garbage', headers: { authorization: value } }));
  const runner: Arbitrary<Auth> = fc
    .oneof(
      { weight: 4, arbitrary: fc.constant([world.runner.uuid, world.runner.token] as const) },
      {
        weight: 1,
        arbitrary: fc.tuple(fc.constantFrom(world.runner.uuid, world.values.runnerUuid, '', 'not-a-uuid', '00000000-0000-0000-0000-000000000000'), fc.constantFrom(world.runner.token, '', 'x'.repeat(64), 'garbage')),
      },
    )
    .map(([uuid, token]) => ({ label: 'runner', headers: { 'x-runner-uuid': uuid, 'x-runner-token': token } }));
  const duplicate: Arbitrary<Auth> = fc
    .tuple(as('user'), as('admin'))
    .map(([a, b]) => ({ label: 'duplicate', headers: { authorization: [String(a.headers.authorization), String(b.headers.authorization)] } }));
  return fc.oneof(
    { weight: route.kind === 'rpc' ? 1 : 5, arbitrary: as('admin') },
    { weight: route.kind === 'rpc' ? 1 : 5, arbitrary: as('user') },
    { weight: 3, arbitrary: fc.constant<Auth>({ label: 'anonymous', headers: {} }) },
    { weight: 1, arbitrary: garbage },
    { weight: route.kind === 'rpc' ? 8 : 1, arbitrary: runner },
    { weight: 1, arbitrary: duplicate },
  );
}

/** `arb` in about one request out of `outOf`, else nothing. */
function sometimes<T>(arb: Arbitrary<T>, outOf: number): Arbitrary<T | undefined> {
  return fc.oneof({ weight: outOf - 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: arb });
}

/** Headers besides credentials and the body's: sudo, request ids, encodings, protocol versions, padding. */
function extraHeaders(route: FuzzRoute): Arbitrary<Record<string, string>> {
  const printable = fc.string({ maxLength: 40 }).map((s) => s.replace(/[^\x20-\x7e]/g, ''));
  const rpc = route.kind === 'rpc';
  return fc
    .record({
      sudo: sometimes(fc.oneof(fc.constantFrom('alice', 'root', 'acme', 'nobody', '', ' '), printable), 12),
      'x-request-id': sometimes(fc.oneof(printable, fc.constant('r'.repeat(9000))), 8),
      'accept-encoding': sometimes(fc.constantFrom('gzip', 'br', 'deflate', '*', 'identity;q=0', 'bogus'), 6),
      'git-protocol': sometimes(fc.constantFrom('version=2', 'version=1', 'version=999', 'version=2:object-format=sha256', 'x'.repeat(300)), route.kind === 'git' ? 2 : 10),
      'connect-protocol-version': rpc ? fc.oneof({ weight: 8, arbitrary: fc.constant('1') }, { weight: 1, arbitrary: fc.constantFrom('2', 'x', '') }) : sometimes(fc.constant('1'), 10),
      // Mostly set on the runner protocol: without a deadline a fetch holds its batch for the whole long poll.
      'connect-timeout-ms': rpc
        ? fc.oneof({ weight: 4, arbitrary: fc.constantFrom('100', '1000', '1500', '0', '-1', 'abc', '99999999999999999999', '1e3') }, { weight: 1, arbitrary: fc.constant(undefined) })
        : sometimes(fc.constantFrom('100', '1500'), 10),
      // A small set of keys, so that concurrent fetches in one batch share one now and then.
      'x-runner-request-key': sometimes(fc.oneof(fc.constantFrom('fuzz-key-1', 'fuzz-key-2'), printable, fc.constant('k'.repeat(100))), rpc ? 3 : 10),
      accept: sometimes(fc.constantFrom('application/json', '*/*', 'text/html', 'application/proto', ''), 8),
      'x-fuzz-padding': sometimes(fc.constantFrom(4_000, 14_000, 16_000, 16_300, 17_000, 40_000).map((n) => 'p'.repeat(n)), 15),
    })
    .map((headers) => Object.fromEntries(Object.entries(headers).filter((entry): entry is [string, string] => entry[1] !== undefined)));
}

/**
 * One request against `route`: half of them plausible (real names, a
 * body of the right shape, a signed-in client), so they reach the handlers;
 * half hostile in every part. Mostly the route's own method, sometimes
 * another. A batch of these runs concurrently.
 */
export function requestArbitrary(route: FuzzRoute, world: FuzzWorld): Arbitrary<FuzzRequest> {
  const hostile = { query: queryFor(route, world), auth: authArbitrary(world, route), extra: extraHeaders(route), body: route.kind === 'rpc' ? rpcBody(route, world) : route.kind === 'git' ? gitBody(route, world) : apiBody(route, world) };
  const plausible = { query: plausibleQuery(route, world), auth: plausibleAuth(world, route), extra: fc.constant<Record<string, string>>({}), body: plausibleBody(route, world) };
  const build = (m: string, parts: typeof hostile, segments: Arbitrary<string[]>): Arbitrary<FuzzRequest> =>
    fc.tuple(segments, parts.query, parts.auth, parts.extra, parts.body).map(([values, q, a, headersExtra, b]): FuzzRequest => {
      let i = 0;
      const path = route.template.replace(/:(\w+)|\*/g, () => values[i++] ?? '');
      const headers: Record<string, string | string[]> = { ...headersExtra, ...a.headers };
      if (b.contentType !== null) headers['content-type'] = b.contentType;
      if (b.encoding !== undefined) headers['content-encoding'] = b.encoding;
      const sendsBody = m !== 'GET' && m !== 'HEAD' && b.body !== null;
      return { method: m, path: `${path}${q}`, headers, body: sendsBody ? b.body : null, route: `${route.method} ${route.template}`, auth: a.label };
    });
  const forMethod = (m: string): Arbitrary<FuzzRequest> =>
    fc.oneof(build(m, plausible, realSegments(world, route, m)), build(m, hostile, segmentsFor(world, route, m)));
  // Built once per method, not per request: building arbitraries costs more than drawing from them.
  const cache = new Map<string, Arbitrary<FuzzRequest>>();
  const byMethod = (m: string): Arbitrary<FuzzRequest> => {
    let arb = cache.get(m);
    if (arb === undefined) {
      arb = forMethod(m);
      cache.set(m, arb);
    }
    return arb;
  };
  const other = fc.constantFrom(...HTTP_METHODS.filter((m) => m !== route.method)).chain(byMethod);
  return fc.oneof({ weight: 6, arbitrary: byMethod(route.method) }, { weight: 1, arbitrary: other });
}
