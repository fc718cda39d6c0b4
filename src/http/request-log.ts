// What Fastify logs per request: one line when the request completes (its
// method, redacted URL, peer, status and time; as Forgejo's router logs one
// "completed" line), at info. Fastify's default wrote a second line when the
// request arrived; at the default level that line was a fifth of a cheap
// GET's CPU, so it now goes to debug, where a request that never completes
// can still be seen arriving. A runner's FetchTask (its poll, every few
// seconds per runner) writes no request lines at any level; its failures
// are still logged.
import { LogController } from 'fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { FETCH_TASK_PATH } from './runner-rpc/fetch-task-direct.ts';

export class RequestLog extends LogController {
  constructor() {
    super({ disableRequestLogging: (req: { url?: string }) => req.url === FETCH_TASK_PATH });
  }

  override incomingRequest(request: FastifyRequest): void {
    if (this.isLogDisabled(request)) return;
    request.log.debug({ req: request }, 'incoming request');
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (this.isLogDisabled(request)) return;
    if (error)
      reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored');
    else reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}
