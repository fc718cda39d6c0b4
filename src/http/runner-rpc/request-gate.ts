// Every runner request passes this gate before Connect sees it:
//
// 1. Credentials first. For every method but Ping and Register the
//    x-runner-uuid/x-runner-token headers must name a registered runner
//    before a byte of the body is read; otherwise the body is never touched
//    and the call fails `unauthenticated` "unregistered runner" (in the
//    caller's protocol: Connect reads the refusal from a body that throws).
// 2. A bounded body. Each method has a limit on its body, before and after
//    gunzip (request-limits.ts); bytes past it are never read or inflated.
// 3. Decoded first. connect-es answers a unary body it cannot decompress or
//    decode as protobuf with `internal` (HTTP 500): "parse binary: premature
//    EOF", "decompression failed". Those bytes are the caller's mistake, and
//    connect-go (Forgejo's server) calls them invalid_argument. So a Connect
//    unary body is read, decompressed and decoded here, and a bad one
//    answered here; a good one is handed on already decompressed.
// 4. UpdateLog in binary protobuf is not buffered at all: it is decoded as it
//    arrives and stored in batches (update-log-stream.ts).
//
// Anything this gate does not understand (another method, content type,
// protocol or encoding) is Connect's to answer or refuse, with the method's
// limit as its readMaxBytes (routes.ts).
import { fromBinary } from '@bufbuild/protobuf';
import { Code, ConnectError, createContextValues } from '@connectrpc/connect';
import { createAsyncIterable } from '@connectrpc/connect/protocol';
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from '@connectrpc/connect/protocol';
import { codeToHttpStatus, errorToJsonBytes, parseContentType } from '@connectrpc/connect/protocol-connect';
import type { Runner } from '../../models/runners.ts';
import { authenticateRunner, isPublicMethod, setRunner, unregisteredRunner } from './auth.ts';
import type { RunnerProtocolService } from '../../services/actions/runner-protocol.ts';
import { bounded, gunzipped, readAll } from './request-body.ts';
import type { BodyLimit } from './request-body.ts';

/** Request encodings read here: connect-go's handler accepts gzip only, and so does the plugin (routes.ts). */
const ENCODINGS: ReadonlySet<string> = new Set(['identity', 'gzip']);

export interface GateOptions {
  protocol: RunnerProtocolService;
  /** The method's body limit when it is read whole, before and after decompression. */
  limit: BodyLimit;
  /** Serves a binary request of an authenticated runner itself, streaming its body under `limit` (UpdateLog). */
  stream?: {
    limit: BodyLimit;
    serve: (runner: Runner, body: AsyncIterable<Uint8Array>) => Promise<UniversalServerResponse>;
  };
  /** Reports an unexpected failure (a database error while authenticating). */
  onError: (error: unknown) => ConnectError;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<Uint8Array> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}

/** A Connect unary error answer, as the handlers write them. */
function connectErrorResponse(error: ConnectError, header: Record<string, string> = {}): UniversalServerResponse {
  return {
    status: codeToHttpStatus(error.code),
    header: new Headers({ ...header, 'content-type': 'application/json' }),
    body: createAsyncIterable([errorToJsonBytes(error, {})]),
  };
}

/**
 * The request with a body that fails with `error` when read: Connect then
 * answers `error` in whatever protocol the caller speaks, without the real
 * body ever being touched (and without a length hint that would make it
 * complain about the size first).
 */
function refused(req: UniversalServerRequest, error: ConnectError): UniversalServerRequest {
  const header = new Headers(req.header);
  header.delete('content-length');
  header.delete('content-encoding');
  const body: AsyncIterable<Uint8Array> = {
    [Symbol.asyncIterator]: () => ({ next: () => Promise.reject(error) }),
  };
  return { ...req, header, body };
}

/** The body as decompressed, bounded bytes: counted before and after gunzip. */
function bodyStream(body: AsyncIterable<Uint8Array>, encoding: string, limit: BodyLimit): AsyncIterable<Uint8Array> {
  const raw = bounded(body[Symbol.asyncIterator](), limit);
  return encoding === 'gzip' ? bounded(gunzipped(raw), limit) : raw;
}

export function gateRequests(handler: UniversalHandler, options: GateOptions): UniversalHandler {
  const isPublic = isPublicMethod(handler.method);
  const gate = async (req: UniversalServerRequest): Promise<UniversalServerResponse> => {
    const contextValues = req.contextValues ?? createContextValues();
    let runner: Runner | null = null;
    if (!isPublic) {
      try {
        runner = await authenticateRunner(options.protocol, handler.method, req.header);
      } catch (error) {
        return handler(refused(req, options.onError(error)));
      }
      if (runner === null) return handler(refused(req, unregisteredRunner()));
      setRunner(contextValues, runner);
    }
    const type = parseContentType(req.header.get('content-type'));
    const encoding = (req.header.get('content-encoding') ?? 'identity').trim().toLowerCase() || 'identity';
    // Anything else is Connect's to refuse (wrong method, content type or encoding).
    if (
      req.method !== 'POST' ||
      type === undefined ||
      type.stream ||
      !ENCODINGS.has(encoding) ||
      !isAsyncIterable(req.body)
    ) {
      return handler({ ...req, contextValues });
    }
    if (options.stream !== undefined && runner !== null && type.binary) {
      try {
        return await options.stream.serve(runner, bodyStream(req.body, encoding, options.stream.limit));
      } catch (error) {
        // The rest of the body stays unread: the connection cannot carry another request.
        return connectErrorResponse(error instanceof ConnectError ? error : options.onError(error), {
          connection: 'close',
        });
      }
    }
    let bytes: Uint8Array;
    try {
      bytes = await readAll(bodyStream(req.body, encoding, options.limit));
      if (type.binary) fromBinary(handler.method.input, bytes);
    } catch (error) {
      if (error instanceof ConnectError) return connectErrorResponse(error, { connection: 'close' });
      return connectErrorResponse(
        new ConnectError(
          `cannot decode the request as ${handler.method.input.typeName}: ${(error as Error).message}`,
          Code.InvalidArgument,
        ),
      );
    }
    const header = new Headers(req.header);
    header.delete('content-encoding');
    header.delete('content-length');
    return handler({ ...req, header, contextValues, body: createAsyncIterable([bytes]) });
  };
  return Object.assign(gate, handler);
}
