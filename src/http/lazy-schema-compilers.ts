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
// on the first request of its route (a 500) instead of at start, unless a
// test finds it first: every stand-in not yet compiled is listed, and
// test/api/route-schemas.test.ts compiles them all (compileEveryPending) for
// a started server.
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { SerializerCompiler, SerializerFactory } from '@fastify/fast-json-stringify-compiler';
import type { ErrorObject } from 'ajv';

/** One server's stand-ins not called yet; each removes itself once compiled. */
export class PendingCompiles {
  private readonly compiles = new Set<() => void>();

  add(compile: () => void): void {
    this.compiles.add(compile);
  }

  delete(compile: () => void): void {
    this.compiles.delete(compile);
  }

  /** Compiles every stand-in not compiled yet (a compiler's refusal is thrown from here); how many it compiled. */
  compileAll(): number {
    const compiles = [...this.compiles];
    for (const compile of compiles) compile();
    return compiles.length;
  }
}

/** Each server's pending compiles, by its Fastify instance (a server closed and dropped takes its list along). */
const pendingByServer = new WeakMap<object, PendingCompiles>();

export function trackPendingCompiles(server: object, pending: PendingCompiles): void {
  pendingByServer.set(server, pending);
}

/** Compiles every route schema of `server` not compiled yet; how many. Throws what a compiler refuses. */
export function compileEveryPending(server: object): number {
  return pendingByServer.get(server)?.compileAll() ?? 0;
}

/** A validator as Fastify calls it: true or false, with the errors of the last call on `errors`. */
export interface Validator {
  (data: unknown): boolean;
  errors?: ErrorObject[] | null;
}

/** `compile(schema)`, deferred to the stand-in's first call. */
export function lazyValidator(compile: () => Validator, pending: PendingCompiles): Validator {
  let compiled: Validator | null = null;
  const compileOnce = (): Validator => {
    if (compiled === null) {
      compiled = compile();
      pending.delete(compileOnce);
    }
    return compiled;
  };
  pending.add(compileOnce);
  const validate: Validator = (data) => {
    const valid = compileOnce()(data);
    // Fastify reads the errors off the function it was given.
    validate.errors = (compiled as Validator).errors;
    return valid;
  };
  return validate;
}

/** Fastify's own serializer factory (fast-json-stringify, the same options), each serializer compiled on first use. */
export function lazySerializerFactory(pending: PendingCompiles): SerializerFactory {
  const eager = SerializerSelector();
  return (externalSchemas, options): SerializerCompiler => {
    const compile = eager(externalSchemas, options);
    return (route) => {
      let serialize: ((doc: unknown) => string) | null = null;
      const compileOnce = (): ((doc: unknown) => string) => {
        if (serialize === null) {
          serialize = compile(route);
          pending.delete(compileOnce);
        }
        return serialize;
      };
      pending.add(compileOnce);
      return (doc) => compileOnce()(doc);
    };
  };
}
