// sourcehut builds job submissions, as Forgejo's
// services/webhook/sourcehut/builds.go sends them: for a push (and a created
// branch or tag) the build manifest is read from the repository at that
// commit, adjusted — the repository source pinned to the commit, and
// BUILD_SUBMITTER, BUILD_SUBMITTER_URL and GIT_REF set in its environment —
// and submitted with builds.sr.ht's GraphQL `submit` mutation, POSTed to the
// hook URL with the hook's Authorization header (the OAuth token, "Bearer …").
// No X-Forgejo-* headers. Other events are not carried.
//
// Departures: Forgejo sends a payload holding only an `error` when the
// manifest cannot be read or parsed, which builds.sr.ht refuses; here nothing
// is sent and the delivery records why. For a created ref Forgejo tags the
// job `/<name>` and sets GIT_REF to the short name; here the ref type is
// known, so the tag is `branch/<name>` or `tag/<name>` and GIT_REF the full ref.
import { parse, stringify } from 'yaml';
import { emptyPush, notCarried, skip } from './converter.ts';
import type { ConvertInput, Converter } from './converter.ts';
import { jsonBody, obj, pushView, refView, shortRefName, str } from './text.ts';
import type { RepoView } from './text.ts';

const TYPE = 'sourcehut_builds';

// builds.sr.ht's GraphQL API (man.sr.ht/builds.sr.ht/graphql.md): submit a job and get its id.
const SUBMIT_MUTATION = [
  'mutation ($manifest: String!, $tags: [String!], $note: String!, $secrets: Boolean!, $execute: Boolean!, $visibility: Visibility!) {',
  '  submit(manifest: $manifest, tags: $tags, note: $note, secrets: $secrets, execute: $execute, visibility: $visibility) {',
  '    id',
  '  }',
  '}',
].join('\n');

interface BuildEvent {
  repo: RepoView;
  commitId: string;
  /** The full ref, refs/heads/… or refs/tags/…. */
  ref: string;
  note: string;
}

/** The commit and ref a push or a created ref builds; null for the events this type does not carry. */
function buildEventOf(input: Pick<ConvertInput, 'eventType' | 'payload'>): BuildEvent | null {
  if (input.eventType === 'push') {
    const p = pushView(obj(input.payload));
    return { repo: p.repo, commitId: p.headCommit?.id ?? '', ref: p.ref, note: p.headCommit?.message ?? '' };
  }
  if (input.eventType === 'create') {
    const r = refView(obj(input.payload));
    const ref = r.ref.startsWith('refs/') ? r.ref : `${r.refType === 'tag' ? 'refs/tags/' : 'refs/heads/'}${r.ref}`;
    return { repo: r.repo, commitId: r.sha, ref, note: `${r.refType} ${r.refName} created` };
  }
  return null;
}

export interface ManifestLocation {
  ownerName: string;
  repoName: string;
  commitId: string;
  path: string;
}

/** Which file the converter needs for this event (the caller reads it), or null when it needs none. */
export function manifestLocationOf(
  input: Pick<ConvertInput, 'eventType' | 'payload' | 'meta'>,
): ManifestLocation | null {
  const event = buildEventOf(input);
  const path = str(input.meta.manifest_path);
  if (!event || event.commitId === '' || path === '' || event.repo.name === '') return null;
  return { ownerName: event.repo.ownerLogin, repoName: event.repo.name, commitId: event.commitId, path };
}

/** The server's ROOT_URL, read off the repository's web URL (…/<owner>/<repo>). */
function appUrlOf(repo: RepoView): string {
  return repo.fullName !== '' && repo.htmlUrl.endsWith(repo.fullName)
    ? repo.htmlUrl.slice(0, -repo.fullName.length)
    : '';
}

/**
 * Forgejo's adjustManifest: pins the repository's source to the commit (or
 * adds it: the SSH URL for a private repository when there is one), and sets
 * the submitter variables. The rest of the manifest is kept as written.
 */
export function adjustManifest(
  text: string,
  path: string,
  event: Pick<BuildEvent, 'repo' | 'commitId' | 'ref'>,
): { manifest: string } | { error: string } {
  const invalid = { error: `could not decode manifest "${path}"` };
  let doc: unknown;
  try {
    doc = parse(text);
  } catch {
    return invalid;
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return invalid;
  const { sources: rawSources, environment: rawEnvironment, ...rest } = doc as Record<string, unknown>;
  if (rawSources != null && !(Array.isArray(rawSources) && rawSources.every((s) => typeof s === 'string')))
    return invalid;
  if (rawEnvironment != null && (typeof rawEnvironment !== 'object' || Array.isArray(rawEnvironment))) return invalid;
  const { repo, commitId, ref } = event;
  const sources = [...((rawSources as string[] | null | undefined) ?? [])];
  const mine = sources.findIndex((s) => s !== '' && (s === repo.cloneUrl || s === repo.sshUrl));
  if (mine >= 0) sources[mine] = `${sources[mine] as string}#${commitId}`;
  else sources.push(`${repo.private && repo.sshUrl ? repo.sshUrl : repo.cloneUrl}#${commitId}`);
  const environment = {
    ...(rawEnvironment as Record<string, unknown> | null | undefined),
    BUILD_SUBMITTER: 'forgejo',
    BUILD_SUBMITTER_URL: appUrlOf(repo),
    GIT_REF: ref,
  };
  return { manifest: stringify({ sources, environment, ...rest }) };
}

export const sourcehutBuilds: Converter = (input) => {
  const event = buildEventOf(input);
  if (!event) return notCarried(TYPE, input.eventType);
  if (input.eventType === 'push' && pushView(obj(input.payload)).commits.length === 0) return emptyPush(TYPE);
  const path = str(input.meta.manifest_path);
  if (path === '')
    return skip(`${TYPE} hooks need a manifest path (manifest_path in the hook's settings), and this hook has none`);
  const where = `${event.repo.fullName}:${event.ref}`;
  const read = input.manifest;
  if (!read) return skip(`${where} could not open manifest "${path}"`);
  if ('error' in read) return skip(`${where} ${read.error}`);
  const adjusted = adjustManifest(read.text, path, event);
  if ('error' in adjusted) return skip(`${where} ${adjusted.error}`);
  const refType = event.ref.startsWith('refs/tags/') ? 'tag' : 'branch';
  const variables = {
    manifest: adjusted.manifest,
    tags: [event.repo.fullName, `${refType}/${shortRefName(event.ref)}`, path],
    note: event.note,
    secrets: input.meta.secrets === true,
    execute: true,
    visibility: str(input.meta.visibility) || 'PRIVATE',
  };
  return {
    kind: 'request',
    request: {
      method: 'POST',
      url: input.url,
      headers: { 'content-type': 'application/json' },
      body: jsonBody({ query: SUBMIT_MUTATION, variables }),
      forgejoHeaders: false,
    },
  };
};
