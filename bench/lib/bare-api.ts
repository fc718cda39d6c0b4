// The baseline for REST reads: a minimal JSON API on bare node:http, in a child
// process of its own (as `gantry web` is), doing what such an API must do per
// request and nothing more:
//   - parse the URL (WHATWG URL) and route /api/v1/repos/{owner}/{repo}/actions/variables/{name};
//   - check the Authorization header against a constant (`token <secret>`; else 401);
//   - GET: answer the variable as a small JSON object built with JSON.stringify;
//   - PUT …/actions/secrets/{name}: read and JSON.parse the body, answer 204.
// No framework, no database, no logging. Run as a script it reads its settings
// from BARE_API_SETTINGS (JSON) and prints `listening <port>` once it listens.
// With `framework: 'fastify'` the same API is one Fastify route (an onRequest
// hook for the header, the answer serialised from a response schema, no
// logger): what the framework itself costs per request, the floor under any
// Fastify server's figure.
import http from 'node:http';
import Fastify from 'fastify';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startListeningChild } from './listening-child.ts';
import type { ListeningChild } from './listening-child.ts';

export interface BareApiSettings {
  /** The secret of `Authorization: token <secret>`. */
  token: string;
  /** The variable's value, answered for any name. */
  data: string;
  ownerId: number;
  repoId: number;
  /** 'fastify': the GET as a minimal Fastify route instead of bare node:http. */
  framework?: 'fastify';
}

const ROUTE = /^\/api\/v1\/repos\/([^/]+)\/([^/]+)\/actions\/(variables|secrets)\/([^/]+)$/;

function serve(settings: BareApiSettings): http.Server {
  const expected = `token ${settings.token}`;
  return http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const match = ROUTE.exec(url.pathname);
    const answer = (status: number, body?: string): void => {
      if (body === undefined) res.writeHead(status).end();
      else
        res
          .writeHead(status, {
            'content-type': 'application/json;charset=utf-8',
            'content-length': Buffer.byteLength(body),
          })
          .end(body);
    };
    if (req.headers.authorization !== expected) {
      req.resume();
      return answer(401, JSON.stringify({ message: 'invalid token' }));
    }
    if (!match) {
      req.resume();
      return answer(404, JSON.stringify({ message: 'not found' }));
    }
    const name = decodeURIComponent(match[4] as string);
    if (req.method === 'GET' && match[3] === 'variables') {
      req.resume();
      return answer(
        200,
        JSON.stringify({
          owner_id: settings.ownerId,
          repo_id: settings.repoId,
          name: name.toUpperCase(),
          data: settings.data,
        }),
      );
    }
    if (req.method === 'PUT' && match[3] === 'secrets') {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { data?: unknown };
          if (typeof body.data !== 'string') return answer(422, JSON.stringify({ message: 'data is required' }));
        } catch {
          return answer(400, JSON.stringify({ message: 'invalid JSON' }));
        }
        answer(204);
      });
      return;
    }
    req.resume();
    answer(405, JSON.stringify({ message: 'method not allowed' }));
  });
}

/** The GET of the same API as one Fastify route, doing the same work and nothing more. */
async function serveFastify(settings: BareApiSettings): Promise<http.Server> {
  const expected = `token ${settings.token}`;
  const app = Fastify({ logger: false });
  app.addHook('onRequest', async (req, reply) => {
    if (req.headers.authorization !== expected) await reply.code(401).send({ message: 'invalid token' });
  });
  app.get<{ Params: { owner: string; repo: string; name: string } }>(
    '/api/v1/repos/:owner/:repo/actions/variables/:name',
    {
      schema: {
        response: {
          200: {
            type: 'object',
            properties: {
              owner_id: { type: 'integer' },
              repo_id: { type: 'integer' },
              name: { type: 'string' },
              data: { type: 'string' },
            },
          },
        },
      },
    },
    async (req) => ({
      owner_id: settings.ownerId,
      repo_id: settings.repoId,
      name: req.params.name.toUpperCase(),
      data: settings.data,
    }),
  );
  await app.ready();
  return app.server;
}

export type BareApiChild = ListeningChild;

/** Starts the bare API as a child process (through tsx, as `gantry web` runs). */
export function startBareApiChild(settings: BareApiSettings): Promise<BareApiChild> {
  return startListeningChild(
    fileURLToPath(import.meta.url),
    { ...process.env, BARE_API_SETTINGS: JSON.stringify(settings) },
    'the bare API',
  );
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const settings = JSON.parse(process.env.BARE_API_SETTINGS ?? '{}') as BareApiSettings;
  const server = settings.framework === 'fastify' ? await serveFastify(settings) : serve(settings);
  server.keepAliveTimeout = 65_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`);
  });
  process.once('SIGTERM', () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
