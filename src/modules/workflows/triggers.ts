// Does a workflow's `on:` select an event? The pure half of Forgejo's event
// detection (modules/actions/workflows.go detectMatched, matchPushEvent;
// services/actions/notifier_helper.go skipWorkflows). The caller supplies facts
// about the event; git work (the changed files) is only done if a filter asks.
import type { WorkflowTemplate } from '@actions/workflow-parser';
import { compileFilterPatterns, type FilterMatcher } from './patterns.ts';

/** The normalised `on:` of @actions/workflow-parser: `on: push` arrives as `{ push: {} }`. */
export type EventsConfig = WorkflowTemplate['events'];

export type RefUpdateKind = 'created' | 'updated' | 'deleted';

export interface PushFacts {
  event: 'push';
  /** Full ref: refs/heads/x or refs/tags/y. */
  ref: string;
  /** Full message of the pushed head commit; a skip marker in it suppresses the push. */
  commitMessage: string;
  /**
   * Files changed by the push, called only if a `paths`/`paths-ignore` filter
   * applies, at most once per call. Compute as Forgejo does: diff `before..after`,
   * and for a new ref (zero `before`) the files of the head commit alone
   * (git diff-tree --root <after>). Resolve null when the diff cannot be made:
   * the paths filters then do not exclude (GitHub runs such a workflow), where
   * Forgejo would log the error and not match.
   */
  changedPaths: () => Promise<string[] | null>;
}

export interface CreateDeleteFacts {
  event: 'create' | 'delete';
  ref: string;
}

export type EventFacts = PushFacts | CreateDeleteFacts | { event: 'workflow_dispatch' };

type EventName = EventFacts['event'];
type FactsOf<E extends EventName> = Extract<EventFacts, { event: E }>;
type EventMatcher<E extends EventName> = (config: unknown, facts: FactsOf<E>) => boolean | Promise<boolean>;

/** Forgejo's default [actions] SKIP_WORKFLOW_STRINGS. */
const SKIP_MARKERS = ['[skip ci]', '[ci skip]', '[no ci]', '[skip actions]', '[actions skip]'] as const;

/** Case-sensitive substring test over the whole message, as Forgejo's strings.Contains. */
export function hasSkipMarker(message: string): boolean {
  return SKIP_MARKERS.some((marker) => message.includes(marker));
}

/**
 * Events one ref update raises, in Forgejo's notification order
 * (services/repository/push.go pushUpdates). A new branch raises `create` then
 * `push`; a tag raises `push` then `create`, and Forgejo treats every non-delete
 * tag update, a forced move included, as a new tag. A deletion raises only
 * `delete` (Forgejo's push notification for a deleted tag finds no commit and
 * starts nothing). Refs that are neither branches nor tags raise nothing.
 * Without `ref` the update is taken to be a branch.
 */
export function eventsForRefUpdate(kind: RefUpdateKind, ref?: string): Array<'push' | 'create' | 'delete'> {
  const refKind = ref === undefined ? 'branch' : kindOfRef(ref);
  if (refKind === 'other') return [];
  if (kind === 'deleted') return ['delete'];
  if (refKind === 'tag') return ['push', 'create'];
  return kind === 'created' ? ['create', 'push'] : ['push'];
}

/**
 * Whether the workflow runs for the event: `on:` must list the event and its
 * filters must pass. Push facts carrying a skip marker never match, so no
 * caller can forget it (Forgejo checks it once per push, before reading any
 * workflow; callers may still short-circuit with hasSkipMarker).
 *
 * `workflow_dispatch` answers whether `on:` lists it. Forgejo's dispatch API does
 * not require that (reference §3.5), so the dispatch service need not call this.
 */
export async function workflowMatchesEvent(events: EventsConfig, facts: EventFacts): Promise<boolean> {
  if (!Object.hasOwn(events, facts.event)) return false;
  // The table is keyed by facts.event, so the entry takes exactly these facts;
  // TypeScript cannot correlate the two through the union, hence the cast.
  const matcher = EVENT_MATCHERS[facts.event] as EventMatcher<EventName>;
  return matcher(events[facts.event], facts as FactsOf<EventName>);
}

