// Request bodies for fuzz requests, per kind of route: JSON for the REST API
// (schema-shaped, wrong, malformed, oversized, not JSON), protobuf for the
// runner protocol (binary or JSON, gzip, gzip bombs, junk), pkt-lines for git.
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import type { Arbitrary } from 'fast-check';
import { ScalarType, fromJson, toBinary } from '@bufbuild/protobuf';
import type { DescField, DescMessage, JsonValue } from '@bufbuild/protobuf';
import type { FuzzRoute, JsonSchema } from './routes.ts';
import { HEX40, NAME_LIKE, NUMBERS_AS_TEXT, pct, jsonText, stringsFor, valueFor, wrongValue } from './values.ts';
import type { FuzzWorld } from './world.ts';

export interface Body {
  contentType: string | null;
  body: Buffer | null;
  encoding?: string;
}

const JSON_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json;charset=UTF-8',
  'APPLICATION/JSON',
  'application/json; charset=latin1',
  'application/json; charset=utf-16',
  'application/json;',
  'application/vnd.api+json',
  'text/json',
  'application/json, text/plain',
];
const OTHER_TYPES = [
  'text/plain',
  'application/xml',
  'multipart/form-data; boundary=x',
  'multipart/form-data',
  'application/octet-stream',
  '*/*',
  'application/x-www-form-urlencoded',
  'application/proto',
  'application/connect+proto',
  'application/grpc',
  'application/x-git-upload-pack-request',
  'application/x-git-receive-pack-request',
  ';',
  'a/b/c',
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
    .tuple(
      fc.constantFrom(...fields, 'data'),
      fc.integer({ min: 60_000, max: 1_100_000 }),
      fc.constantFrom('x', 'é', '\\u0000', '\\ud800'),
    )
    .map(([field, length, unit]) =>
      json(`{${JSON.stringify(field)}:"${unit.repeat(Math.floor(length / Math.max(1, Buffer.byteLength(unit))))}"}`),
    );
}

function shaped(schema: JsonSchema | null, world: FuzzWorld): Arbitrary<unknown> {
  return schema ? valueFor(schema, '', world, 0) : fc.jsonValue({ maxDepth: 3 });
}

/** Bodies for REST routes: shaped like the schema, wrong, malformed, oversized, or not JSON at all. */
export function apiBody(route: FuzzRoute, world: FuzzWorld): Arbitrary<Body> {
  const fields = Object.keys(route.body?.properties ?? {});
  const fieldNames = fields.length > 0 ? fields : ['name', 'data', 'value'];
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant<Body>({ contentType: null, body: null }) },
    {
      weight: 8,
      arbitrary: fc
        .tuple(shaped(route.body, world), fc.constantFrom(...JSON_TYPES))
        .map(([v, t]) => json(jsonText(v), t)),
    },
    { weight: 2, arbitrary: fc.jsonValue().map((v) => json(JSON.stringify(v))) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(
          shaped(route.body, world),
          fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty'),
          fc.jsonValue({ maxDepth: 2 }),
        )
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
      arbitrary: fc
        .tuple(fc.constantFrom(...fieldNames), fc.uint8Array({ minLength: 1, maxLength: 12 }))
        .map(([field, bytes]) => ({
          contentType: 'application/json',
          body: Buffer.concat([
            Buffer.from(`{"${field}":"`),
            Buffer.from([0xff, 0xfe, 0xc0, 0xaf, 0xed, 0xa0, 0x80]),
            Buffer.from(bytes),
            Buffer.from('"}'),
          ]),
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
        .array(
          fc.tuple(
            fc.constantFrom(...fieldNames, 'inputs[x]', 'inputs[]', 'inputs[__proto__]', 'return_run_info'),
            fc.string({ unit: 'binary', maxLength: 20 }),
          ),
          { maxLength: 6 },
        )
        .map((pairs) => ({
          contentType: 'application/x-www-form-urlencoded',
          body: Buffer.from(pairs.map(([k, v]) => `${pct(k)}=${pct(v)}`).join('&')),
        })),
    },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom(...OTHER_TYPES), fc.uint8Array({ maxLength: 64 }))
        .map(([t, bytes]) => ({ contentType: t, body: Buffer.from(bytes) })),
    },
    { weight: 1, arbitrary: fc.constantFrom(...JSON_TYPES).map((t) => ({ contentType: t, body: Buffer.alloc(0) })) },
    {
      weight: 1,
      arbitrary: fc
        .constantFrom('   ', '\n', 'null', '""', '0', 'true', '[]', '{}', '{"a":1}garbage', '\uFEFF{}')
        .map((text) => json(text)),
    },
  );
}

