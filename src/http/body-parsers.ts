// Request bodies as Forgejo's binding reads them: JSON, or form-encoded fields.
// An empty body is an empty object, so missing fields fail as "Required"
// rather than as a parse error; bodiless PUT/DELETE calls work whatever
// Content-Type a client sends with them.
import type { FastifyInstance } from 'fastify';

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
    try {
      done(null, JSON.parse(text));
    } catch (error) {
      done(new BodyError(422, `[]: invalid JSON body: ${(error as Error).message}`), undefined);
    }
  });
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    const fields: Record<string, string> = {};
    for (const [key, value] of new URLSearchParams(String(body))) fields[key] ??= value;
    done(null, fields);
  });
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => {
    if ((body as Buffer).length === 0) return done(null, {});
    done(new BodyError(415, 'unsupported content type; send application/json'), undefined);
  });
}
