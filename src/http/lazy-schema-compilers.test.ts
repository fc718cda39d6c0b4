import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import { Ajv } from 'ajv';
import { PendingCompiles, lazySerializerFactory, lazyValidator } from './lazy-schema-compilers.ts';

const schema = {
  type: 'object',
  properties: { name: { type: 'string', minLength: 2 }, size: { type: 'integer' } },
  required: ['name'],
};

test('a body validator is compiled on its first call, with the eager one’s answers and errors', () => {
  const ajv = new Ajv({ coerceTypes: false, removeAdditional: true, allErrors: false, strict: false });
  let compiles = 0;
  const pending = new PendingCompiles();
  const validate = lazyValidator(() => {
    compiles += 1;
    return ajv.compile(schema);
  }, pending);
  const eager = ajv.compile(schema);
  assert.equal(compiles, 0, 'nothing compiled before the route is used');
  for (const body of [{ name: 'ok', size: 3 }, { name: 'x' }, { size: 'big' }, null, { name: 'fine' }]) {
    assert.equal(validate(body), eager(body), JSON.stringify(body));
    assert.deepEqual(validate.errors, eager.errors, JSON.stringify(body));
  }
  assert.equal(compiles, 1, 'compiled once');
  assert.equal(pending.compileAll(), 0, 'no longer pending once compiled');
});

test('a response serializer is compiled on its first call and writes what Fastify’s eager one writes', () => {
  const route = { method: 'GET', url: '/x', httpStatus: '200', schema };
  const lazy = lazySerializerFactory(new PendingCompiles())({}, {})(route);
  const eager = SerializerSelector()({}, {})(route);
  for (const doc of [
    { name: 'a"b', size: 2, extra: true },
    { name: 'é', size: 1.5 },
  ]) {
    assert.equal(lazy(doc), eager(doc));
  }
  // A schema the compiler refuses is refused on the first call, not when the route is registered.
  const pending = new PendingCompiles();
  const refused = lazySerializerFactory(pending)({}, {})({ ...route, schema: { $ref: '#/nowhere' } });
  assert.throws(() => refused({}));
  // And by compileAll, which a test runs over a started server's routes (test/api/route-schemas.test.ts).
  lazySerializerFactory(pending)({}, {})({ ...route, schema: { $ref: '#/nowhere' } });
  assert.throws(() => pending.compileAll());
});
