// Which events a webhook subscribes to: the API's event names, the internal
// names stored in `webhook.events`, and the fixed order Forgejo answers them in
// (routers/api/v1/utils/hook.go updateHookEvents; models/webhook/webhook.go
// EventCheckers and HasEvent). `workflow_run` and `workflow_job` are Gitea's
// (1.24/1.25) and accepted here too; Forgejo 15 silently ignores them.
import { branchFilterProblem, compileBranchFilter } from '../../modules/glob.ts';

/** Internal subscription keys, in the order they are stored. */
export const INTERNAL_EVENTS = [
  'create',
  'delete',
  'fork',
  'push',
  'issues',
  'issue_assign',
  'issue_label',
  'issue_milestone',
  'issue_comment',
  'pull_request',
  'pull_request_assign',
  'pull_request_label',
  'pull_request_milestone',
  'pull_request_comment',
  'pull_request_review',
  'pull_request_review_request',
  'pull_request_sync',
  'wiki',
  'repository',
  'release',
  'package',
  'status',
  'action_run_failure',
  'action_run_recover',
  'action_run_success',
  'workflow_run',
  'workflow_job',
] as const;

export type InternalEvent = (typeof INTERNAL_EVENTS)[number];

/** Forgejo's PATCH leaves these as they were (they can only be chosen at creation). */
export const CREATE_ONLY_EVENTS: readonly InternalEvent[] = [
  'package',
  'action_run_failure',
  'action_run_recover',
  'action_run_success',
];

// The `issues` and `pull_request` API names turn on their whole family.
const ISSUE_GROUP: readonly InternalEvent[] = INTERNAL_EVENTS.filter((e) => e === 'issues' || e.startsWith('issue_'));
const PULL_GROUP: readonly InternalEvent[] = INTERNAL_EVENTS.filter((e) => e.startsWith('pull_request'));

/** What each accepted API name turns on (names are matched case-insensitively). */
const API_EVENT_ENABLES: ReadonlyMap<string, readonly InternalEvent[]> = new Map<string, readonly InternalEvent[]>([
  ...(
    [
      'create',
      'delete',
      'fork',
      'push',
      'wiki',
      'repository',
      'release',
      'package',
      'status',
      'action_run_failure',
      'action_run_recover',
      'action_run_success',
      'workflow_run',
      'workflow_job',
    ] as const
  ).map((e): [string, readonly InternalEvent[]] => [e, [e]]),
  ['issues', ISSUE_GROUP],
  ['issues_only', ['issues']],
  ...(['issue_assign', 'issue_label', 'issue_milestone', 'issue_comment'] as const).map(
    (e): [string, readonly InternalEvent[]] => [e, [e]],
  ),
  ['pull_request', PULL_GROUP],
  ['pull_request_only', ['pull_request']],
  ...(
    [
      'pull_request_assign',
      'pull_request_label',
      'pull_request_milestone',
      'pull_request_comment',
      'pull_request_review',
      'pull_request_review_request',
      'pull_request_sync',
    ] as const
  ).map((e): [string, readonly InternalEvent[]] => [e, [e]]),
]);

/**
 * The response's `events`: each name shown when its internal key is on, in
 * this order (Forgejo's EventCheckers, then Gitea's workflow events). A review
 * subscription shows as `_approved` + `_rejected`; a PR comment subscription
 * also as `pull_request_review_comment`.
 */
