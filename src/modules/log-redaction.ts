// What a request looks like in the log: no credential ever. Query parameters
// that carry one (Forgejo reads `token` and `access_token`; anything named
// …token, …password or …secret is treated alike) keep their name and lose
// their value; so does the user info of an absolute-form target
// (`GET http://user:password@host/…`); headers are not logged at all: whatever
// is logged as `req` or `res` goes through these serializers, which pick known
// fields only.

const CREDENTIAL_PARAMETER = /^(?:.*[_.-])?(?:token|password|passwd|secret)$/i;
export const REDACTED = '[redacted]';

function decodedName(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch {
    return raw;
  }
}

const SLASH = 0x2f;
const USER_INFO = /^([a-z][a-z0-9+.-]*:\/\/)[^/?#@]*@/i;

/** `url` (a request target) with the values of credential parameters and any user info replaced. */
export function redactQueryCredentials(target: string): string {
  // Most targets are a path without a query: nothing to look for (USER_INFO needs a scheme first).
  if (target.charCodeAt(0) === SLASH && !target.includes('?')) return target;
  const url = target.replace(USER_INFO, `$1${REDACTED}@`);
  const start = url.indexOf('?');
  if (start < 0) return url;
  const pairs = url
    .slice(start + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq < 0 ? pair : pair.slice(0, eq);
      return CREDENTIAL_PARAMETER.test(decodedName(name)) && eq >= 0 ? `${name}=${REDACTED}` : pair;
    });
  return `${url.slice(0, start)}?${pairs.join('&')}`;
}

interface LoggableRequest {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  headers?: Record<string, unknown>;
  socket?: { remoteAddress?: string; remotePort?: number } | null;
}

/** The `req` of a log line (a Fastify request or a plain IncomingMessage): method, redacted URL, host, peer. */
export function serializeRequest(req: LoggableRequest): Record<string, unknown> {
  const host = req.host ?? req.headers?.host;
  return {
    method: req.method,
    url: typeof req.url === 'string' ? redactQueryCredentials(req.url) : undefined,
    host: typeof host === 'string' ? host : undefined,
    remoteAddress: req.ip ?? req.socket?.remoteAddress,
    remotePort: req.socket?.remotePort,
  };
}

/** The `res` of a log line (a Fastify reply or a ServerResponse): its status, nothing else (no headers, no cookies). */
export function serializeResponse(res: { statusCode?: number }): Record<string, unknown> {
  return { statusCode: res.statusCode };
}
