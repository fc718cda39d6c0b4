// The v4 artifact protocol over HTTP (Forgejo: routers/api/actions/artifactsv4.go),
// at the origin of ACTIONS_RESULTS_URL, which runners set to the instance URL:
//
//   POST /twirp/github.actions.results.api.v1.ArtifactService/<Method>   Twirp JSON
//   PUT  …/UploadArtifact?<signed>&comp=block&blockid=…|comp=blocklist   blob-style upload
//   GET  …/DownloadArtifact?<signed>                                       the zip
//
// Twirp bodies are protobuf JSON: field names in snake_case or camelCase,
// int64 as strings, wrappers (StringValue, Int64Value) as bare values;
// answers in camelCase. Errors are plain text with Forgejo's messages; a body
// that is not JSON answers 400 (Forgejo: 500). Request bodies are never
// parsed by Fastify here: Twirp bodies are read up to a small bound, blocks
// are streamed into storage.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import { AppError, STATUS_OF_KIND } from '../../modules/errors.ts';
import type { Artifact } from '../../models/artifacts.ts';
import { MAX_BLOCK_LIST_BYTES } from '../../services/actions/artifacts.ts';
import type { Services } from '../../services/index.ts';
import { fastifyErrorAnswer } from '../errors.ts';
import { sendObject } from '../send-object.ts';

const PREFIX = '/twirp/github.actions.results.api.v1.ArtifactService';
const JSON_TYPE = 'application/json;charset=utf-8';
/** A Twirp request is a handful of short fields. */
const MAX_TWIRP_BODY_BYTES = 64 * 1024;

