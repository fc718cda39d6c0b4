// Answering with a body that a function writes straight into the response,
// for bodies that reuse their buffers (a job log: log-body.ts). Fastify's
// reply.send(stream) pipes a Readable, and a Readable must hand over a new
// buffer per chunk, since it cannot know when the socket is done with one.
//
// The reply is hijacked: Fastify sends nothing itself, and its onSend hooks
// do not run (the caller sets what they would add, e.g. Cache-Control). Its
// onResponse hooks (metrics, the request log) still run when the response
// finishes. The status and the headers the reply holds go out first; a body
// that fails after that cannot change them, so the connection is cut and the
// client sees a body shorter than its Content-Length, never a complete-looking one.
import type { OutgoingHttpHeaders } from 'node:http';
import type { Writable } from 'node:stream';
import type { FastifyReply } from 'fastify';

export async function sendWritten(reply: FastifyReply, write: (sink: Writable) => Promise<void>): Promise<void> {
  reply.hijack();
  const response = reply.raw;
  response.writeHead(reply.statusCode, reply.getHeaders() as OutgoingHttpHeaders);
  try {
    await write(response);
    response.end();
  } catch (error) {
    // A client that went away is routine; anything else is worth a look, but never a 500 now.
    if (!response.destroyed) reply.log.warn({ err: error }, 'response body failed after its headers were sent');
    response.destroy();
  }
}
