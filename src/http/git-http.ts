// Git's smart HTTP at `{ROOT_URL}{owner}/{repo}.git`: clone and fetch need
// read access (none for public repositories), push needs write. Answers are
// plain text, because a git client shows those to the user as `remote: …`,
// and every refusal of an anonymous client is a 401 challenge, so git asks
// for credentials instead of failing.
//
// A push is limited to GANTRY_GIT_MAX_PUSH_SIZE bytes: a declared
// Content-Length above it is refused before git starts; otherwise the body
// is counted as it streams to git and cut at the limit. git receives a push
// into a quarantine folder and updates refs only after the whole pack has
// arrived and been checked, so a cut push leaves the repository as it was.
// Either way the client gets a 413 with a plain-text reason (git itself
// prints `RPC failed; HTTP 413`; the text shows with GIT_CURL_VERBOSE=1).
import { PassThrough, Transform } from 'node:stream';
import type { Readable, TransformCallback } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AccessMode } from '../modules/access-mode.ts';
import { AppError } from '../modules/errors.ts';
import {
  advertiseRefs,
  decodeRequestBody,
  GitRequestRejectedError,
  parseGitService,
  serviceRpc,
  UnsupportedContentEncodingError,
} from '../modules/git/smart-http.ts';
import type { GitResponse, GitService } from '../modules/git/smart-http.ts';
import { scopeAllows } from '../modules/scopes.ts';
import type { Repository } from '../models/repos.ts';
import type { User } from '../models/users.ts';
import type { Authentication } from '../services/authentication.ts';
import type { Services } from '../services/index.ts';
import { unitAccessMode } from '../services/permissions.ts';
import { drainUnreadBody } from './unread-bodies.ts';

const CHALLENGE = 'Basic realm="Gantry"';
const GIT_ROUTE = /^\/:owner\/:repo\/(info\/refs|git-upload-pack|git-receive-pack)$/;

/** True for the routes below (rate limits answer them in plain text, as git expects). */
export function isGitHttpRoute(routeUrl: string | undefined): boolean {
  return routeUrl !== undefined && GIT_ROUTE.test(routeUrl);
}

class GitHttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

interface GitTarget {
  repo: Repository;
  owner: User;
  auth: Authentication;
}

function refuse(status: number, message: string): GitHttpError {
  return new GitHttpError(status, message);
}

function pushTooLarge(maxBytes: number): GitHttpError {
  return refuse(
    413,
    `Push refused: it is larger than ${maxBytes} bytes (GANTRY_GIT_MAX_PUSH_SIZE); nothing was written. Push fewer commits at a time, or ask the administrator to raise the limit.`,
  );
}

/**
 * Passes the push through to git until more than `maxBytes` went by; then
 * ends it there. git takes the cut pack for a broken one ("early EOF"),
 * updates no ref and removes its quarantine folder. (Killing git instead
 * would leave the quarantine behind: since 2.38 git no longer cleans it
 * up on a signal.)
 */
class PushSizeLimit extends Transform {
  private received = 0;
  exceeded = false;

  constructor(
    private readonly maxBytes: number,
    private readonly onExceeded: () => void,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (this.exceeded) {
      callback();
      return;
    }
    this.received += chunk.length;
    if (this.received > this.maxBytes) {
      this.exceeded = true;
      callback();
      this.onExceeded();
      return;
    }
    callback(null, chunk);
  }
}

function limitPushSize(input: Readable, maxBytes: number): PushSizeLimit {
  const limit: PushSizeLimit = new PushSizeLimit(maxBytes, () => {
    // The rest stays unread here; the route drops it once it has answered.
    input.unpipe(limit);
    limit.end();
  });
  // pipe() forwards neither failures nor a client that hangs up mid-body: git must see both as an abort.
  input.on('error', (error) => {
    if (!limit.exceeded) limit.destroy(error);
  });
  input.on('close', () => {
    if (!input.readableEnded && !limit.exceeded) limit.destroy(new Error('request body aborted'));
  });
  input.pipe(limit);
  return limit;
}

/** The body's declared length when it is what git will receive (no Content-Encoding), else null. */
function declaredPushBytes(req: FastifyRequest): number | null {
  const encoding = (req.headers['content-encoding'] ?? '').trim().toLowerCase();
  const length = req.headers['content-length'];
  if ((encoding !== '' && encoding !== 'identity') || length === undefined || !/^\d+$/.test(length)) return null;
  return Number(length);
}

