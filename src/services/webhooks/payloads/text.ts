// What every typed payload shares: reading the stored Forgejo payload
// defensively (a missing or mistyped field reads as '' / 0 / [] and never
// throws), Go's escaping functions the converters rely on, the colours, and
// the sentences Forgejo's services/webhook/general.go builds for more than one
// type (action runs) — plus Gitea's for workflow runs and jobs, which Forgejo
// does not have. The sentences take a Formatter so each type decides how a
// link and a piece of user text are written (Slack `<url|text>`, HTML,
// Markdown, or plain).

export type Json = Record<string, unknown>;

export function obj(value: unknown): Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {};
}

export function str(value: unknown): string {
  if (typeof value === 'string') return value;
  return typeof value === 'number' && Number.isFinite(value) ? String(value) : '';
}

export function num(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}

export function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** The text up to the first newline. */
export function firstLine(text: string): string {
  return text.split('\n', 1)[0] ?? '';
}

/** Go's strings.TrimRight(s, cutset). */
export function trimRight(text: string, cutset: string): string {
  let end = text.length;
  while (end > 0 && cutset.includes(text[end - 1] as string)) end -= 1;
  return text.slice(0, end);
}

/** At most `max` characters (code points); longer text keeps `max - suffix` of them and ends with `suffix`. */
export function truncateRunes(text: string, max: number, suffix: string): string {
  const runes = Array.from(text);
  return runes.length > max ? runes.slice(0, max - Array.from(suffix).length).join('') + suffix : text;
}

