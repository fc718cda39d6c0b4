// Request bodies as Forgejo's binding reads them: JSON, or form-encoded fields.
// An empty body is an empty object, so missing fields fail as "Required"
// rather than as a parse error; bodiless PUT/DELETE calls work whatever
// Content-Type a client sends with them.
import type { FastifyInstance } from 'fastify';
import { goFieldName } from './errors.ts';

class BodyError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
  }
}

export function installBodyParsers(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, {});
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      return done(new BodyError(422, `[]: invalid JSON body: ${withoutExcerpt((error as Error).message)}`), undefined);
    }
    const field = fieldWithNul(parsed, '');
    if (field !== null) return done(new BodyError(422, `[${field}]: must not contain NUL characters`), undefined);
    done(null, parsed);
  });
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    const fields: Record<string, string> = {};
    for (const [key, value] of new URLSearchParams(String(body))) fields[key] ??= value;
    const field = fieldWithNul(fields, '');
    if (field !== null) return done(new BodyError(422, `[${field}]: must not contain NUL characters`), undefined);
    done(null, fields);
  });
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => {
    if ((body as Buffer).length === 0) return done(null, {});
    done(new BodyError(415, 'unsupported content type; send application/json'), undefined);
  });
}

/**
 * V8 quotes a piece of the body in JSON syntax errors (`Unexpected token 'x',
 * "{"data": x…" is not valid JSON`); the body may hold a secret, which must not
 * come back in an error message or reach a log.
 */
function withoutExcerpt(message: string): string {
  return message.replace(/, ".*" is not valid JSON$/s, '').replace(/, ".*"\.\.\. is not valid JSON$/s, '');
}

/**
 * PostgreSQL cannot store U+0000 in text and no name may contain it: such a
 * value is refused up front instead of failing deep in the database. The
 * walk keeps its own stack: a body may nest as deep as its size allows
 * (`[[[[…` in 1 MiB), far past the call stack.
 */
function fieldWithNul(root: unknown, rootKey: string): string | null {
  const pending: [unknown, string][] = [[root, rootKey]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [value, key] = next;
    if (typeof value === 'string') {
      if (value.includes('\u0000')) return key;
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) pending.push([value[i], key]);
    } else if (value && typeof value === 'object') {
      const entries = Object.entries(value);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, v] = entries[i] as [string, unknown];
        pending.push([v, goFieldName(k)]);
      }
    }
  }
  return null;
}

/**
 * The first query parameter with U+0000 in its value (`?sudo=%00`), or null:
 * such a value can match nothing stored, and PostgreSQL refuses it outright.
 */
export function queryParameterWithNul(query: unknown): string | null {
  if (typeof query !== 'object' || query === null) return null;
  for (const [key, value] of Object.entries(query)) {
    const values: unknown[] = Array.isArray(value) ? value : [value];
    if (values.some((v) => typeof v === 'string' && v.includes('\u0000'))) return key;
  }
  return null;
}

/** A path parameter with U+0000 cannot name anything stored: it is simply not found. */
export function hasNulParam(params: unknown): boolean {
  if (typeof params !== 'object' || params === null) return false;
  // A loop, not Object.values(…).some(…): this runs on every API request.
  const values = params as Record<string, unknown>;
  for (const key in values) {
    const value = values[key];
    if (typeof value === 'string' && value.includes('\u0000')) return true;
  }
  return false;
}