export function gitHttpRoutes(app: FastifyInstance, services: Services): void {
  // The request body is git's pack stream: hand it over unread (and without
  // the JSON body limit; a push may be large and is streamed to git).
  app.addContentTypeParser(
    ['application/x-git-upload-pack-request', 'application/x-git-receive-pack-request'],
    (_req, payload, done) => {
      done(null, payload);
    },
  );

  app.setErrorHandler(async (error, req, reply) => {
    if (error instanceof GitHttpError) {
      if (error.status === 401) reply.header('WWW-Authenticate', CHALLENGE);
      return reply.status(error.status).type('text/plain; charset=utf-8').send(`${error.message}\n`);
    }
    if (error instanceof AppError && error.kind === 'unauthorized') {
      return reply
        .status(401)
        .header('WWW-Authenticate', CHALLENGE)
        .type('text/plain; charset=utf-8')
        .send(`${error.message}\n`);
    }
    if (error instanceof AppError && error.kind === 'too_many_requests') {
      return reply
        .status(429)
        .header('Retry-After', String(error.options.retryAfterSec ?? 60))
        .type('text/plain; charset=utf-8')
        .send(`${error.message}\n`);
    }
    if (error instanceof AppError && error.kind === 'forbidden')
      return reply.status(403).type('text/plain; charset=utf-8').send(`${error.message}\n`);
    // A request git could not read, or one Fastify refused (a body type no parser takes): the client's to fix.
    if (error instanceof GitRequestRejectedError)
      return reply.status(400).type('text/plain; charset=utf-8').send(`${error.message}\n`);
    const status = (error as { statusCode?: number }).statusCode;
    if (status !== undefined && status >= 400 && status < 500)
      return reply
        .status(status)
        .type('text/plain; charset=utf-8')
        .send(`${(error as Error).message}\n`);
    req.log.error({ err: error }, 'git request failed');
    return reply.status(500).type('text/plain; charset=utf-8').send('internal error; see the server log\n');
  });

  /**
   * Who may do what: a missing repository, and one the caller may not read
   * (private, under an owner they may not see, or restricted), get the same
   * answer: 404 for a signed-in user, a challenge for anyone else.
   */
  async function resolveTarget(req: FastifyRequest, service: GitService): Promise<GitTarget> {
    const { owner: ownerName, repo: rawRepoName } = req.params as { owner: string; repo: string };
    const repoName = rawRepoName.endsWith('.git') ? rawRepoName.slice(0, -'.git'.length) : rawRepoName;
    const auth = await services.authentication.authenticate(req.headers.authorization);
    const doer = auth.doer;
    if (doer && (!doer.isActive || doer.prohibitLogin))
      throw refuse(403, 'This account cannot sign in; ask your site administrator.');
    const write = service === 'git-receive-pack';
    const owner = await services.accounts.findByName(ownerName);
    const repo = owner ? await services.repos.find(owner, repoName) : null;
    const actor = {
      doer,
      allowAdminOverride: !auth.token?.scope.publicOnly,
      ...(auth.task ? { taskRepoId: auth.task.repoId } : {}),
    };
    // The code unit governs git (Forgejo: routers/web/repo/githttp.go checks
    // CanAccess(mode, unit.TypeCode)): a team whose units_map gives code none
    // cannot clone, whatever else it may read.
    const mode =
      repo && owner
        ? unitAccessMode(await services.permissions.repoPermission(actor, repo, owner), repo, 'code')
        : AccessMode.none;
    if (!repo || !owner || mode < AccessMode.read) {
      if (!doer) throw refuse(401, 'Authentication required');
      throw refuse(404, `Repository ${ownerName}/${repoName} not found`);
    }
    if (auth.token) {
      const level = write ? 'write' : 'read';
      if (!scopeAllows(auth.token.scope, 'repository', level))
        throw refuse(403, `token does not have the ${level}:repository scope`);
      if (auth.token.scope.publicOnly && (repo.isPrivate || owner.visibility !== 'public'))
        throw refuse(403, 'token scope is limited to public repos');
    }
    if (write) {
      if (!doer) throw refuse(401, 'Authentication required to push');
      if (mode < AccessMode.write) throw refuse(403, `User ${doer.name} may not push to ${owner.name}/${repo.name}`);
      if (repo.isArchived)
        throw refuse(403, `Repository ${owner.name}/${repo.name} is archived; unarchive it to push.`);
    }
    return { repo, owner, auth };
  }

  /** Sends git's output once git has produced its first byte, so a git failure can still be a 500. */
  async function sendGit(
    reply: FastifyReply,
    response: GitResponse,
    body: Readable = response.body,
  ): Promise<FastifyReply> {
    await response.started;
    return reply
      .header('Cache-Control', 'no-cache, max-age=0, must-revalidate')
      .header('Expires', 'Fri, 01 Jan 1980 00:00:00 GMT')
      .type(response.contentType)
      .send(body);
  }

  app.get('/:owner/:repo/info/refs', { schema: { hide: true } }, async (req, reply) => {
    const service = parseGitService((req.query as Record<string, unknown>).service);
    if (service === null) throw refuse(403, 'Gantry serves the smart HTTP protocol only: use git 1.6.6 or later');
    const { repo, owner } = await resolveTarget(req, service);
    const gitProtocol = req.headers['git-protocol'];
    const response = advertiseRefs({
      gitDir: services.gitRepositories.gitDir(repo, owner),
      service,
      ...(typeof gitProtocol === 'string' ? { gitProtocol } : {}),
    });
    return sendGit(reply, response);
  });

  for (const service of ['git-upload-pack', 'git-receive-pack'] as const) {
    app.post(`/:owner/:repo/${service}`, { schema: { hide: true } }, async (req, reply) => {
      const target = await resolveTarget(req, service);
      if (req.headers['content-type'] !== `application/x-${service}-request`)
        throw refuse(415, `Content-Type must be application/x-${service}-request`);
      const maxPushBytes = services.gitRepositories.maxPushBytes;
      const receive = service === 'git-receive-pack';
      if (receive && (declaredPushBytes(req) ?? 0) > maxPushBytes) {
        drainUnreadBody(req.raw);
        req.log.info({ maxPushBytes }, 'push refused: its Content-Length is larger than GANTRY_GIT_MAX_PUSH_SIZE');
        throw pushTooLarge(maxPushBytes);
      }
      let input: Readable;
      try {
        input = decodeRequestBody(req.body as Readable, req.headers['content-encoding']);
      } catch (error) {
        if (error instanceof UnsupportedContentEncodingError) throw refuse(415, error.message);
        throw error;
      }
      // Counted after decoding: what git stores is what is limited.
      const sizeLimit = receive ? limitPushSize(input, maxPushBytes) : null;
      if (sizeLimit !== null) input = sizeLimit;
      const gitProtocol = req.headers['git-protocol'];
      const response = serviceRpc({
        gitDir: services.gitRepositories.gitDir(target.repo, target.owner),
        service,
        input,
        hooksDir: services.gitRepositories.hooksDir,
        ...(typeof gitProtocol === 'string' ? { gitProtocol } : {}),
      });
      response.done.then(
        (exit) => {
          if (exit.exitCode !== 0 && exit.killedBy !== 'client')
            req.log.warn({ service, exit }, 'git exited with an error');
        },
        () => {},
      );
      if (service === 'git-upload-pack') return sendGit(reply, response);

      const refuseTooLarge = (): never => {
        // git's own report of the cut pack is not sent: the 413 says why, and the client is still sending.
        response.body.resume();
        drainUnreadBody(req.raw);
        req.log.info({ maxPushBytes }, 'push refused: larger than GANTRY_GIT_MAX_PUSH_SIZE');
        throw pushTooLarge(maxPushBytes);
      };
      try {
        await response.started;
      } catch (error) {
        if (sizeLimit?.exceeded === true) refuseTooLarge();
        throw error;
      }
      if (sizeLimit?.exceeded === true) refuseTooLarge();

      // The push is answered only after its runs exist: the client's `git
      // push` returning means the workflows it triggered are recorded.
      const body = new PassThrough();
      response.body.on('error', (error) => body.destroy(error));
      response.body.pipe(body, { end: false });
      response.body.on('end', () => {
        void response.updates
          .then((updates) => services.pushes.afterPush(target.repo, target.owner, target.auth.doer as User, updates))
          .catch((error: unknown) => req.log.error({ err: error }, 'could not process a push'))
          .finally(() => body.end());
      });
      return sendGit(reply, response, body);
    });
  }
}