/** Go's html.EscapeString. */
export function escapeHtml(text: string): string {
  return text.replace(
    /[&'<>"]/g,
    (c) => ({ '&': '&amp;', "'": '&#39;', '<': '&lt;', '>': '&gt;', '"': '&#34;' })[c] as string,
  );
}

function percentEncode(c: string): string {
  return Array.from(Buffer.from(c, 'utf8'), (b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
}

/** Go's url.PathEscape: unreserved characters and `$&+:=@` stay. */
export function pathEscape(segment: string): string {
  return Array.from(segment, (c) => (/^[A-Za-z0-9\-_.~$&+:=@]$/.test(c) ? c : percentEncode(c))).join('');
}

/** Forgejo's util.PathEscapeSegments: each `/`-separated segment path-escaped. */
export function pathEscapeSegments(path: string): string {
  return path.split('/').map(pathEscape).join('/');
}

/** Go's url.QueryEscape: unreserved characters stay, space is `+`. */
export function queryEscape(text: string): string {
  return Array.from(text, (c) => (/^[A-Za-z0-9\-_.~]$/.test(c) ? c : c === ' ' ? '+' : percentEncode(c))).join('');
}

const REF_PREFIXES = ['refs/heads/', 'refs/tags/', 'refs/remotes/', 'refs/for/', 'refs/pull/'];

/** Forgejo's git.RefName.ShortName for the refs Gantry emits. */
export function shortRefName(ref: string): string {
  for (const prefix of REF_PREFIXES) if (ref.startsWith(prefix)) return ref.slice(prefix.length);
  return ref;
}

/**
 * Forgejo's git.RefURL. create/delete payloads carry the short name with a
 * `ref_type`; Forgejo guesses "branch" for any short name (so a new tag links
 * to /src/branch/…): here the ref_type decides.
 */
export function refUrl(repoUrl: string, ref: string, refType = ''): string {
  const name = pathEscapeSegments(shortRefName(ref));
  if (ref.startsWith('refs/tags/') || (refType === 'tag' && !ref.startsWith('refs/')))
    return `${repoUrl}/src/tag/${name}`;
  if (ref.startsWith('refs/heads/') || !/^[0-9a-f]{40}$/.test(ref)) return `${repoUrl}/src/branch/${name}`;
  return `${repoUrl}/src/commit/${name}`;
}

/** Forgejo's `cases.Title` of a lower-cased word: "branch" → "Branch". */
export function capitalise(word: string): string {
  return word
    .toLowerCase()
    .replace(/(^|[^\p{L}\p{N}'])(\p{L})/gu, (_m, before: string, letter: string) => before + letter.toUpperCase());
}

/** Forgejo's colours (services/webhook/discord.go), as integers. */
export const Colors = {
  green: 0x1ac600,
  greenLight: 0xbfe5bf,
  yellow: 0xffd930,
  grey: 0x4f545c,
  purple: 0x7289da,
  orange: 0xeb6420,
  orangeLight: 0xe68d60,
  red: 0xff3232,
} as const;

/** How a type writes a link and a piece of user-supplied text. */
export interface Formatter {
  link(url: string, text: string): string;
  text(value: string): string;
}

export const plainFormatter: Formatter = { link: (_url, text) => text, text: (value) => value };
/** Go's html link (htmlLinkFormatter); a missing URL (a field absent from the payload) gives the bare text. */
export const htmlFormatter: Formatter = {
  link: (url, text) => (url === '' ? escapeHtml(text) : `<a href="${escapeHtml(url)}">${escapeHtml(text)}</a>`),
  text: escapeHtml,
};
/** Markdown links, text as is (chat clients that render Markdown but whose users expect raw text). */
export const markdownLinkFormatter: Formatter = {
  link: (url, text) => (url === '' ? text : `[${text}](${url})`),
  text: (value) => value,
};

// --- Views: the fields the converters read, with safe defaults -------------

export interface UserView {
  login: string;
  fullName: string;
  htmlUrl: string;
  avatarUrl: string;
}

export interface RepoView {
  fullName: string;
  htmlUrl: string;
  name: string;
  ownerLogin: string;
  cloneUrl: string;
  sshUrl: string;
  private: boolean;
  objectFormat: string;
}

export function userView(value: unknown): UserView {
  const u = obj(value);
  return {
    login: str(u.login) || str(u.username),
    fullName: str(u.full_name),
    htmlUrl: str(u.html_url),
    avatarUrl: str(u.avatar_url),
  };
}

export function repoView(value: unknown): RepoView {
  const r = obj(value);
  return {
    fullName: str(r.full_name),
    htmlUrl: str(r.html_url),
    name: str(r.name),
    ownerLogin: str(obj(r.owner).login) || str(r.full_name).split('/')[0] || '',
    cloneUrl: str(r.clone_url),
    sshUrl: str(r.ssh_url),
    private: r.private === true,
    objectFormat: str(r.object_format_name),
  };
}

export interface CommitView {
  id: string;
  url: string;
  message: string;
  /** null when the commit has no author object (Forgejo then omits " - name"). */
  authorName: string | null;
  raw: Json;
}

export interface PushView {
  ref: string;
  branch: string;
  compareUrl: string;
  totalCommits: number;
  commits: CommitView[];
  headCommit: CommitView | null;
  repo: RepoView;
  pusher: UserView;
  sender: UserView;
}

function commitView(value: unknown): CommitView {
  const c = obj(value);
  const author = c.author;
  return {
    id: str(c.id),
    url: str(c.url),
    message: str(c.message),
    authorName: author !== null && typeof author === 'object' ? str(obj(author).name) : null,
    raw: c,
  };
}

export function pushView(p: Json): PushView {
  const commits = list(p.commits).map(commitView);
  const head = p.head_commit !== null && typeof p.head_commit === 'object' ? commitView(p.head_commit) : null;
  return {
    ref: str(p.ref),
    branch: shortRefName(str(p.ref)),
    compareUrl: str(p.compare_url),
    totalCommits: typeof p.total_commits === 'number' ? p.total_commits : commits.length,
    commits,
    headCommit: head,
    repo: repoView(p.repository),
    pusher: userView(p.pusher ?? p.sender),
    sender: userView(p.sender ?? p.pusher),
  };
}

/** A create or delete event: `ref` is the short name, `ref_type` branch or tag. */
export interface RefView {
  ref: string;
  refName: string;
  refType: string;
  sha: string;
  repo: RepoView;
  sender: UserView;
}

export function refView(p: Json): RefView {
  const ref = str(p.ref);
  return {
    ref,
    refName: shortRefName(ref),
    refType: str(p.ref_type) || 'branch',
    sha: str(p.sha),
    repo: repoView(p.repository),
    sender: userView(p.sender),
  };
}

export interface RepositoryEventView {
  action: string;
  repo: RepoView;
  sender: UserView;
}

export function repositoryEventView(p: Json): RepositoryEventView {
  return { action: str(p.action), repo: repoView(p.repository), sender: userView(p.sender) };
}

/** Forgejo's ActionPayload (action_run_success / _failure / _recover). */
export interface ActionView {
  action: 'success' | 'failure' | 'recover';
  runId: number;
  title: string;
  runUrl: string;
  prettyRef: string;
  repo: RepoView;
  triggerUser: UserView | null;
}

export function actionView(eventType: string, p: Json): ActionView {
  const run = obj(p.run);
  const stated = str(p.action);
  const fromEvent = eventType.replace(/^action_run_/, '');
  const action = (
    ['success', 'failure', 'recover'].includes(stated)
      ? stated
      : ['success', 'failure', 'recover'].includes(fromEvent)
        ? fromEvent
        : 'success'
  ) as ActionView['action'];
  const trigger = run.trigger_user;
  return {
    action,
    runId: num(run.id),
    title: str(run.title),
    runUrl: str(run.html_url),
    prettyRef: str(run.prettyref),
    repo: repoView(run.repository),
    triggerUser: trigger !== null && typeof trigger === 'object' ? userView(trigger) : null,
  };
}

/** Forgejo's getActionPayloadInfo (services/webhook/general.go). */
export function actionText(a: ActionView, f: Formatter): { text: string; color: number } {
  const runLink = f.link(a.runUrl, a.title);
  const repoLink = f.link(a.repo.htmlUrl, a.repo.fullName);
  const verb = a.action === 'failure' ? 'Failed' : a.action === 'recover' ? 'Recovered' : 'Succeeded';
  return {
    text: `${runLink} Action ${verb} in ${repoLink} ${f.text(a.prettyRef)}`,
    color: a.action === 'failure' ? Colors.red : Colors.green,
  };
}

/** Gitea's WorkflowRunPayload / WorkflowJobPayload, reduced to what a message shows. */
export interface WorkflowView {
  kind: 'run' | 'job';
  action: string;
  id: number;
  /** display_title of a run, name of a job. */
  title: string;
  htmlUrl: string;
  headSha: string;
  headBranch: string;
  status: string;
  conclusion: string;
  /** run_number of a run, run_id of a job. */
  runNumber: number;
  repo: RepoView;
  sender: UserView | null;
}

export function workflowView(eventType: 'workflow_run' | 'workflow_job', p: Json): WorkflowView {
  const w = obj(eventType === 'workflow_run' ? p.workflow_run : p.workflow_job);
  const sender = p.sender;
  return {
    kind: eventType === 'workflow_run' ? 'run' : 'job',
    action: str(p.action),
    id: num(w.id),
    title: eventType === 'workflow_run' ? str(w.display_title) || str(obj(p.workflow).name) : str(w.name),
    htmlUrl: str(w.html_url),
    headSha: str(w.head_sha),
    headBranch: str(w.head_branch),
    status: str(w.status),
    conclusion: str(w.conclusion),
    runNumber: eventType === 'workflow_run' ? num(w.run_number) : num(w.run_id),
    repo: repoView(p.repository),
    sender: sender !== null && typeof sender === 'object' ? userView(sender) : null,
  };
}

/** The conclusion of a finished run or job, else its status. */
export function workflowState(w: WorkflowView): string {
  return w.conclusion || w.status;
}

/**
 * Gitea's getWorkflowRunPayloadInfo / getWorkflowJobPayloadInfo
 * (services/webhook/general.go, 1.24/1.25): "Workflow Run completed:
 * Build(#7)[1a2b3c4d5e]:success by alice".
 */
export function workflowText(w: WorkflowView, f: Formatter, withSender: boolean): { text: string; color: number } {
  const state = workflowState(w);
  const label = `${w.title}(#${w.kind === 'run' ? w.id : w.runNumber})[${w.headSha.slice(0, 10)}]:${state}`;
  let text = `Workflow ${w.kind === 'run' ? 'Run' : 'Job'} ${f.text(w.action)}: ${f.link(w.htmlUrl, label)}`;
  if (withSender && w.sender) text += ` by ${f.link(w.sender.htmlUrl, w.sender.login)}`;
  const colors: Record<string, number> = {
    waiting: Colors.orange,
    queued: Colors.orangeLight,
    success: Colors.green,
    failure: Colors.red,
    cancelled: Colors.yellow,
    skipped: Colors.purple,
  };
  return { text, color: colors[state] ?? Colors.grey };
}

/** Forgejo's bodies are indented JSON (json.MarshalIndent with two spaces). */
export function jsonBody(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

/** "1 new commit" / "3 new commits". */
export function newCommits(total: number): string {
  return total === 1 ? '1 new commit' : `${total} new commits`;
}

/**
 * Where a push's title links: the commit for one commit, else the compare
 * page, else the branch (Forgejo's discord/dingtalk/msteams Push).
 */
export function pushLink(p: PushView): string {
  const link = p.totalCommits === 1 ? (p.commits[0]?.url ?? '') : p.compareUrl;
  return link || `${p.repo.htmlUrl}/src/${pathEscapeSegments(p.branch)}`;
}
