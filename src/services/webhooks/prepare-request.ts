// Turns a hook and one of its outbox rows into the HTTP request of an attempt,
// or into the reason it cannot be sent. forgejo/gitea/gogs receivers get the
// stored Forgejo payload as is; the chat and CI types get their own body
// (payloads/, not written yet: those fail permanently with a clear reason).
import type { HookTask } from '../../models/hook-tasks.ts';
import type { WebhookRecord } from '../../models/webhooks.ts';
import { buildRequest } from './sender.ts';
import type { BuiltRequest } from './sender.ts';

const RAW_PAYLOAD_TYPES = new Set(['forgejo', 'gitea', 'gogs']);

export interface HookSecrets {
  secretOf(hook: Pick<WebhookRecord, 'id' | 'secretEncrypted'>): string;
  authorizationHeaderOf(hook: Pick<WebhookRecord, 'id' | 'authorizationHeaderEncrypted'>): string;
}

export type PreparedRequest =
  | { kind: 'send'; request: BuiltRequest }
  /** Not sent; `permanent`: retrying cannot help (no further attempts). */
  | { kind: 'unsendable'; error: string; permanent: boolean };

export function prepareRequest(hook: WebhookRecord, task: HookTask, secrets: HookSecrets, attempt: number): PreparedRequest {
  if (!RAW_PAYLOAD_TYPES.has(hook.type)) {
    return { kind: 'unsendable', error: `hook type "${hook.type}" cannot be delivered by this server yet`, permanent: true };
  }
  try {
    const request = buildRequest({
      url: hook.url,
      contentType: hook.contentType,
      uuid: task.uuid,
      eventType: task.event_type,
      payload: task.payload_content,
      secret: secrets.secretOf(hook),
      authorizationHeader: secrets.authorizationHeaderOf(hook),
      hookId: hook.id,
      ownerId: hook.ownerId,
      attempt,
    });
    return { kind: 'send', request };
  } catch (error) {
    // Secrets that no key decrypts: retrying will not help until an operator acts, but it may.
    return { kind: 'unsendable', error: `could not prepare the request: ${error instanceof Error ? error.message : String(error)}`, permanent: false };
  }
}
