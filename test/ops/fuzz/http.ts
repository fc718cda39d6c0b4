// Sends a fuzz request exactly as generated (undici's dispatcher API: the
// path goes on the wire unnormalized) and judges the answer: never a 5xx,
// never a hang, and a well-formed body (`{message, url}` for /api/v1 errors,
// Connect's `{code, message}` for runner RPC errors).
import { Agent } from 'undici';
import type { FuzzRequest } from './world.ts';

export const REQUEST_TIMEOUT_MS = 10_000;

export interface FuzzAnswer {
  status: number;
  contentType: string;
  text: string;
  ms: number;
}

export function createAgent(): Agent {
  return new Agent({
    connections: 16,
    keepAliveTimeout: 30_000,
    headersTimeout: REQUEST_TIMEOUT_MS,
    bodyTimeout: REQUEST_TIMEOUT_MS,
    // The fuzzer sends oversized headers on purpose; the server is the one to refuse them.
    maxHeaderSize: 1024 * 1024,
  });
}

/** The answer, or a string saying why there was none (a hang or a broken connection). */
export async function send(agent: Agent, origin: string, request: FuzzRequest): Promise<FuzzAnswer | string> {
  const started = Date.now();
  try {
    const res = await agent.request({
      origin,
      path: request.path,
      method: request.method as 'GET',
      headers: request.headers,
      body: request.body,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await res.body.text();
    const type = res.headers['content-type'];
    return {
      status: res.statusCode,
      contentType: Array.isArray(type) ? type.join(',') : (type ?? ''),
      text,
      ms: Date.now() - started,
    };
  } catch (error) {
    const ms = Date.now() - started;
    const name = (error as { name?: string; code?: string }).code ?? (error as Error).name;
    if (
      ms >= REQUEST_TIMEOUT_MS - 50 ||
      name === 'TimeoutError' ||
      name === 'UND_ERR_HEADERS_TIMEOUT' ||
      name === 'UND_ERR_BODY_TIMEOUT'
    ) {
      return `no answer within ${REQUEST_TIMEOUT_MS} ms (hang)`;
    }
    return `no answer: ${name}: ${(error as Error).message}`;
  }
}

/**
 * Node's HTTP parser refuses some requests (a head over the header limit,
 * broken framing) before any route sees them; those answers come from the
 * server's client-error handler, whatever the path, and close the connection.
 */
function isParserRefusal(answer: FuzzAnswer): boolean {
  if (answer.status === 431) return true;
  if (answer.status !== 400) return false;
  if (answer.text === '') return true;
  try {
    const message = (JSON.parse(answer.text) as { message?: unknown }).message;
    return message === 'Client Error' || message === 'malformed HTTP request';
  } catch {
    return false;
  }
}

/** Why the answer is wrong, or null when it is acceptable. */
export function judge(request: FuzzRequest, answer: FuzzAnswer | string): string | null {
  if (typeof answer === 'string') return answer;
  if (answer.status >= 500) return `status ${answer.status}: ${answer.text.slice(0, 300)}`;
  if (request.method === 'HEAD' || answer.status === 204 || answer.status === 304) return null;
  if (isParserRefusal(answer)) return null;
  // A method the path has no route for, as Forgejo's router answers it: 405 with an empty
  // body (chi's default), e.g. PUT …/actions/secrets/ (an empty secret name).
  if (answer.status === 405 && answer.text === '') return null;
  const path = request.path;
  const isJson = answer.contentType.startsWith('application/json');
  let body: unknown;
  if (isJson) {
    try {
      body = JSON.parse(answer.text);
    } catch {
      return `status ${answer.status}: content-type ${answer.contentType} but the body is not JSON: ${answer.text.slice(0, 200)}`;
    }
  }
  if (path.startsWith('/api/v1/') && answer.status >= 400) {
    if (!isJson)
      return `status ${answer.status}: an /api/v1 error must be JSON, got ${answer.contentType || 'no content type'}`;
    const error = body as { message?: unknown; url?: unknown };
    if (typeof error !== 'object' || error === null || typeof error.message !== 'string')
      return `status ${answer.status}: error body without a message: ${answer.text.slice(0, 200)}`;
    // Forgejo's account checks and sudo refusals (403) carry no url; every other error does.
    if (typeof error.url !== 'string' && answer.status !== 403)
      return `status ${answer.status}: error body without a url: ${answer.text.slice(0, 200)}`;
  }
  if (path.startsWith('/api/actions/') && answer.status >= 400 && isJson) {
    const error = body as { code?: unknown };
    if (typeof error !== 'object' || error === null || typeof error.code !== 'string')
      return `status ${answer.status}: Connect error without a code: ${answer.text.slice(0, 200)}`;
  }
  return null;
}
