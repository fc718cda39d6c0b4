// connect-es answers a unary request body it cannot decompress or decode as
// protobuf with `internal` (HTTP 500): "parse binary: premature EOF",
// "decompression failed". Those bytes are the caller's mistake, and
// connect-go (Forgejo's server) calls them invalid_argument. So every
// handler reads, decompresses and decodes the body first and answers a bad
// one itself; a good one is handed on already decompressed, so the work is
// not done twice.
import { gunzip, brotliDecompress } from 'node:zlib';
import { promisify } from 'node:util';
import { fromBinary } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { createAsyncIterable, readAllBytes } from '@connectrpc/connect/protocol';
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from '@connectrpc/connect/protocol';
import { codeToHttpStatus, errorToJsonBytes, parseContentType } from '@connectrpc/connect/protocol-connect';

type Decompress = (bytes: Uint8Array, maxBytes: number) => Promise<Uint8Array>;

const gunzipAsync = promisify(gunzip);
const brotliAsync = promisify(brotliDecompress);

/** The encodings the Connect plugin accepts (its defaults: gzip and br). */
const DECOMPRESSORS: Readonly<Record<string, Decompress>> = {
  identity: async (bytes) => bytes,
  gzip: (bytes, maxBytes) => gunzipAsync(bytes, { maxOutputLength: maxBytes }),
  br: (bytes, maxBytes) => brotliAsync(bytes, { maxOutputLength: maxBytes }),
};

function isAsyncIterable(value: unknown): value is AsyncIterable<Uint8Array> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}

/** A Connect unary error answer, as the handlers write them. */
export function connectErrorResponse(error: ConnectError): UniversalServerResponse {
  return {
    status: codeToHttpStatus(error.code),
    header: new Headers({ 'content-type': 'application/json' }),
    body: createAsyncIterable([errorToJsonBytes(error, {})]),
  };
}

async function decodedBody(req: UniversalServerRequest, body: AsyncIterable<Uint8Array>, decompress: Decompress, readMaxBytes: number): Promise<Uint8Array> {
  const raw = await readAllBytes(body, readMaxBytes, req.header.get('content-length'));
  if (raw.byteLength === 0) return raw;
  try {
    return await decompress(raw, readMaxBytes);
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new ConnectError(`message is larger than ${readMaxBytes} bytes after decompression`, Code.ResourceExhausted);
    }
    throw new ConnectError(`cannot decompress the request body (${req.header.get('content-encoding') ?? ''}): ${(error as Error).message}`, Code.InvalidArgument);
  }
}

/** Wraps a unary handler so an undecodable request body is invalid_argument (400), never internal (500). */
export function decodeRequestsFirst(handler: UniversalHandler, readMaxBytes: number): UniversalHandler {
  const decoding = async (req: UniversalServerRequest): Promise<UniversalServerResponse> => {
    const type = parseContentType(req.header.get('content-type'));
    const encoding = (req.header.get('content-encoding') ?? 'identity').trim().toLowerCase() || 'identity';
    const decompress = DECOMPRESSORS[encoding];
    // Anything else is Connect's to refuse (wrong method, content type or encoding).
    if (req.method !== 'POST' || type === undefined || type.stream || decompress === undefined || !isAsyncIterable(req.body)) return handler(req);
    let bytes: Uint8Array;
    try {
      bytes = await decodedBody(req, req.body, decompress, readMaxBytes);
      if (type.binary) fromBinary(handler.method.input, bytes);
    } catch (error) {
      if (error instanceof ConnectError) return connectErrorResponse(error);
      return connectErrorResponse(new ConnectError(`cannot decode the request as ${handler.method.input.typeName}: ${(error as Error).message}`, Code.InvalidArgument));
    }
    const header = new Headers(req.header);
    header.delete('content-encoding');
    header.delete('content-length');
    return handler({ ...req, header, body: createAsyncIterable([bytes]) });
  };
  return Object.assign(decoding, handler);
}