function scalarValue(scalar: ScalarType, field: string, world: FuzzWorld, strict: boolean): Arbitrary<unknown> {
  switch (scalar) {
    case ScalarType.STRING:
      // Register's token: the fixture's registration token most of the time, so registration goes through.
      if (field === 'token') {
        return strict
          ? fc.constant(world.values.registrationToken)
          : fc.oneof(
              { weight: 3, arbitrary: fc.constant(world.values.registrationToken) },
              { weight: 1, arbitrary: fc.constantFrom(world.runner.token, '') },
              { weight: 1, arbitrary: stringsFor(field, world) },
            );
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
    const now = fc
      .date({ min: new Date('2020-01-01T00:00:00Z'), max: new Date('2030-01-01T00:00:00Z'), noInvalidDate: true })
      .map((d) => d.toISOString());
    return strict
      ? now
      : fc.oneof(
          now,
          fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
          fc.constantFrom('0001-01-01T00:00:00Z', '9999-12-31T23:59:59Z', 'yesterday', ''),
        );
  }
  if (desc.typeName === 'google.protobuf.Struct' || depth > 3)
    return fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 });
  const entries = desc.fields.map((f) => {
    const good = fieldValue(f, world, depth, strict);
    return [
      f.jsonName,
      strict ? good : fc.oneof({ weight: 5, arbitrary: good }, { weight: 1, arbitrary: wrongValue }),
    ] as const;
  });
  return fc.record(Object.fromEntries(entries), { requiredKeys: [] });
}

function fieldValue(field: DescField, world: FuzzWorld, depth: number, strict: boolean): Arbitrary<unknown> {
  switch (field.fieldKind) {
    case 'scalar':
      return scalarValue(field.scalar, field.localName, world, strict);
    case 'enum':
      return strict
        ? fc.constantFrom(...field.enum.values.map((v) => v.name))
        : fc.oneof(fc.constantFrom(...field.enum.values.map((v) => v.name)), fc.integer({ min: -2, max: 10 }));
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
      return fc.dictionary(
        fc.string({ maxLength: 10 }),
        strict ? NAME_LIKE : fc.string({ unit: 'binary', maxLength: 20 }),
        { maxKeys: 4 },
      );
  }
}

/** A message as binary protobuf when it encodes, else its JSON under the binary type. */
function asBinary(message: DescMessage | null, value: unknown): Body {
  if (message) {
    try {
      return {
        contentType: 'application/proto',
        body: Buffer.from(toBinary(message, fromJson(message, value as JsonValue, { ignoreUnknownFields: true }))),
      };
    } catch {
      // Not a valid message: sent as it is.
    }
  }
  return { contentType: 'application/proto', body: Buffer.from(JSON.stringify(value) ?? '') };
}

/** Inflated sizes of the gzip bombs: past every method's cap but UpdateLog's, and far past the small ones. */
const BOMB_SIZES = [1024 * 1024, 40 * 1024 * 1024, 300 * 1024 * 1024];
const zerosGzipped = new Map<number, Buffer>();

function varint(value: number): number[] {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  bytes.push(rest);
  return bytes;
}

/**
 * A gzip bomb of a few KiB to a few hundred: `message`, then an unknown
 * length-delimited field (number 15) of `size` zero bytes, so it still
 * decodes as the method's request once inflated. Two gzip members back to
 * back (readers take both, as Go's and Node's do); the zeros' member is
 * made once per size.
 */
function gzipBomb(message: Buffer, size: number): Buffer {
  let zeros = zerosGzipped.get(size);
  if (zeros === undefined) {
    zeros = gzipSync(Buffer.alloc(size), { level: 9 });
    zerosGzipped.set(size, zeros);
  }
  return Buffer.concat([gzipSync(Buffer.concat([message, Buffer.from([0x7a, ...varint(size)])])), zeros]);
}

