// Organization and repository webhooks: Forgejo's CRUD rules, one
// implementation for both scopes as Forgejo's (routers/api/v1/utils/hook.go
// checkCreateHookOption, addHook, editHook; services/webhook). A hook belongs
// to one scope (modules/scope.ts) and is "not found" from any other. The
// secret and the Authorization header are encrypted with the key ring, bound to the hook
// id and the column; the secret is never shown again, the header is shown
// decrypted as Forgejo does.
import { AppError } from '../../modules/errors.ts';
import type { Clock } from '../../modules/clock.ts';
import type { KeyRing } from '../../modules/crypto/key-ring.ts';
import { branchFilterProblem } from '../../modules/glob.ts';
import type { Page } from '../../modules/pagination.ts';
import type { Db } from '../../models/database.ts';
import {
  countWebhookValuesNotUnderPrefix,
  countWebhooksOfScope,
  deleteWebhookOfScope,
  findWebhookOfScope,
  insertWebhook,
  listWebhookValuesNotUnderPrefix,
  listWebhooksOfScope,
  setWebhookCiphertexts,
  swapWebhookValue,
  updateWebhook,
  webhookValuePrefixesInUse,
} from '../../models/webhooks.ts';
import type { WebhookCipherColumn, WebhookChanges, WebhookRecord } from '../../models/webhooks.ts';
import type { Scope } from '../../modules/scope.ts';
import type { EncryptedColumn } from '../key-rotation.ts';
import { internalEventsForEdit, internalEventsFromApi } from './hook-events.ts';

/** Every type with a delivery handler (Forgejo's services/webhook registry). */
export const HOOK_TYPES = [
  'forgejo',
  'gitea',
  'gogs',
  'slack',
  'discord',
  'dingtalk',
  'telegram',
  'msteams',
  'feishu',
  'matrix',
  'wechatwork',
  'packagist',
  'sourcehut_builds',
] as const;

export interface CreateHookInput {
  type?: string;
  config?: Record<string, string>;
  events?: string[];
  branch_filter?: string;
  authorization_header?: string;
  active?: boolean;
}

export interface EditHookInput {
  config?: Record<string, string>;
  events?: string[];
  branch_filter?: string;
  authorization_header?: string;
  active?: boolean;
  /**
   * Keep the stored Authorization header when none is given (the web
   * console's form, which never shows the current value); the API clears it,
   * as Forgejo does.
   */
  keepAuthorizationHeader?: boolean;
}

const SLACK_CHANNEL = /^#?[a-z0-9_-]{1,80}$/;

/** The per-type `metadata` shape of an answer: a hook created without settings shows the zero values (Forgejo unmarshals into the type's struct). */
const META_DEFAULTS: Readonly<Record<string, Record<string, unknown>>> = {
  slack: { channel: '', username: '', icon_url: '', color: '' },
  discord: { username: '', icon_url: '' },
  telegram: { bot_token: '', chat_id: '', thread_id: '' },
  matrix: { homeserver_url: '', room_id: '', message_type: 0 },
  packagist: { username: '', api_token: '', package_url: '' },
  sourcehut_builds: { manifest_path: '', visibility: '', secrets: false },
};

/** Go's strconv.ParseBool. */
function parseGoBool(value: string): boolean | null {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(value)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(value)) return false;
  return null;
}

/**
 * Forgejo's validation.IsValidURL: parses as a request URI, scheme http or
 * https (any case), and a port, if any, made of digits.
 */
