// The contract of a typed payload converter, and the event dispatch the chat
// types share (Forgejo's shared.NewPayload: one method per event).
//
// A converter is pure: (event type, stored Forgejo payload, hook meta, hook
// URL, delivery id) → the request to send, or a reason not to send. Events a
// type does not carry are skipped as in Forgejo; the caller records that as a
// permanent "not sent: <reason>" on the delivery (never as delivered: no
// request left the server, and the history must say so).
import { actionView, obj, pushView, refView, repositoryEventView, workflowView } from './text.ts';
import type { ActionView, Json, PushView, RefView, RepositoryEventView, WorkflowView } from './text.ts';

/** A build manifest read from the repository (sourcehut_builds), or why it could not be. */
export type ManifestRead = { text: string } | { error: string };

export interface ConvertInput {
  eventType: string;
  /** The stored Forgejo payload, parsed. */
  payload: Json;
  /** The hook's `meta` (its type's settings); {} when none. */
  meta: Json;
  url: string;
  /** The delivery id: the same on every attempt of one delivery. */
  uuid: string;
  /** sourcehut_builds only: the manifest at the commit the event names. */
  manifest?: ManifestRead;
}

export interface TypedRequest {
  method: 'POST' | 'PUT';
  url: string;
  /** The type's own headers (content type); the caller adds Authorization and, when `forgejoHeaders`, the signed X-Forgejo-* set. */
  headers: Record<string, string>;
  body: string;
  /** Whether Forgejo sends its X-Forgejo/Gitea/Gogs/GitHub headers and signatures with this type (shared.NewJSONRequest's withDefaultHeaders). */
  forgejoHeaders: boolean;
}

/** Not sent, and why. */
export interface Skip {
  kind: 'skip';
  reason: string;
}

export type Converted = { kind: 'request'; request: TypedRequest } | Skip;

export type Converter = (input: ConvertInput) => Converted;

export function skip(reason: string): Skip {
  return { kind: 'skip', reason };
}

export function notCarried(type: string, eventType: string): Skip {
  return skip(`${type} hooks do not carry ${eventType} events`);
}

/**
 * Forgejo's PrepareWebhook never queues a push without commits for a hook
 * other than forgejo/gitea/gogs ("0 new commits" is noise in a chat); the
 * outbox here queues it for every hook, so the typed hooks skip it.
 */
export function emptyPush(type: string): Skip {
  return skip(`${type} hooks are not sent pushes without new commits (as in Forgejo)`);
}

/** One rendering per event a chat type carries; the result is its message body (any JSON value). */
export interface EventRenderers {
  push(p: PushView): unknown;
  create(r: RefView): unknown;
  delete(r: RefView): unknown;
  /** Only `created` and `deleted` reach it (Forgejo renders nothing for other actions). */
  repository(r: RepositoryEventView): unknown;
  action(a: ActionView): unknown;
  workflow(w: WorkflowView): unknown;
}

/** Picks the rendering for the event, or says why there is none. */
export function renderEvent(
  type: string,
  input: ConvertInput,
  renderers: EventRenderers,
): { kind: 'body'; body: unknown } | Skip {
  const p = obj(input.payload);
  const body = (value: unknown) => ({ kind: 'body' as const, body: value });
  switch (input.eventType) {
    case 'push': {
      const push = pushView(p);
      if (push.commits.length === 0) return emptyPush(type);
      return body(renderers.push(push));
    }
    case 'create':
      return body(renderers.create(refView(p)));
    case 'delete':
      return body(renderers.delete(refView(p)));
    case 'repository': {
      const view = repositoryEventView(p);
      if (view.action !== 'created' && view.action !== 'deleted')
        return skip(`${type} hooks cannot render the repository action "${view.action}"`);
      return body(renderers.repository(view));
    }
    case 'action_run_success':
    case 'action_run_failure':
    case 'action_run_recover':
      return body(renderers.action(actionView(input.eventType, p)));
    case 'workflow_run':
    case 'workflow_job':
      return body(renderers.workflow(workflowView(input.eventType, p)));
    default:
      return notCarried(type, input.eventType);
  }
}

/** A chat type: render the event, POST the JSON to the hook URL with Forgejo's headers. */
export function chatConverter(
  type: string,
  renderersFor: (input: ConvertInput) => EventRenderers,
  serialise: (body: unknown) => string,
): Converter {
  return (input) => {
    const rendered = renderEvent(type, input, renderersFor(input));
    if (rendered.kind === 'skip') return rendered;
    return {
      kind: 'request',
      request: {
        method: 'POST',
        url: input.url,
        headers: { 'content-type': 'application/json' },
        body: serialise(rendered.body),
        forgejoHeaders: true,
      },
    };
  };
}
