// One HTTP attempt of a delivery, as Forgejo's services/webhook/deliver.go
// sends it to forgejo/gitea/gogs hooks: POST, the stored JSON payload (json)
// or `payload=<url-encoded JSON>` (form), and the Forgejo, Gitea, Gogs and
// GitHub header sets. The typed hooks (payloads/) build their own body and
// method and reuse the header set (forgejoHeaders) where Forgejo sends it.
//
// Signatures (X-Forgejo/Gitea/Gogs-Signature: hex HMAC-SHA256,
// X-Hub-Signature-256: sha256=…, X-Hub-Signature: sha1=…) are computed over
// the JSON payload, as Forgejo computes them (services/webhook/shared/
// payloader.go AddDefaultHeaders gets the payload, not the request body): for
// `json` that is the exact body sent; for `form` it is the JSON inside
// `payload=`, not the form body, so receivers written for Forgejo (decode the
// form, verify the JSON) work unchanged. Without a secret the headers go out
// with empty digests, as Forgejo sends them.
//
// Redirects are not followed (a 3xx is a failed attempt), the whole attempt is
// bounded by `timeoutMs` (Forgejo's DELIVER_TIMEOUT, 5 s), and at most
// `maxResponseBytes` of the response body are read and kept (64 KiB).
import { createHmac } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { isRefusedTarget } from './ssrf.ts';

export const DEFAULT_DELIVER_TIMEOUT_MS = 5000;
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;

/** X-*-Event for an event type (Forgejo's modules/webhook/type.go grouping). */
export function eventHeaderOf(eventType: string): string {
  if (eventType.startsWith('issue_comment') || eventType === 'pull_request_comment') return 'issue_comment';
  if (eventType === 'pull_request_review_approved') return 'pull_request_approved';
  if (eventType === 'pull_request_review_rejected') return 'pull_request_rejected';
  if (eventType === 'pull_request_review_comment') return 'pull_request_comment';
  if (eventType.startsWith('issue_')) return 'issues';
  if (eventType.startsWith('pull_request_')) return 'pull_request';
  return eventType;
}

export interface OutgoingDelivery {
  url: string;
  contentType: string;
  uuid: string;
  eventType: string;
  payload: string;
  secret: string;
  authorizationHeader: string;
  hookId: number;
  ownerId: number;
  /** Set for a repository's hook (its owner_id is 0). */
  repoId?: number;
  /** 1-based, for diagnostics (the delivery id stays the same). */
  attempt: number;
}

export interface BuiltRequest {
  /** POST unless set (matrix hooks PUT). */
  method?: 'POST' | 'PUT';
  url: string;
  headers: Record<string, string>;
  body: string;
}

export interface ForgejoHeaderInput {
  uuid: string;
  eventType: string;
  /** What the signatures are computed over: the body sent, or for a form hook the JSON inside `payload=`. */
  body: string;
  secret: string;
  hookId: number;
  ownerId: number;
  /** Set for a repository's hook (its owner_id is 0). */
  repoId?: number;
}

/** The X-Forgejo/Gitea/Gogs/GitHub delivery, event and signature headers (Forgejo's shared.AddDefaultHeaders, plus GitHub's hook ids). */
export function forgejoHeaders(d: ForgejoHeaderInput): Record<string, string> {
  const bytes = Buffer.from(d.body, 'utf8');
  const sha256 = d.secret ? createHmac('sha256', d.secret).update(bytes).digest('hex') : '';
  const sha1 = d.secret ? createHmac('sha1', d.secret).update(bytes).digest('hex') : '';
  const event = eventHeaderOf(d.eventType);
  // Where the hook is installed (Gitea #33752): a repository's hook, else an organization's.
  const onRepository = d.repoId !== undefined && d.repoId > 0;
  const targetType = onRepository ? 'repository' : 'organization';
  return {
    'x-forgejo-delivery': d.uuid,
    'x-forgejo-event': event,
    'x-forgejo-event-type': d.eventType,
    'x-forgejo-signature': sha256,
    'x-gitea-delivery': d.uuid,
    'x-gitea-event': event,
    'x-gitea-event-type': d.eventType,
    'x-gitea-signature': sha256,
    'x-gitea-hook-installation-target-type': targetType,
    'x-gogs-delivery': d.uuid,
    'x-gogs-event': event,
    'x-gogs-event-type': d.eventType,
    'x-gogs-signature': sha256,
    'x-github-delivery': d.uuid,
    'x-github-event': event,
    'x-github-event-type': d.eventType,
    'x-github-hook-id': String(d.hookId),
    'x-github-hook-installation-target-type': targetType,
    'x-github-hook-installation-target-id': String(onRepository ? d.repoId : d.ownerId),
    'x-hub-signature': `sha1=${sha1}`,
    'x-hub-signature-256': `sha256=${sha256}`,
  };
}

