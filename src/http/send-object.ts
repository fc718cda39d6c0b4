// Sends a stored object (an artifact's zip) as a response body through one
// reused buffer: read a piece, write it, wait until the socket has taken it,
// read the next into the same buffer. A stream would allocate a new buffer
// for every 64 KiB, which V8 frees only when its external-memory pressure
// triggers a collection, so a 1 GiB download would grow the process by tens of
// megabytes of garbage; this keeps it flat. The reply is hijacked, so the
// headers already set on it (request id, rate limits) are written here.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import type { ObjectReader } from '../modules/storage/object-storage.ts';

const BUFFER_BYTES = 256 * 1024;

function write(raw: ServerResponse, chunk: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    raw.write(chunk, (error) => (error ? reject(error) : resolve()));
  });
}

export async function sendObject(
  req: FastifyRequest,
  reply: FastifyReply,
  reader: ObjectReader,
  headers: Record<string, string>,
): Promise<void> {
  reply.hijack();
  const raw = reply.raw;
  try {
    raw.writeHead(200, {
      ...(reply.getHeaders() as Record<string, string>),
      ...headers,
      'content-length': String(reader.size),
    });
    if (req.method === 'HEAD') return;
    const buffer = Buffer.allocUnsafe(Math.min(BUFFER_BYTES, Math.max(1, reader.size)));
    for (let position = 0; position < reader.size && !raw.destroyed;) {
      const read = await reader.read(buffer, position);
      if (read === 0) break;
      position += read;
      // The callback fires once the socket is done with the bytes: only then is the buffer reused.
      await write(raw, buffer.subarray(0, read));
    }
  } catch (error) {
    // Mid-body there is no answer left to give: the client sees a cut response (its length does not match).
    req.log.warn({ err: error }, 'sending a stored object failed');
    raw.destroy();
    return;
  } finally {
    await reader.close();
    if (!raw.destroyed) raw.end();
  }
}
