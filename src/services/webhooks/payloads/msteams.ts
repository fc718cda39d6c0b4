// Microsoft Teams messages, as Forgejo's services/webhook/msteams.go builds
// them since it moved to Adaptive Cards (1.5, for Teams workflows): a header
// naming the repository, a heading with the action and who did it, optional
// sections (the commits of a push, a status badge for a run), and one
// "View in Forgejo" button. Optional card properties are left out when empty
// (Go's omitempty), which Teams requires for some of them.
//
// Workflow runs and jobs (Gitea's events; Forgejo's card has no rendering)
// get the card of an action run: Gitea's sentence as the heading and a badge
// with the run's state.
import { chatConverter } from './converter.ts';
import type { Converter, EventRenderers } from './converter.ts';
import {
  capitalise,
  jsonBody,
  markdownLinkFormatter,
  pathEscapeSegments,
  plainFormatter,
  pushLink,
  trimRight,
  workflowState,
  workflowText,
} from './text.ts';
import type { RepoView, UserView } from './text.ts';

type Style = 'default' | 'emphasis' | 'accent' | 'good' | 'attention' | 'warning';
type Element = Record<string, unknown>;

const markdownLink = markdownLinkFormatter.link;
/** Commits shown before the "and N more" toggle. */
const SHOWN_COMMITS = 5;

function textBlock(text: string, extra: Element = {}): Element {
  return { type: 'TextBlock', text, ...extra };
}

/** Forgejo's makeBadgeRow: a badge, then lines of small subtle text. */
function badgeRow(text: string, icon: string, style: Style, ...details: string[]): Element {
  return {
    type: 'Container',
    items: [
      {
        type: 'ColumnSet',
        columns: [
          { type: 'Column', items: [{ type: 'Badge', text, icon, size: 'Large', style }], width: 'auto' },
          {
            type: 'Column',
            items: details.map((d) => textBlock(d, { size: 'Small', isSubtle: true, wrap: true, spacing: 'None' })),
            width: 'stretch',
          },
        ],
      },
    ],
    verticalContentAlignment: 'Center',
  };
}

/** Forgejo's createMSTeamsPayload. */
function card(
  repo: RepoView | null,
  sender: UserView | null,
  title: string,
  sections: Element[],
  target: string,
  style: Style,
): Element {
  const repoPart = repo && repo.fullName ? ` | ${markdownLink(repo.htmlUrl, repo.fullName)}` : '';
  let heading = title;
  if (sender && sender.login) {
    const who = sender.fullName ? `${sender.fullName} (@${sender.login})` : `@${sender.login}`;
    heading = `${title} by ${markdownLink(sender.htmlUrl, who)}`;
  }
  const button: Element = { type: 'Action.OpenUrl', title: 'View in Forgejo' };
  if (target) button.url = target;
  return {
    type: 'AdaptiveCard',
    $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
    version: '1.5',
    msteams: { width: 'Full' },
    body: [
      {
        type: 'Container',
        items: [textBlock(`💬 Update${repoPart}`, { size: 'Small', weight: 'Bolder', isSubtle: true })],
      },
      { type: 'Container', items: [textBlock(heading, { style: 'heading' })], style },
      ...sections,
    ],
    actions: [button],
    style: 'default',
  };
}

function commitRow(id: string, url: string, message: string): Element {
  return {
    type: 'ColumnSet',
    columns: [
      {
        type: 'Column',
        items: [textBlock(markdownLink(url, id.slice(0, 8)), { size: 'Small', fontType: 'Monospace' })],
        width: 'auto',
      },
      {
        type: 'Column',
        items: [textBlock(trimRight(message, '\r\n'), { size: 'Small', maxLines: 3 })],
        width: 'stretch',
      },
    ],
  };
}

/** The "and N more commits" expander and its collapse twin (Action.ToggleVisibility). */
function toggle(id: string, label: string, chevron: string, visible: boolean): Element {
  const out: Element = {
    type: 'Container',
    items: [
      {
        type: 'ColumnSet',
        columns: [
          { type: 'Column', items: [textBlock(label, { size: 'Small' })], width: 'auto' },
          { type: 'Column', items: [{ type: 'Icon', name: chevron, size: 'xxSmall' }], width: 'auto' },
        ],
        selectAction: { type: 'Action.ToggleVisibility', targetElements: ['showMore', 'showLess', 'hiddenCommits'] },
      },
    ],
    id,
  };
  if (!visible) out.isVisible = false;
  return out;
}

const renderers: EventRenderers = {
  push(p) {
    const title = p.totalCommits === 1 ? `[${p.branch}] 1 new commit` : `[${p.branch}] ${p.totalCommits} new commits`;
    const rows = p.commits.map((c) => commitRow(c.id, c.url, c.message));
    const items: Element[] = rows.slice(0, SHOWN_COMMITS);
    const hidden = rows.slice(SHOWN_COMMITS);
    if (hidden.length > 0) {
      const more = hidden.length === 1 ? '*and 1 more commit*' : `*and ${hidden.length} more commits*`;
      items.push(
        toggle('showMore', more, 'ChevronDown', true),
        { type: 'Container', items: hidden, id: 'hiddenCommits', isVisible: false },
        toggle('showLess', 'Collapse', 'ChevronUp', false),
      );
    }
    return card(
      p.repo,
      p.sender,
      title,
      [{ type: 'Container', items, showBorder: true, style: 'emphasis' }],
      pushLink(p),
      'default',
    );
  },
  create(r) {
    return card(
      r.repo,
      r.sender,
      `${capitalise(r.refType)} created: ${r.refName}`,
      [],
      `${r.repo.htmlUrl}/src/${pathEscapeSegments(r.refName)}`,
      'good',
    );
  },
  delete(r) {
    return card(r.repo, r.sender, `${capitalise(r.refType)} deleted: ${r.refName}`, [], r.repo.htmlUrl, 'attention');
  },
  repository(r) {
    const created = r.action === 'created';
    return card(
      r.repo,
      r.sender,
      `Repository ${r.action}: ${r.repo.fullName}`,
      [],
      created ? r.repo.htmlUrl : '',
      created ? 'good' : 'attention',
    );
  },
  action(a) {
    // "succeded" (sic): Forgejo's wording, kept so receivers matching on it keep working.
    const [title, state, style]: [string, string, Style] =
      a.action === 'failure'
        ? [`Action run #${a.runId} failed: ${a.title}`, 'Failed', 'attention']
        : a.action === 'recover'
          ? [`Action run #${a.runId} recovered: ${a.title}`, 'Success', 'good']
          : [`Action run #${a.runId} succeded: ${a.title}`, 'Success', 'good'];
    const badge = badgeRow(state, 'PlayCircle', style, `On ${a.prettyRef}`, `${a.repo.fullName} Run #${a.runId}`);
    return card(a.repo, a.triggerUser, title, [badge], a.runUrl, 'default');
  },
  workflow(w) {
    const state = workflowState(w);
    const style: Style =
      state === 'success' ? 'good' : state === 'failure' ? 'attention' : state === 'cancelled' ? 'warning' : 'default';
    const where = w.kind === 'run' ? `${w.repo.fullName} Run #${w.runNumber}` : `${w.repo.fullName} Job ${w.title}`;
    const badge = badgeRow(capitalise(state.replaceAll('_', ' ')), 'PlayCircle', style, `On ${w.headBranch}`, where);
    return card(w.repo, w.sender, workflowText(w, plainFormatter, false).text, [badge], w.htmlUrl, 'default');
  },
};

export const msteams: Converter = chatConverter('msteams', () => renderers, jsonBody);