export function buildRequest(d: OutgoingDelivery): BuiltRequest {
  const form = d.contentType === 'form';
  const body = form ? `payload=${encodeURIComponent(d.payload)}` : d.payload;
  const headers: Record<string, string> = {
    'content-type': form ? 'application/x-www-form-urlencoded' : 'application/json',
    ...forgejoHeaders({
      uuid: d.uuid,
      eventType: d.eventType,
      body: d.payload,
      secret: d.secret,
      hookId: d.hookId,
      ownerId: d.ownerId,
      repoId: d.repoId,
    }),
    'x-gantry-delivery-attempt': String(d.attempt),
  };
  if (d.authorizationHeader) headers.authorization = d.authorizationHeader;
  return { method: 'POST', url: d.url, headers, body };
}

/** Headers as kept in the history: the Authorization value is never stored (Forgejo shows ******). */
export function redactHeaders(headers: Record<string, string>): Record<string, string> {
  const out = { ...headers };
  if (out.authorization !== undefined) out.authorization = '******';
  return out;
}

export interface SendResult {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** '' when a response came back. */
  error: string;
  durationMs: number;
  retryAfter: string | undefined;
  /** The allow list refused the target (GANTRY_WEBHOOK_ALLOWED_HOSTS): nothing was sent, and a retry cannot help. */
  refused: boolean;
}

export interface SendOptions {
  dispatcher: Dispatcher;
  timeoutMs?: number;
  maxResponseBytes?: number;
}

function flattenHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers))
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  return out;
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    if (error.name === 'TimeoutError' || error.name === 'AbortError') return 'timed out';
    return cause instanceof Error && cause.message && cause.message !== error.message
      ? `${error.message}: ${cause.message}`
      : error.message;
  }
  return String(error);
}

export async function sendRequest(req: BuiltRequest, options: SendOptions): Promise<SendResult> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_DELIVER_TIMEOUT_MS;
  const limit = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const started = performance.now();
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    // Loaded on the first delivery, as ssrf.ts's agent is (a cached module after that).
    const { request } = await import('undici');
    const response = await request(req.url, {
      method: req.method ?? 'POST',
      headers: req.headers,
      body: req.body,
      dispatcher: options.dispatcher,
      signal,
    });
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of response.body) {
        const buf = chunk as Buffer;
        chunks.push(buf.subarray(0, Math.max(0, limit - size)));
        size += buf.length;
        if (size >= limit) break;
      }
    } finally {
      // Stop reading what we will not keep; the connection is not reused.
      if (size >= limit) response.body.destroy();
    }
    const headers = flattenHeaders(response.headers);
    const retryAfter = headers['retry-after'];
    return {
      status: response.statusCode,
      headers,
      body: Buffer.concat(chunks).toString('utf8'),
      error: '',
      durationMs: Math.round(performance.now() - started),
      retryAfter,
      refused: false,
    };
  } catch (error) {
    const refused = isRefusedTarget(error);
    const message = signal.aborted && !refused ? `timed out after ${timeoutMs} ms` : describe(error);
    return {
      status: 0,
      headers: {},
      body: '',
      error: message,
      durationMs: Math.round(performance.now() - started),
      retryAfter: undefined,
      refused,
    };
  }
}
