// The single place where failures become HTTP answers. Bodies follow Forgejo:
// {message, url} (plus `errors` for ctx.NotFound); validation failures are 422
// "[GoFieldName]: Rule"; a 500 logs its cause and shows no internals.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, STATUS_OF_KIND } from '../modules/errors.ts';

export const NOT_FOUND_MESSAGE = "The target couldn't be found.";

interface AjvError {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string;
}

/** `must_change_password` → `MustChangePassword`, as Forgejo names fields in binding errors. */
export function goFieldName(jsonKey: string): string {
  return jsonKey
    .split('_')
    .map((part) => (part === 'id' ? 'ID' : part === 'url' ? 'URL' : part.charAt(0).toUpperCase() + part.slice(1)))
    .join('');
}

function fieldOf(error: AjvError): string {
  const segments = error.instancePath.split('/').filter(Boolean);
  if (error.keyword === 'required') segments.push(String(error.params.missingProperty));
  const last = segments.length > 0 ? segments[segments.length - 1] : undefined;
  return last === undefined || /^\d+$/.test(last) ? '' : goFieldName(last);
}

/** Maps the first schema violation to Forgejo's binding message. */
export function bindingMessage(errors: readonly AjvError[]): string {
  const error = errors[0];
  if (!error) return '[]: invalid request body';
  const field = fieldOf(error);
  switch (error.keyword) {
    case 'required':
      return `[${field}]: Required`;
    case 'minLength':
      return error.params.limit === 1 ? `[${field}]: Required` : `[${field}]: MinSize`;
    case 'maxLength':
    case 'maxItems':
    case 'maxProperties':
      return `[${field}]: MaxSize`;
    case 'enum':
    case 'anyOf':
      return `[${field}]: In`;
    case 'type':
      return `[${field}]: json: cannot unmarshal into field of type ${String(error.params.type)}`;
    default:
      return `[${field}]: ${error.message ?? error.keyword}`;
  }
}

export function errorBody(
  rootUrl: string,
  message: string,
  extra: { errors?: string[]; omitUrl?: boolean } = {},
): Record<string, unknown> {
  const body: Record<string, unknown> = { message };
  if (!extra.omitUrl) body.url = `${rootUrl}api/swagger`;
  if (extra.errors) body.errors = extra.errors;
  return body;
}

export function fastifyErrorAnswer(
  error: FastifyError,
  req: FastifyRequest,
): { status: number; message: string } | null {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { status: 422, message: `[]: invalid JSON body: ${error.message}` };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { status: 422, message: '[]: the request body is empty; send a JSON object' };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return {
        status: 413,
        message: `request body is larger than ${req.routeOptions.bodyLimit} bytes (GANTRY_BODY_LIMIT); send a smaller body`,
      };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { status: 415, message: 'unsupported content type; send application/json' };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { status: 400, message: 'request body does not match Content-Length' };
    default:
      break;
  }
  if (error instanceof SyntaxError) return { status: 422, message: `[]: invalid JSON body: ${error.message}` };
  const status = error.statusCode;
  if (status !== undefined && status >= 400 && status < 500) return { status, message: error.message };
  return null;
}

/**
 * Fastify's `frameworkErrors`: what the router refuses before any route or
 * hook runs (a path that does not percent-decode to UTF-8, a segment over
 * the router's maxParamLength), answered in the API's shape instead of
 * Fastify's own body.
 */
export function frameworkErrorHandler(rootUrl: string, maxParamLength: number) {
  return (error: FastifyError, _req: FastifyRequest, reply: FastifyReply): FastifyReply => {
    if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
      return reply.status(414).send(errorBody(rootUrl, `a path segment is longer than ${maxParamLength} characters`));
    }
    if (error.code === 'FST_ERR_BAD_URL') {
      return reply
        .status(400)
        .send(errorBody(rootUrl, 'the URL path is not valid: a %-escape is malformed or does not decode to UTF-8'));
    }
    return reply.status(400).send(errorBody(rootUrl, 'the request cannot be routed'));
  };
}

/**
 * Answers a request no route matched with a page instead of JSON, or returns
 * null to leave it to the API's answer (the web console decides which).
 */
export type PageNotFound = (req: FastifyRequest, reply: FastifyReply) => FastifyReply | null;

export function installErrorHandlers(
  app: FastifyInstance,
  rootUrl: string,
  pageNotFound: PageNotFound = () => null,
): void {
  app.setErrorHandler((error: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
    if (error instanceof AppError) {
      if (error.options.retryAfterSec !== undefined) reply.header('Retry-After', String(error.options.retryAfterSec));
      return reply.status(STATUS_OF_KIND[error.kind]).send(errorBody(rootUrl, error.message, error.options));
    }
    if (error.validation) {
      return reply.status(422).send(errorBody(rootUrl, bindingMessage(error.validation as AjvError[])));
    }
    const known = fastifyErrorAnswer(error, req);
    if (known) return reply.status(known.status).send(errorBody(rootUrl, known.message));
    req.log.error({ err: error }, 'request failed');
    return reply
      .status(500)
      .send(errorBody(rootUrl, `internal server error (request ${req.id}); the cause is in the server log`));
  });

  app.setNotFoundHandler((req, reply) => {
    return pageNotFound(req, reply) ?? reply.status(404).send(errorBody(rootUrl, NOT_FOUND_MESSAGE, { errors: [] }));
  });
}
