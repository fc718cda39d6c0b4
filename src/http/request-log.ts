// What Fastify logs per request: one line when the request completes (its
// method, redacted URL, peer, status and time; as Forgejo's router logs one
// "completed" line), at info. Fastify's default wrote a second line when the
// request arrived; at the default level that line was a fifth of a cheap
// GET's CPU, so it now goes to debug, where a request that never completes
// can still be seen arriving. A runner's FetchTask (its poll, every few
// seconds per runner) writes no request lines at any level; its failures
// are still logged.
//
// The "request completed" line is written here as one string, byte for byte
// what pino writes for it through the logger's `req` and `res` serializers
// (log-redaction.ts), without the objects pino builds and walks for it per
// request (the serializers' results, its key loop, a JSON.stringify of each):
// about a tenth of a cheap GET's own work. The fields are the serializers'
// (request-log.test.ts compares both lines), so no header reaches the log.
// A logger whose options would change the line (other serializers, a mixin,
// formatters of the logged object, a nested key, a message prefix, a write
// hook, a stream that wants metadata) gets the line from pino as before.
import { LogController } from 'fastify';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import pino from 'pino';
import { redactQueryCredentials, serializeRequest, serializeResponse } from '../modules/log-redaction.ts';
import { FETCH_TASK_PATH } from './runner-rpc/fetch-task-direct.ts';

const {
  chindingsSym,
  endSym,
  formattersSym,
  hooksSym,
  lsCacheSym,
  messageKeySym,
  mixinSym,
  needsMetadataGsym,
  nestedKeySym,
  serializersSym,
  streamSym,
  timeSym,
} = pino.symbols;
// Exported by pino but missing from its type declarations.
const msgPrefixSym = (pino.symbols as unknown as Record<string, symbol>).msgPrefixSym as symbol;

const COMPLETED = 'request completed';
const INFO = 30;

/** pino's internals the line is made of, read through its exported symbols (pino.symbols). */
type PinoInternals = Readonly<Record<symbol, unknown>>;

const internal = <T>(log: PinoInternals, symbol: symbol): T | undefined => log[symbol] as T | undefined;

interface LineStream {
  write(line: string): unknown;
}

/** Whether pino would write the line exactly as completedLine does (see the header). */
function writesPlainLines(log: PinoInternals): boolean {
  const serializers = internal<Record<string, unknown>>(log, serializersSym);
  const stream = internal<Readonly<Record<symbol, unknown>>>(log, streamSym);
  return (
    serializers !== undefined &&
    serializers.req === serializeRequest &&
    serializers.res === serializeResponse &&
    serializers.responseTime === undefined &&
    serializers.msg === undefined &&
    !internal(log, mixinSym) &&
    internal<{ log?: unknown }>(log, formattersSym)?.log === undefined &&
    !internal(log, nestedKeySym) &&
    !internal(log, msgPrefixSym) &&
    internal(log, messageKeySym) === 'msg' &&
    internal<{ streamWrite?: unknown }>(log, hooksSym)?.streamWrite === undefined &&
    typeof internal<Record<number, unknown>>(log, lsCacheSym)?.[INFO] === 'string' &&
    typeof internal(log, timeSym) === 'function' &&
    typeof internal(log, chindingsSym) === 'string' &&
    typeof internal(log, endSym) === 'string' &&
    stream !== undefined &&
    stream[needsMetadataGsym] !== true
  );
}

/** `,"name":value` for a string field JSON.stringify would keep (pino stringifies `req` whole). */
function stringField(name: string, value: unknown): string {
  return typeof value === 'string' ? `,"${name}":${JSON.stringify(value)}` : '';
}

function numberField(name: string, value: unknown): string {
  if (typeof value !== 'number') return '';
  return `,"${name}":${Number.isFinite(value) ? String(value) : 'null'}`;
}

/** serializeRequest's fields, in its order, as JSON.stringify writes them (undefined ones left out). */
function requestJson(req: FastifyRequest): string {
  const host = req.host ?? req.headers.host;
  const method = stringField('method', req.method);
  const fields =
    method +
    stringField('url', typeof req.url === 'string' ? redactQueryCredentials(req.url) : undefined) +
    stringField('host', host) +
    stringField('remoteAddress', req.ip ?? req.socket?.remoteAddress) +
    numberField('remotePort', req.socket?.remotePort);
  return `{${fields.slice(1)}}`;
}

/** The line pino writes for `log.info({ req, res, responseTime }, 'request completed')`. */
export function completedLine(log: FastifyBaseLogger, req: FastifyRequest, reply: FastifyReply): string {
  const internals = log as unknown as PinoInternals;
  const status = reply.statusCode;
  return (
    (internal<Record<number, string>>(internals, lsCacheSym) as Record<number, string>)[INFO] +
    (internal<() => string>(internals, timeSym) as () => string).call(log) +
    internal<string>(internals, chindingsSym) +
    `,"req":${requestJson(req)}` +
    `,"res":{${typeof status === 'number' ? `"statusCode":${status}` : ''}}` +
    numberField('responseTime', reply.elapsedTime) +
    `,"msg":"${COMPLETED}"` +
    internal<string>(internals, endSym)
  );
}

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
    const log = reply.log as pino.Logger;
    if (error) {
      log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored');
      return;
    }
    if (!log.isLevelEnabled('info')) return;
    const internals = log as unknown as PinoInternals;
    if (writesPlainLines(internals))
      (internal<LineStream>(internals, streamSym) as LineStream).write(completedLine(log, request, reply));
    else log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, COMPLETED);
  }
}
