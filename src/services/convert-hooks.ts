// Webhooks → Forgejo's JSON (services/webhook/general.go ToHook).
import type { HookJson } from '../api-types/hook-schemas.ts';
import type { WebhookRecord } from '../models/webhooks.ts';
import { apiTime } from './convert.ts';
import { apiEventsOf } from './webhooks/hook-events.ts';
import type { WebhookService } from './webhooks/hooks.ts';

/** Forgejo's ToHook: config keys come out sorted (a Go map), never with the secret. */
export function toApiHook(hook: WebhookRecord, webhooks: WebhookService): HookJson {
  const config: Record<string, string> = { content_type: hook.contentType, url: hook.url };
  if (hook.type === 'slack') {
    const meta = webhooks.metadataOf(hook) as Record<string, string>;
    Object.assign(config, {
      channel: meta.channel,
      username: meta.username,
      icon_url: meta.icon_url,
      color: meta.color,
    });
  }
  const sorted = Object.fromEntries(Object.entries(config).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return {
    id: hook.id,
    type: hook.type,
    branch_filter: hook.branchFilter,
    url: hook.url,
    config: sorted,
    events: apiEventsOf(hook.events),
    authorization_header: webhooks.authorizationHeaderOf(hook),
    content_type: hook.contentType,
    metadata: webhooks.metadataOf(hook),
    active: hook.isActive,
    updated_at: apiTime(hook.updatedUnix),
    created_at: apiTime(hook.createdUnix),
  };
}