const RESPONSE_ORDER: readonly [string, InternalEvent][] = [
  ['create', 'create'],
  ['delete', 'delete'],
  ['fork', 'fork'],
  ['push', 'push'],
  ['issues', 'issues'],
  ['issue_assign', 'issue_assign'],
  ['issue_label', 'issue_label'],
  ['issue_milestone', 'issue_milestone'],
  ['issue_comment', 'issue_comment'],
  ['pull_request', 'pull_request'],
  ['pull_request_assign', 'pull_request_assign'],
  ['pull_request_label', 'pull_request_label'],
  ['pull_request_milestone', 'pull_request_milestone'],
  ['pull_request_comment', 'pull_request_comment'],
  ['pull_request_review_approved', 'pull_request_review'],
  ['pull_request_review_rejected', 'pull_request_review'],
  ['pull_request_review_comment', 'pull_request_comment'],
  ['pull_request_sync', 'pull_request_sync'],
  ['wiki', 'wiki'],
  ['repository', 'repository'],
  ['release', 'release'],
  ['package', 'package'],
  ['status', 'status'],
  ['pull_request_review_request', 'pull_request_review_request'],
  ['action_run_failure', 'action_run_failure'],
  ['action_run_recover', 'action_run_recover'],
  ['action_run_success', 'action_run_success'],
  ['workflow_run', 'workflow_run'],
  ['workflow_job', 'workflow_job'],
];

/** Delivered event types whose subscription key differs from their name (HasEvent). */
const SUBSCRIPTION_OF: Readonly<Record<string, InternalEvent>> = {
  pull_request_review_approved: 'pull_request_review',
  pull_request_review_rejected: 'pull_request_review',
  pull_request_review_comment: 'pull_request_comment',
};

/** Events whose payload carries a git ref, the only ones a branch filter applies to. */
const REF_EVENTS = new Set(['push', 'create', 'delete']);

function sortInternal(events: Iterable<InternalEvent>): InternalEvent[] {
  const on = new Set(events);
  return INTERNAL_EVENTS.filter((e) => on.has(e));
}

/** The internal keys a list of API names turns on; empty or omitted means `push`, unknown names are ignored. */
export function internalEventsFromApi(apiEvents: readonly string[] | undefined): InternalEvent[] {
  const names = apiEvents && apiEvents.length > 0 ? apiEvents : ['push'];
  const on = new Set<InternalEvent>();
  for (const name of names) for (const e of API_EVENT_ENABLES.get(name.toLowerCase()) ?? []) on.add(e);
  return sortInternal(on);
}

/** PATCH: everything is recomputed from the list except the create-only events, which keep their value. */
export function internalEventsForEdit(
  previous: readonly string[],
  apiEvents: readonly string[] | undefined,
): InternalEvent[] {
  const kept = CREATE_ONLY_EVENTS.filter((e) => previous.includes(e));
  const recomputed = internalEventsFromApi(apiEvents).filter((e) => !CREATE_ONLY_EVENTS.includes(e));
  return sortInternal([...recomputed, ...kept]);
}

/** The `events` of a Hook answer, in the fixed order. */
export function apiEventsOf(internal: readonly string[]): string[] {
  const on = new Set(internal);
  return RESPONSE_ORDER.filter(([, key]) => on.has(key)).map(([name]) => name);
}

/**
 * Whether a hook subscribes to `eventName`, a delivered event type such as
 * `push`, `create`, `delete`, `repository`, `workflow_run`, `workflow_job`,
 * `action_run_success` or `pull_request_review_approved`.
 */
export function hookWantsEvent(hook: { events: readonly string[] }, eventName: string): boolean {
  const key = SUBSCRIPTION_OF[eventName] ?? eventName;
  return hook.events.includes(key);
}

/**
 * Whether a hook's branch filter lets an event about `ref` through: only
 * push/create/delete are filtered; the filter is tried on the short branch
 * name (for `refs/heads/…`) and on the full ref, either matching passes
 * (Gitea #35567 semantics; Forgejo: services/webhook/webhook.go checkBranch). An
 * invalid stored filter (or one over Gantry's limits) lets nothing through.
 */
export function hookWantsRef(hook: { branchFilter: string }, eventName: string, ref: string): boolean {
  if (!REF_EVENTS.has(eventName) || hook.branchFilter === '' || hook.branchFilter === '*') return true;
  // Stored filters were checked when saved; one saved before the limits existed
  // and over them is treated as invalid rather than matched.
  if (branchFilterProblem(hook.branchFilter) !== null) return false;
  const match = compileBranchFilter(hook.branchFilter);
  if (ref.startsWith('refs/heads/') && match(ref.slice('refs/heads/'.length))) return true;
  return match(ref);
}
