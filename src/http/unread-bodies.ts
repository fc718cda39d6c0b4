// What happens to the rest of a request body that the route did not read:
// a refused upload (413), a Twirp body cut at its bound, an error thrown
// halfway through a stream. HTTP/1.1 gives the server two honest choices
// (RFC 9112, section 9): read and drop the rest so the connection can carry
// the next request, or close the connection. Doing neither is the bug this
// file exists for: the answer goes out with `Connection: keep-alive`, the
// body stays paused in the socket, Node's parser never reaches the next
// request, and the client — which has its answer and rightly reuses the
// connection — waits forever for an answer to its next request.
//
// Node drops an unread body by itself only when nothing ever started reading
// it (`IncomingMessage._dump` on response finish). A reader that started and
// stopped (an async iterator left by `throw`, a `pipe` into a transform that
// was ended early) leaves the stream paused, or in the state where `resume()`
// does nothing because a stale 'readable' listener is still registered.
//
// So every response, once finished, drains what is left of its request body
// (installUnreadBodyDrain), and routes that refuse a body before answering
// (git pushes over the size limit) start the drain themselves so the client
// keeps sending into a reader rather than into a full socket buffer.
//
// Bounds: at most DRAIN_MAX_BYTES are read and dropped, for at most
// DRAIN_MAX_MS; past either the connection is closed (the answer has been
// written by then, or is being written: a client still sending gigabytes
// after its answer is better cut than served). The request deadlines
// (request-deadlines.ts) still apply while the rest arrives.
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';

const DRAIN_MAX_BYTES = 4 * 1024 * 1024;
const DRAIN_MAX_MS = 10_000;

/** Bodies already being drained: starting twice would count and time them twice. */
const draining = new WeakSet<IncomingMessage>();

/** HTTP/1.1: a request has a body only when it says so (RFC 9112, section 6.3). */
function declaresNoBody(raw: IncomingMessage): boolean {
  const length = raw.headers['content-length'];
  return (length === undefined || length === '0') && raw.headers['transfer-encoding'] === undefined;
}

/** Reads and drops the rest of `raw`'s body, within bounds; a no-op once it has been read or its socket is gone. */
export function drainUnreadBody(raw: IncomingMessage): void {
  // A request that declared no body (a GET, usually) and has arrived whole:
  // nothing to read here or on the wire, and Node ends it when the response
  // finishes. A body read only in part (FetchTask reads exactly its declared
  // length) still goes through the drain below, so the request ends.
  if (raw.complete && !raw.readableDidRead && declaresNoBody(raw)) return;
  if (raw.readableEnded || raw.destroyed || draining.has(raw)) return;
  draining.add(raw);
  let dropped = 0;
  const stop = (): void => {
    clearTimeout(timer);
    raw.socket.destroy();
  };
  const timer = setTimeout(stop, DRAIN_MAX_MS);
  timer.unref();
  raw.once('end', () => clearTimeout(timer));
  raw.once('close', () => clearTimeout(timer));
  // Whoever was reading is done: a pipe would pause the body again when its
  // destination fills, and a stale 'readable' listener keeps resume() from
  // flowing (Node re-checks the listeners on the next tick, then flows
  // because a 'data' listener is there).
  raw.unpipe();
  raw.removeAllListeners('readable');
  raw.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > DRAIN_MAX_BYTES) stop();
  });
  raw.resume();
}

/** On the root instance before any route plugin: every route, and the 404 handler, drains what it left. */
export function installUnreadBodyDrain(app: FastifyInstance): void {
  app.addHook('onResponse', (req, _reply, done) => {
    drainUnreadBody(req.raw);
    done();
  });
}