// One entry per event Gantry detects. create/delete take no filters (the parser
// rejects them, and Forgejo ignores any it sees).
const EVENT_MATCHERS: { [E in EventName]: EventMatcher<E> } = {
  push: matchPush,
  create: () => true,
  delete: () => true,
  workflow_dispatch: () => true,
};

type PushConfig = NonNullable<EventsConfig['push']>;
type RefKind = 'branch' | 'tag' | 'other';

/** One compiled pattern list: null constrains nothing (absent or empty, as act reads `[]`). */
type ListCheck = FilterMatcher | 'invalid' | null;

/** A filter pair such as `branches` + `branches-ignore`; null when neither key is present. */
type FilterPair = { include: ListCheck; ignore: ListCheck } | null;

interface CompiledPush {
  branch: FilterPair;
  tag: FilterPair;
  paths: FilterPair;
}

// Keyed by the converted config object, so a caller that keeps its parsed
// workflow compiles each pattern list once.
const compiledPushConfigs = new WeakMap<object, CompiledPush>();

async function matchPush(config: unknown, facts: PushFacts): Promise<boolean> {
  if (hasSkipMarker(facts.commitMessage)) return false;
  const filters = compilePush(config);
  const refKind = kindOfRef(facts.ref);

  // Forgejo: branch filters bind only branch refs and tag filters only tags; a
  // ref of a kind whose filters are absent fails when the other kind has some.
  // Where Forgejo counts `tags` and `tags-ignore` as two conditions and so never
  // matches a branch when both are set, we simply ignore the other kind.
  const own = refKind === 'branch' ? filters.branch : refKind === 'tag' ? filters.tag : null;
  if (own === null) {
    if (filters.branch !== null || filters.tag !== null) return false;
  } else if (!passesNameFilter(own, shortName(facts.ref))) {
    return false;
  }

  // Path filters also apply to tags (Forgejo), although GitHub skips them there.
  return filters.paths === null ? true : passesPathFilter(filters.paths, facts.changedPaths);
}

// `branches` and `branches-ignore` together (GitHub rejects the workflow, the
// parser does not): both must pass, as in Forgejo. An invalid list never passes.
function passesNameFilter({ include, ignore }: NonNullable<FilterPair>, name: string): boolean {
  if (include === 'invalid' || ignore === 'invalid') return false;
  return (include === null || include(name)) && (ignore === null || !ignore(name));
}

async function passesPathFilter(
  { include, ignore }: NonNullable<FilterPair>,
  changedPaths: PushFacts['changedPaths'],
): Promise<boolean> {
  // Decided before any git work where the patterns alone decide.
  if (include === 'invalid' || ignore === 'invalid') return false;
  if (include === null && ignore === null) return true;
  const files = await changedPaths();
  if (files === null) return true;
  // With no changed files neither list can pass (GitHub: "If there are no files
  // changed, the workflow will not run"; act agrees).
  return (
    (include === null || files.some((file) => include(file))) &&
    (ignore === null || files.some((file) => !ignore(file)))
  );
}

function compilePush(config: unknown): CompiledPush {
  const push: PushConfig = typeof config === 'object' && config !== null ? config : {};
  let compiled = compiledPushConfigs.get(push);
  if (compiled === undefined) {
    compiled = {
      branch: compilePair(push.branches, push['branches-ignore']),
      tag: compilePair(push.tags, push['tags-ignore']),
      paths: compilePair(push.paths, push['paths-ignore']),
    };
    compiledPushConfigs.set(push, compiled);
  }
  return compiled;
}

function compilePair(include: string[] | undefined, ignore: string[] | undefined): FilterPair {
  if (include === undefined && ignore === undefined) return null;
  return { include: compileList(include), ignore: compileList(ignore) };
}

function compileList(patterns: string[] | undefined): ListCheck {
  if (patterns === undefined || patterns.length === 0) return null;
  try {
    return compileFilterPatterns(patterns);
  } catch {
    // Forgejo skips a filter whose patterns fail to compile, so it never passes.
    return 'invalid';
  }
}

function kindOfRef(ref: string): RefKind {
  if (ref.startsWith('refs/heads/')) return 'branch';
  if (ref.startsWith('refs/tags/')) return 'tag';
  return 'other';
}

function shortName(ref: string): string {
  return ref.replace(/^refs\/(?:heads|tags)\//u, '');
}
