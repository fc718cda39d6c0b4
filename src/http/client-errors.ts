// Requests Node's HTTP parser refuses before Fastify sees them: a request head
// over GANTRY_HEADER_LIMIT (431), broken framing (400), a head that took too
// long (408). The answers are Fastify's own (status, fixed JSON body), but the
// connection is closed gracefully: the answer goes out with a FIN and the
// socket lingers a moment before it is destroyed. Destroying it at once, as
// Fastify's and Node's default handlers do, resets the connection while the
// client's bytes are still unread, and a reset client often loses the answer
// (about half of the 431s never arrived in tests over loopback).
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';

const LINGER_MS = 2_000;

interface ClientErrorAnswer {
  status: number;
  message: string;
  label: string;
}

function answerOf(code: string | undefined): ClientErrorAnswer {
  if (code === 'HPE_HEADER_OVERFLOW')
    return { status: 431, message: 'Exceeded maximum allowed HTTP header size', label: 'header_overflow' };
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return { status: 408, message: 'Client Timeout', label: 'timeout' };
  return { status: 400, message: 'Client Error', label: 'error' };
}

/**
 * Writes a whole answer straight to the socket (no request object owns it
 * yet, or ours gave up on it), closes the connection gracefully and destroys
 * it after LINGER_MS.
 */
export function endWithAnswer(socket: Socket, status: number, body: string, contentType: string): void {
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: ${contentType}\r\nConnection: close\r\n\r\n${body}`,
  );
  setTimeout(() => socket.destroy(), LINGER_MS).unref();
}

/** Fastify's `clientErrorHandler` option. */
export function clientErrorHandler(): (
  this: FastifyInstance,
  error: Error & { code?: string },
  socket: Socket,
) => void {
  // The parser fails again on every chunk that arrives while a socket lingers: answer once.
  const answered = new WeakSet<Socket>();
  return function handleClientError(error, socket) {
    if (error.code === 'ECONNRESET' || socket.destroyed || answered.has(socket)) return;
    answered.add(socket);
    const { status, message, label } = answerOf(error.code);
    this.log.trace({ err: error }, `client ${label}`);
    if (!socket.writable) {
      socket.destroy(error);
      return;
    }
    endWithAnswer(
      socket,
      status,
      JSON.stringify({ error: STATUS_CODES[status], message, statusCode: status }),
      'application/json',
    );
  };
}
