// A runner request's body as a bounded byte stream: counted before and after
// gunzip, refused (resource_exhausted) the moment either count passes the
// method's limit, so a small gzip "bomb" never inflates past it. The request
// stream is only ever pulled with next(), never ended with return(): Node
// destroys an IncomingMessage whose iterator is returned early, and with it
// the socket the answer still has to go out on (the unread rest is drained
// by Node once the answer is sent).
import { once } from 'node:events';
import { createGunzip } from 'node:zlib';
import { Code, ConnectError } from '@connectrpc/connect';

/** The body passed its limit: nothing after this point was read. */
export class BodyLimitError extends ConnectError {
  constructor(maxBytes: number, setting: string | undefined) {
    super(
      `the request is larger than ${maxBytes} bytes${setting === undefined ? '' : ` (${setting})`}`,
      Code.ResourceExhausted,
    );
  }
}

/** The gzip data is broken (a client mistake: invalid_argument, as connect-go answers it). */
class BodyEncodingError extends ConnectError {
  constructor(detail: string) {
    super(`cannot decompress the request body (gzip): ${detail}`, Code.InvalidArgument);
  }
}

export interface BodyLimit {
  maxBytes: number;
  /** The setting that raises the limit, named in the error. */
  setting?: string;
}

/** `source`'s chunks, failing with BodyLimitError once more than `limit.maxBytes` came. */
export async function* bounded(
  source: AsyncIterator<Uint8Array>,
  limit: BodyLimit,
): AsyncGenerator<Uint8Array, void, undefined> {
  let total = 0;
  for (;;) {
    const next = await source.next();
    if (next.done === true) return;
    total += next.value.byteLength;
    if (total > limit.maxBytes) throw new BodyLimitError(limit.maxBytes, limit.setting);
    yield next.value;
  }
}

/**
 * The gunzipped stream of `source`. Pulls `source` only as fast as the
 * output is consumed (gzip's own backpressure); an empty body stays empty
 * (connect-es and connect-go read it as the empty message). Stopping early
 * (`return()` on the result) destroys the gunzip stream, not the source.
 */
export async function* gunzipped(source: AsyncIterator<Uint8Array>): AsyncGenerator<Uint8Array, void, undefined> {
  const first = await source.next();
  if (first.done === true) return;
  const gunzip = createGunzip();
  const pump = async (): Promise<void> => {
    let chunk: IteratorResult<Uint8Array> = first;
    while (chunk.done !== true) {
      if (gunzip.destroyed) return;
      if (!gunzip.write(chunk.value)) {
        // Drained, or destroyed by a consumer that stopped (close): either way, go on or stop.
        await Promise.race([once(gunzip, 'drain'), once(gunzip, 'close')]);
      }
      chunk = await source.next();
    }
    gunzip.end();
  };
  pump().catch((error: unknown) => gunzip.destroy(error instanceof Error ? error : new Error(String(error))));
  try {
    for await (const chunk of gunzip as AsyncIterable<Buffer>)
      yield new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  } catch (error) {
    if (error instanceof ConnectError) throw error;
    throw new BodyEncodingError((error as Error).message);
  } finally {
    gunzip.destroy();
  }
}

/** The whole (bounded) body in one buffer: for the small requests of every method but a streamed UpdateLog. */
export async function readAll(source: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of source) {
    chunks.push(chunk);
    total += chunk.byteLength;
  }
  if (chunks.length === 1) return chunks[0] as Uint8Array;
  const all = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    all.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return all;
}
