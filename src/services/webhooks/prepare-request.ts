// Turns a hook and one of its outbox rows into the HTTP request of an attempt,
// or into the reason it cannot be sent. forgejo/gitea/gogs receivers get the
// stored Forgejo payload as is; the chat and CI types get the body their
// service expects (payloads/, after Forgejo's services/webhook/<type>.go),
// with the X-Forgejo-* headers and signatures over the bytes sent for the
// types Forgejo adds them to, and the hook's Authorization header for all.
//
// An event a type does not carry (a workflow_job for packagist is carried, a
// delete for sourcehut_builds is not) is recorded as a permanent
// "not sent: …": Forgejo silently never sends it; a record that says so
// beats a delivery that seems lost, and "delivered" would be false.
import type { HookTask } from '../../models/hook-tasks.ts';
import type { WebhookRecord } from '../../models/webhooks.ts';
import { converterFor, manifestLocationOf } from './payloads/index.ts';
import type { ManifestRead, TypedRequest } from './payloads/index.ts';
import { obj } from './payloads/text.ts';
import { buildRequest, forgejoHeaders } from './sender.ts';
import type { BuiltRequest } from './sender.ts';

const RAW_PAYLOAD_TYPES = new Set(['forgejo', 'gitea', 'gogs']);

export interface HookSecrets {
  secretOf(hook: Pick<WebhookRecord, 'id' | 'secretEncrypted'>): string;
  authorizationHeaderOf(hook: Pick<WebhookRecord, 'id' | 'authorizationHeaderEncrypted'>): string;
  /**
   * A file of a repository at a commit, null when there is none (the build
   * manifest of a sourcehut_builds hook). Without it such hooks record that
   * the manifest could not be read.
   */
  readRepositoryFile?(ownerName: string, repoName: string, commitId: string, path: string): Promise<string | null>;
}

export type PreparedRequest =
  | { kind: 'send'; request: BuiltRequest }
  /** Not sent; `permanent`: retrying cannot help (no further attempts). */
  | { kind: 'unsendable'; error: string; permanent: boolean };

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The secret and Authorization header in clear; throws when no key decrypts them. */
function credentialsOf(hook: WebhookRecord, secrets: HookSecrets): { secret: string; authorization: string } {
  return { secret: secrets.secretOf(hook), authorization: secrets.authorizationHeaderOf(hook) };
}

// Secrets that no key decrypts: retrying will not help until an operator acts, but it may.
function unpreparable(error: unknown): PreparedRequest {
  return { kind: 'unsendable', error: `could not prepare the request: ${describe(error)}`, permanent: false };
}

function prepareRaw(hook: WebhookRecord, task: HookTask, secrets: HookSecrets, attempt: number): PreparedRequest {
  try {
    const { secret, authorization } = credentialsOf(hook, secrets);
    const request = buildRequest({
      url: hook.url,
      contentType: hook.contentType,
      uuid: task.uuid,
      eventType: task.event_type,
      payload: task.payload_content,
      secret,
      authorizationHeader: authorization,
      hookId: hook.id,
      ownerId: hook.ownerId,
      repoId: hook.repoId,
      attempt,
    });
    return { kind: 'send', request };
  } catch (error) {
    return unpreparable(error);
  }
}

async function readManifest(
  input: Parameters<typeof manifestLocationOf>[0],
  secrets: HookSecrets,
): Promise<ManifestRead | undefined> {
  const where = manifestLocationOf(input);
  if (!where) return undefined;
  const missing = { error: `could not open manifest "${where.path}" at ${where.commitId}` };
  if (!secrets.readRepositoryFile) return missing;
  const text = await secrets.readRepositoryFile(where.ownerName, where.repoName, where.commitId, where.path);
  return text === null ? missing : { text };
}

function finish(
  typed: TypedRequest,
  hook: WebhookRecord,
  task: HookTask,
  secrets: HookSecrets,
  attempt: number,
): PreparedRequest {
  try {
    const { secret, authorization } = credentialsOf(hook, secrets);
    const headers: Record<string, string> = { ...typed.headers };
    if (typed.forgejoHeaders)
      Object.assign(
        headers,
        forgejoHeaders({
          uuid: task.uuid,
          eventType: task.event_type,
          body: typed.body,
          secret,
          hookId: hook.id,
          ownerId: hook.ownerId,
          repoId: hook.repoId,
        }),
      );
    headers['x-gantry-delivery-attempt'] = String(attempt);
    // deliver.go sets the hook's Authorization header on every type's request.
    if (authorization) headers.authorization = authorization;
    return { kind: 'send', request: { method: typed.method, url: typed.url, headers, body: typed.body } };
  } catch (error) {
    return unpreparable(error);
  }
}

export async function prepareRequest(
  hook: WebhookRecord,
  task: HookTask,
  secrets: HookSecrets,
  attempt: number,
): Promise<PreparedRequest> {
  if (RAW_PAYLOAD_TYPES.has(hook.type)) return prepareRaw(hook, task, secrets, attempt);
  const convert = converterFor(hook.type);
  if (!convert)
    return {
      kind: 'unsendable',
      error: `hook type "${hook.type}" cannot be delivered by this server`,
      permanent: true,
    };
  let payload: unknown;
  try {
    payload = JSON.parse(task.payload_content);
  } catch {
    return {
      kind: 'unsendable',
      error: `not sent: the stored ${task.event_type} payload is not valid JSON`,
      permanent: true,
    };
  }
  const input = {
    eventType: task.event_type,
    payload: obj(payload),
    meta: obj(hook.meta),
    url: hook.url,
    uuid: task.uuid,
  };
  let manifest: ManifestRead | undefined;
  try {
    manifest = hook.type === 'sourcehut_builds' ? await readManifest(input, secrets) : undefined;
  } catch (error) {
    // The repository could not be read just now (git failed): a later attempt may succeed.
    return { kind: 'unsendable', error: `could not read the build manifest: ${describe(error)}`, permanent: false };
  }
  const converted = convert({ ...input, manifest });
  if (converted.kind === 'skip') return { kind: 'unsendable', error: `not sent: ${converted.reason}`, permanent: true };
  return finish(converted.request, hook, task, secrets, attempt);
}