/** Bodies for Connect routes: protobuf (binary or JSON) shaped like the method's request, gzip (bombs too), or junk. */
export function rpcBody(route: FuzzRoute, world: FuzzWorld): Arbitrary<Body> {
  const message = route.message;
  const shapedMessage: Arbitrary<unknown> = message ? messageValue(message, world, 0) : fc.jsonValue();
  const binary = shapedMessage.map((value) => asBinary(message, value));
  return fc.oneof(
    {
      weight: 4,
      arbitrary: fc
        .tuple(
          shapedMessage,
          fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/json; charset=latin1'),
        )
        .map(([v, t]) => json(jsonText(v), t)),
    },
    { weight: 4, arbitrary: binary },
    { weight: 1, arbitrary: binary.map((b) => ({ ...b, body: b.body ? gzipSync(b.body) : null, encoding: 'gzip' })) },
    {
      weight: 1,
      arbitrary: fc
        .uint8Array({ maxLength: 200 })
        .map((b) => ({ contentType: 'application/proto', body: Buffer.from(b), encoding: 'gzip' })),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(binary, fc.constantFrom(...BOMB_SIZES)).map(([b, size]) => ({
        contentType: 'application/proto',
        body: gzipBomb(b.body ?? Buffer.alloc(0), size),
        encoding: 'gzip',
      })),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(...BOMB_SIZES).map((size) => ({
        contentType: 'application/json',
        body: gzipBomb(Buffer.from('{"data":"'), size),
        encoding: 'gzip',
      })),
    },
    {
      weight: 1,
      arbitrary: fc
        .uint8Array({ maxLength: 200 })
        .map((b) => ({ contentType: 'application/proto', body: Buffer.from(b) })),
    },
    { weight: 1, arbitrary: apiBody(route, world) },
  );
}

function pktLine(text: string): string {
  return `${(text.length + 4).toString(16).padStart(4, '0')}${text}`;
}

/** Bodies for git's smart HTTP: pkt-lines that are almost right, broken lengths, gzip, junk. */
export function gitBody(route: FuzzRoute, world: FuzzWorld): Arbitrary<Body> {
  const zero = '0'.repeat(40);
  const sha = fc.oneof(fc.constantFrom(world.values.sha, zero), HEX40);
  const line = fc.oneof(
    sha.map((s) => pktLine(`want ${s}\n`)),
    sha.map((s) => pktLine(`have ${s}\n`)),
    fc
      .tuple(
        sha,
        sha,
        fc.constantFrom(
          'refs/heads/main',
          'refs/heads/x',
          'refs/tags/v1',
          'HEAD',
          'refs/heads/../x',
          'refs/heads/a..b',
          'refs/heads/😀',
        ),
      )
      .map(([a, b, ref]) => pktLine(`${a} ${b} ${ref}\u0000report-status side-band-64k\n`)),
    fc.constantFrom(
      '0000',
      '0001',
      '0002',
      pktLine('done\n'),
      pktLine('command=ls-refs\n'),
      pktLine('command=fetch\n'),
      pktLine('deepen 2147483648\n'),
      pktLine('agent=git/2.40\n'),
      'zzzz',
      'ffff',
      '0004',
      '0003',
    ),
    fc.string({ maxLength: 30 }).map(pktLine),
  );
  const type = route.template.endsWith('git-receive-pack')
    ? 'application/x-git-receive-pack-request'
    : 'application/x-git-upload-pack-request';
  const pkt = fc.array(line, { maxLength: 8 }).map((lines) => Buffer.from(lines.join('')));
  return fc.oneof(
    { weight: 4, arbitrary: pkt.map((b) => ({ contentType: type, body: b })) },
    { weight: 1, arbitrary: pkt.map((b) => ({ contentType: type, body: gzipSync(b), encoding: 'gzip' })) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.uint8Array({ maxLength: 300 }), fc.constantFrom('gzip', 'x-gzip', 'deflate', 'br', 'bogus'))
        .map(([b, e]) => ({ contentType: type, body: Buffer.from(b), encoding: e })),
    },
    { weight: 1, arbitrary: apiBody(route, world) },
  );
}

/** What a well-behaved client sends: a body of the schema's shape, right types, required keys. */
export function plausibleBody(route: FuzzRoute, world: FuzzWorld): Arbitrary<Body> {
  if (route.kind === 'rpc') {
    const value = route.message ? messageValue(route.message, world, 0, true) : fc.constant({});
    return fc.oneof(
      value.map((v) => json(jsonText(v))),
      value.map((v) => asBinary(route.message, v)),
    );
  }
  if (route.kind === 'git') return gitBody(route, world);
  if (route.body === null) return fc.constant<Body>({ contentType: null, body: null });
  return valueFor(route.body, '', world, 0, true).map((v) => json(jsonText(v)));
}