/** Reads a request body up to `max` bytes; 413 past it. */
export async function readBody(body: Readable, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body.iterator({ destroyOnReturn: false })) {
    size += (chunk as Buffer).length;
    // The rest is dropped once the answer is out (unread-bodies.ts).
    if (size > max) throw AppError.tooLarge(`request body is larger than ${max} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

type TwirpBody = Record<string, unknown>;

async function twirpBody(req: FastifyRequest): Promise<TwirpBody> {
  // A request without a body (no Content-Type) never reaches the stream parser: read as empty.
  const text =
    req.body === undefined || req.body === null ? '' : await readBody(req.body as Readable, MAX_TWIRP_BODY_BYTES);
  let parsed: unknown;
  try {
    parsed = text.trim() === '' ? {} : JSON.parse(text);
  } catch {
    throw AppError.invalid('Error decode request body: not a JSON object');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw AppError.invalid('Error decode request body: not a JSON object');
  return parsed as TwirpBody;
}

/** A protobuf JSON field by its proto name or its camelCase JSON name. */
function field(body: TwirpBody, snake: string): unknown {
  const camel = snake.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
  return body[snake] ?? body[camel];
}

/** A string field (a StringValue wrapper is its bare value in JSON); 400 for anything else. */
function stringField(body: TwirpBody, snake: string): string | undefined {
  const value = field(body, snake);
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'object' && value !== null && typeof (value as { value?: unknown }).value === 'string')
    return (value as { value: string }).value;
  if (typeof value !== 'string') throw AppError.invalid(`Error decode request body: ${snake} must be a string`);
  return value;
}

/** An int64 field (a string or a number in protobuf JSON). */
function int64Field(body: TwirpBody, snake: string): string | undefined {
  const value = field(body, snake);
  if (value === undefined || value === null) return undefined;
  const text =
    typeof value === 'object' && value !== null && 'value' in value
      ? String((value as { value: unknown }).value)
      : String(value);
  if (!/^-?\d{1,19}$/.test(text)) throw AppError.invalid(`Error decode request body: ${snake} must be an integer`);
  return text;
}

function sendJson(reply: FastifyReply, body: unknown) {
  return reply.type(JSON_TYPE).send(JSON.stringify(body));
}

function toMonolithArtifact(artifact: Artifact) {
  return {
    workflowRunBackendId: String(artifact.runId),
    workflowJobRunBackendId: String(artifact.jobId),
    databaseId: String(artifact.id),
    name: artifact.name,
    size: String(artifact.fileSize),
    createdAt: new Date(artifact.created * 1000).toISOString(),
    ...(artifact.digest === '' ? {} : { digest: artifact.digest }),
  };
}

export function artifactTwirpRoutes(app: FastifyInstance, services: Services): void {
  const artifacts = services.artifacts;
  // Every body reaches the handlers unread (Twirp JSON, blocks of any type).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, payload, done) => done(null, payload));

  app.setErrorHandler(async (error, req, reply) => {
    if (error instanceof AppError)
      return reply.status(STATUS_OF_KIND[error.kind]).type('text/plain; charset=utf-8').send(error.message);
    // What Fastify refuses before the handler (a malformed Content-Type, a short body): the client's error.
    const known = fastifyErrorAnswer(error as FastifyError, req);
    if (known) return reply.status(known.status).type('text/plain; charset=utf-8').send(known.message);
    req.log.error({ err: error }, 'artifact request failed');
    return reply.status(500).type('text/plain; charset=utf-8').send(`internal server error (request ${req.id})`);
  });

  const rpc = (method: string, handler: (body: TwirpBody, req: FastifyRequest) => Promise<unknown>) => {
    app.post(`${PREFIX}/${method}`, { schema: { hide: true } }, async (req, reply) => {
      const body = await twirpBody(req);
      return sendJson(reply, await handler(body, req));
    });
  };
  const taskOf = (body: TwirpBody, req: FastifyRequest) =>
    artifacts.authenticate(req.headers.authorization, field(body, 'workflow_run_backend_id'));

  rpc('CreateArtifact', async (body, req) => {
    const task = await taskOf(body, req);
    const expiresAt = stringField(body, 'expires_at');
    const signedUploadUrl = await artifacts.create(task, {
      name: stringField(body, 'name') ?? '',
      ...(expiresAt === undefined ? {} : { expiresAt }),
    });
    return { ok: true, signedUploadUrl };
  });

  rpc('FinalizeArtifact', async (body, req) => {
    const task = await taskOf(body, req);
    const size = int64Field(body, 'size');
    const hash = stringField(body, 'hash');
    const artifactId = await artifacts.finalize(task, {
      name: stringField(body, 'name') ?? '',
      ...(size === undefined ? {} : { size }),
      ...(hash === undefined ? {} : { hash }),
    });
    return { ok: true, artifactId: String(artifactId) };
  });

  rpc('ListArtifacts', async (body, req) => {
    const task = await taskOf(body, req);
    const name = stringField(body, 'name_filter');
    const id = int64Field(body, 'id_filter');
    // An id past 2^53 names no row (ids are far below it), and must not reach the database as a wrong number.
    if (id !== undefined && !Number.isSafeInteger(Number(id))) return { artifacts: [] };
    const list = await artifacts.list(task, {
      ...(name === undefined ? {} : { name }),
      ...(id === undefined ? {} : { id: Number(id) }),
    });
    return { artifacts: list.map(toMonolithArtifact) };
  });

  rpc('GetSignedArtifactURL', async (body, req) => {
    const task = await taskOf(body, req);
    return { signedUrl: await artifacts.signedDownloadUrl(task, stringField(body, 'name') ?? '') };
  });

  rpc('DeleteArtifact', async (body, req) => {
    const task = await taskOf(body, req);
    const artifactId = await artifacts.delete(task, stringField(body, 'name') ?? '');
    return { ok: true, artifactId: String(artifactId) };
  });

  app.put(`${PREFIX}/UploadArtifact`, { schema: { hide: true } }, async (req, reply) => {
    const query = req.query as Record<string, unknown>;
    const comp = typeof query.comp === 'string' ? query.comp : '';
    const body = req.body as Readable;
    if (comp === 'block') {
      const blockId = typeof query.blockid === 'string' ? query.blockid : '';
      await artifacts.uploadBlock(query, blockId, body);
      return reply.status(201).type('text/plain; charset=utf-8').send('appended');
    }
    if (comp === 'blocklist') {
      await artifacts.commitBlockList(query, await readBody(body, MAX_BLOCK_LIST_BYTES));
      return reply.status(201).type('text/plain; charset=utf-8').send('created');
    }
    throw AppError.invalid(
      'Error unsupported comp: send blocks (comp=block&blockid=…), then the block list (comp=blocklist)',
    );
  });

  app.get(`${PREFIX}/DownloadArtifact`, { schema: { hide: true } }, async (req, reply) => {
    const { artifact, reader } = await artifacts.openSignedDownload(req.query as Record<string, unknown>);
    await sendObject(req, reply, reader, {
      'content-type': 'application/zip',
      'content-disposition': `attachment; filename="${encodeURIComponent(artifact.name)}.zip"`,
    });
  });
}
