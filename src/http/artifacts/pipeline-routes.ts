// The v3 artifact protocol over HTTP (Forgejo: routers/api/actions/artifacts.go),
// at ACTIONS_RUNTIME_URL, which runners set to <instance>/api/actions_pipeline/:
//
//   POST  /_apis/pipelines/workflows/{run}/artifacts                      the upload URL
//   PUT   …/artifacts/{md5(name)}/upload?itemPath=<name>/<path>           one chunk of one file
//   PATCH …/artifacts?artifactName=<name>                                 join the chunks
//   GET   …/artifacts                                                     the run's artifacts
//   GET   …/artifacts/{md5(name)}/download_url?itemPath=<name>            an artifact's files
//   GET   …/artifacts/{row id}/download                                   one file, as stored
//
// Every call carries the runtime token as `Authorization: Bearer`; the run in
// the path must be the token's. Errors are plain text with Forgejo's messages;
// the message is also the status line's reason phrase, which is what
// @actions/artifact 1.x prints of a failed answer. Bodies are never parsed by
// Fastify: chunks stream into storage, JSON bodies are read up to a small bound.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import { AppError, STATUS_OF_KIND } from '../../modules/errors.ts';
import { parseIdParam } from '../../modules/pagination.ts';
import type { Services } from '../../services/index.ts';
import { fastifyErrorAnswer } from '../errors.ts';
import { sendObject } from '../send-object.ts';
import { readBody } from './twirp-routes.ts';

const BASE = '/_apis/pipelines/workflows/:run_id/artifacts';
const MAX_JSON_BODY_BYTES = 64 * 1024;

type Query = Record<string, unknown>;
const queryString = (req: FastifyRequest, key: string): string | undefined => {
  const value = (req.query as Query)[key];
  return typeof value === 'string' ? value : undefined;
};
const header = (req: FastifyRequest, key: string): string | undefined => {
  const value = req.headers[key];
  return typeof value === 'string' ? value : undefined;
};

/** A reason phrase must be one line of visible Latin-1. */
const reasonPhrase = (message: string) => message.replace(/[^\x20-\x7e]/g, '?').slice(0, 300);

function sendError(reply: FastifyReply, status: number, message: string) {
  reply.raw.statusMessage = reasonPhrase(message);
  return reply.status(status).type('text/plain; charset=utf-8').send(message);
}

export function artifactPipelineRoutes(app: FastifyInstance, services: Services): void {
  const v3 = services.artifactsV3;
  // Every body reaches the handlers unread (JSON, chunks of any type).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, payload, done) => done(null, payload));

  app.setErrorHandler(async (error, req, reply) => {
    // The rest of a refused chunk is dropped once the answer is out (unread-bodies.ts).
    if (error instanceof AppError) return sendError(reply, STATUS_OF_KIND[error.kind], error.message);
    const known = fastifyErrorAnswer(error as FastifyError, req);
    if (known) return sendError(reply, known.status, known.message);
    req.log.error({ err: error }, 'artifact request failed');
    return sendError(reply, 500, `internal server error (request ${req.id})`);
  });

  const taskOf = (req: FastifyRequest) =>
    services.artifacts.authenticate(req.headers.authorization, (req.params as { run_id: string }).run_id);
  const json = (reply: FastifyReply, body: unknown) =>
    reply.type('application/json; charset=utf-8').send(JSON.stringify(body));

  app.post(BASE, { schema: { hide: true } }, async (req, reply) => {
    const task = await taskOf(req);
    const text =
      req.body === undefined || req.body === null ? '' : await readBody(req.body as Readable, MAX_JSON_BODY_BYTES);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw AppError.invalid('Error decode request body');
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw AppError.invalid('Error decode request body');
    const { Name, RetentionDays } = body as { Name?: unknown; RetentionDays?: unknown };
    const url = await v3.createContainer(task, { name: Name, retentionDays: RetentionDays });
    return json(reply, { fileContainerResourceUrl: url });
  });

  app.put(`${BASE}/:hash/upload`, { schema: { hide: true } }, async (req, reply) => {
    const task = await taskOf(req);
    const retentionDays = queryString(req, 'retentionDays');
    const contentRange = header(req, 'content-range');
    const fileLength = header(req, 'x-tfs-filelength');
    const contentEncoding = header(req, 'content-encoding');
    const md5 = header(req, 'x-actions-results-md5');
    const body = req.body === undefined || req.body === null ? Readable.from([]) : (req.body as Readable);
    await v3.uploadChunk(
      task,
      {
        hash: (req.params as { hash: string }).hash,
        itemPath: queryString(req, 'itemPath') ?? '',
        ...(retentionDays === undefined ? {} : { retentionDays }),
        ...(contentRange === undefined ? {} : { contentRange }),
        ...(fileLength === undefined ? {} : { fileLength }),
        ...(contentEncoding === undefined ? {} : { contentEncoding }),
        ...(md5 === undefined ? {} : { md5 }),
      },
      body,
    );
    return json(reply, { message: 'success' });
  });

  app.patch(BASE, { schema: { hide: true } }, async (req, reply) => {
    const task = await taskOf(req);
    // The body ({"Size": n}) says nothing the stored chunks do not.
    if (req.body !== undefined && req.body !== null) await readBody(req.body as Readable, MAX_JSON_BODY_BYTES);
    await v3.finalize(task, queryString(req, 'artifactName') ?? '');
    return json(reply, { message: 'success' });
  });

  app.get(BASE, { schema: { hide: true } }, async (req, reply) => json(reply, await v3.list(await taskOf(req))));

  app.get(`${BASE}/:hash/download_url`, { schema: { hide: true } }, async (req, reply) => {
    const task = await taskOf(req);
    const pieces = await v3.containerItems(
      task,
      (req.params as { hash: string }).hash,
      queryString(req, 'itemPath') ?? '',
    );
    return reply.type('application/json; charset=utf-8').send(Readable.from(pieces));
  });

  app.get(`${BASE}/:artifact_id/download`, { schema: { hide: true } }, async (req, reply) => {
    const task = await taskOf(req);
    const { file, reader } = await v3.openFile(task, parseIdParam((req.params as { artifact_id: string }).artifact_id));
    await sendObject(req, reply, reader, {
      'content-type': 'application/octet-stream',
      ...(file.contentEncoding === 'gzip' ? { 'content-encoding': 'gzip' } : {}),
    });
  });
}