export function isValidHookUrl(raw: string): boolean {
  // Go's URL parser refuses ASCII control characters; a request URI has no fragment-only or relative form.
  for (const ch of raw) {
    const code = ch.codePointAt(0) as number;
    if (code <= 0x20 || code === 0x7f) return false;
  }
  const match = /^([a-zA-Z][a-zA-Z0-9+.-]*):(.*)$/s.exec(raw);
  if (!match) return false;
  const scheme = (match[1] as string).toLowerCase();
  if (scheme !== 'http' && scheme !== 'https') return false;
  const rest = match[2] as string;
  if (!rest.startsWith('//')) return rest.startsWith('/');
  const authority = rest.slice(2).split(/[/?#]/, 1)[0] as string;
  const host = authority.slice(authority.lastIndexOf('@') + 1);
  const colon = host.lastIndexOf(':');
  const port = colon >= 0 && !host.slice(colon).includes(']') ? host.slice(colon + 1) : '';
  return /^\d*$/.test(port);
}

// Forgejo's `GlobPattern` binding (modules/validation/binding.go), plus
// Gantry's size limits so that no stored filter is costly to match.
function checkBranchFilter(pattern: string | undefined): string {
  const filter = pattern ?? '';
  const problem = branchFilterProblem(filter);
  if (problem !== null) throw AppError.unprocessable(`[BranchFilter]: ${problem}`);
  return filter;
}

function checkContentType(value: string): 'json' | 'form' {
  if (value !== 'json' && value !== 'form') throw AppError.unprocessable('Invalid content type');
  return value;
}

function slackMeta(config: Record<string, string>, channel: string): Record<string, string> {
  return { channel, username: config.username ?? '', icon_url: config.icon_url ?? '', color: config.color ?? '' };
}

export class WebhookService {
  constructor(
    readonly db: Db,
    readonly clock: Clock,
    readonly keys: KeyRing,
  ) {}

  async list(scope: Scope, page: Page): Promise<{ hooks: WebhookRecord[]; total: number }> {
    const [hooks, total] = await Promise.all([
      listWebhooksOfScope(this.db, scope, page.limit, page.offset),
      countWebhooksOfScope(this.db, scope),
    ]);
    return { hooks, total };
  }

  /** A hook of this scope, or the standard 404. */
  async get(scope: Scope, id: number): Promise<WebhookRecord> {
    const hook = id > 0 ? await findWebhookOfScope(this.db, scope, id) : null;
    if (!hook) throw AppError.notFound();
    return hook;
  }

  /** Validates in Forgejo's order (binding, then checkCreateHookOption, then addHook) and stores the hook. */
  async create(scope: Scope, input: CreateHookInput): Promise<WebhookRecord> {
    const rawType = input.type ?? '';
    if (rawType === '') throw AppError.unprocessable('[Type]: Required');
    const config = input.config;
    if (config === undefined) throw AppError.unprocessable('[Config]: Required');
    const branchFilter = checkBranchFilter(input.branch_filter);
    if (!(HOOK_TYPES as readonly string[]).includes(rawType))
      throw AppError.unprocessable(`Invalid hook type: ${rawType}`);
    const url = config.url;
    if (url === undefined) throw AppError.unprocessable('Missing config option: url');
    if (config.content_type === undefined) throw AppError.unprocessable('Missing config option: content_type');
    const contentType = checkContentType(config.content_type);
    if (!isValidHookUrl(url)) throw AppError.unprocessable('Invalid url');
    let isSystemWebhook = false;
    if (config.is_system_webhook !== undefined) {
      const parsed = parseGoBool(config.is_system_webhook);
      if (parsed === null) throw AppError.unprocessable('Invalid is_system_webhook value');
      isSystemWebhook = parsed;
    }
    const type = rawType.trim();
    let meta: unknown = null;
    if (type === 'slack') {
      if (config.channel === undefined) throw AppError.unprocessable('Missing config option: channel');
      const channel = config.channel.trim();
      if (!SLACK_CHANNEL.test(channel)) throw AppError.invalid('Invalid slack channel name');
      meta = slackMeta(config, channel);
    }
    const nowSec = this.clock.nowSec();
    const secret = config.secret ?? '';
    const authorization = input.authorization_header ?? '';
    const id = await this.db.transaction().execute(async (tx) => {
      const inserted = await insertWebhook(tx, {
        ownerId: scope.ownerId,
        repoId: scope.repoId,
        type,
        url,
        contentType,
        events: internalEventsFromApi(input.events),
        branchFilter,
        meta,
        isActive: input.active ?? false,
        isSystemWebhook,
        nowSec,
      });
      await setWebhookCiphertexts(tx, inserted, {
        secretEncrypted: this.encrypt(secret, inserted, 'secret_encrypted'),
        authorizationHeaderEncrypted: this.encrypt(authorization, inserted, 'authorization_header_encrypted'),
      });
      return inserted;
    });
    return this.get(scope, id);
  }

  /**
   * Forgejo's editHook, not a partial update: omitted events reset to `push`,
   * an omitted branch filter and Authorization header are cleared, `active`
   * changes only when sent; the secret cannot be changed; package and
   * action_run_* events keep their value.
   */
  async edit(scope: Scope, id: number, input: EditHookInput): Promise<WebhookRecord> {
    const branchFilter = checkBranchFilter(input.branch_filter);
    const hook = await this.get(scope, id);
    const changes: WebhookChanges = {};
    const config = input.config;
    if (config) {
      if (config.url !== undefined) {
        if (!isValidHookUrl(config.url)) throw AppError.unprocessable('Invalid url');
        changes.url = config.url;
      }
      if (config.content_type !== undefined) changes.contentType = checkContentType(config.content_type);
      if (hook.type === 'slack' && config.channel !== undefined) changes.meta = slackMeta(config, config.channel);
    }
    changes.events = internalEventsForEdit(hook.events, input.events);
    changes.branchFilter = branchFilter;
    if (!(input.keepAuthorizationHeader === true && input.authorization_header === undefined)) {
      changes.authorizationHeaderEncrypted = this.encrypt(
        input.authorization_header ?? '',
        hook.id,
        'authorization_header_encrypted',
      );
    }
    if (input.active !== undefined) changes.isActive = input.active;
    await updateWebhook(this.db, hook.id, changes, this.clock.nowSec());
    return this.get(scope, id);
  }

  async delete(scope: Scope, id: number): Promise<void> {
    const deleted = id > 0 && (await this.db.transaction().execute((tx) => deleteWebhookOfScope(tx, scope, id)));
    if (!deleted) throw AppError.notFound();
  }

  /** The HMAC secret in clear ('' when none). For delivery only, never for an answer. */
  secretOf(hook: Pick<WebhookRecord, 'id' | 'secretEncrypted'>): string {
    return this.decrypt(hook.secretEncrypted, hook.id, 'secret_encrypted');
  }

  /** The Authorization header in clear ('' when none): sent with deliveries and shown by the API. */
  authorizationHeaderOf(hook: Pick<WebhookRecord, 'id' | 'authorizationHeaderEncrypted'>): string {
    return this.decrypt(hook.authorizationHeaderEncrypted, hook.id, 'authorization_header_encrypted');
  }

  /** `metadata` of an answer, per type (null for the types without settings). */
  metadataOf(hook: Pick<WebhookRecord, 'type' | 'meta'>): unknown {
    const defaults = META_DEFAULTS[hook.type];
    if (!defaults) return null;
    const stored = hook.meta !== null && typeof hook.meta === 'object' ? (hook.meta as Record<string, unknown>) : {};
    return Object.fromEntries(Object.entries(defaults).map(([key, zero]) => [key, stored[key] ?? zero]));
  }

  private encrypt(plaintext: string, id: number, column: WebhookCipherColumn): string {
    return plaintext === '' ? '' : this.keys.encrypt(plaintext, associatedData(id, column));
  }

  private decrypt(stored: string, id: number, column: WebhookCipherColumn): string {
    return stored === '' ? '' : this.keys.decrypt(stored, associatedData(id, column));
  }
}

/** Binds a ciphertext to its row and column, so it cannot be moved to another hook or field. */
function associatedData(id: number, column: WebhookCipherColumn): string {
  return `webhook:${id}:${column}`;
}

/** `webhook.secret_encrypted` and `webhook.authorization_header_encrypted` for key rotation (listed in services/encrypted-columns.ts). */
export const WEBHOOK_COLUMNS: readonly EncryptedColumn[] = (
  ['secret_encrypted', 'authorization_header_encrypted'] as const
).map(webhookColumn);

function webhookColumn(column: WebhookCipherColumn): EncryptedColumn {
  return {
    label: `webhook.${column}`,
    count: (db, prefix) => countWebhookValuesNotUnderPrefix(db, column, prefix),
    batch: async (db, prefix, afterId, limit) =>
      (await listWebhookValuesNotUnderPrefix(db, column, prefix, afterId, limit)).map((row) => ({
        id: row.id,
        stored: row.stored,
        associatedData: associatedData(row.id, column),
      })),
    swap: (db, id, expected, next) => swapWebhookValue(db, column, id, expected, next),
    prefixesInUse: (db) => webhookValuePrefixesInUse(db, column),
  };
}
