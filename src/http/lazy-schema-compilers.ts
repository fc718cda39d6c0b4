// Route schemas compiled on a route's first use, not as the server starts.
//
// Fastify compiles every route's body validator (Ajv) and every response
// serializer (fast-json-stringify) when the server becomes ready: a few
// hundred generated functions, their sources and their closures, about 3.5 MB
// of heap that a server mostly serving runners never calls. Kept for the
// process's life, those megabytes count several times in its RSS, since V8
// lets the old generation grow to a multiple of what is alive before it
// collects it (an idle fleet's held polls grow it all the time).
//
// Here each compiler returns a stand-in that compiles on its first call and
// then calls the compiled function, so a route's answers and validation
// errors are exactly those of the eager compile (the same compiler, the same
// schema, the same options). The cost: a schema the compiler refuses is found
// on the first request of its route (a 500) instead of at start;
// src/http/lazy-schema-compilers.test.ts compiles every route's schemas so
// that a test finds it first.
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { SerializerCompiler, SerializerFactory } from '@fastify/fast-json-stringify-compiler';
import type { ErrorObject } from 'ajv';

/** A validator as Fastify calls it: true or false, with the errors of the last call on `errors`. */
export interface Validator {
  (data: unknown): boolean;
  errors?: ErrorObject[] | null;
}

/** `compile(schema)`, deferred to the stand-in's first call. */
export function lazyValidator(compile: () => Validator): Validator {
  let compiled: Validator | null = null;
  const validate: Validator = (data) => {
    compiled ??= compile();
    const valid = compiled(data);
    // Fastify reads the errors off the function it was given.
    validate.errors = compiled.errors;
    return valid;
  };
  return validate;
}

/** Fastify's own serializer factory (fast-json-stringify, the same options), each serializer compiled on first use. */
export function lazySerializerFactory(): SerializerFactory {
  const eager = SerializerSelector();
  return (externalSchemas, options): SerializerCompiler => {
    const compile = eager(externalSchemas, options);
    return (route) => {
      let serialize: ((doc: unknown) => string) | null = null;
      return (doc) => (serialize ??= compile(route))(doc);
    };
  };
}
