// Discord webhook messages, as Forgejo's services/webhook/discord.go builds
// them: one embed (title, description, link, colour, author = the sender),
// the username and avatar from the hook's settings, Discord's length limits
// applied. Commit summaries are Markdown-escaped so a message cannot format
// or link the embed.
import { chatConverter } from './converter.ts';
import type { Converter, EventRenderers } from './converter.ts';
import {
  actionText,
  Colors,
  firstLine,
  jsonBody,
  newCommits,
  pathEscapeSegments,
  plainFormatter,
  pushLink,
  str,
  trimRight,
  truncateRunes,
  workflowText,
} from './text.ts';
import type { Json, UserView } from './text.ts';

// Forgejo truncates the description at 2000 characters: Discord's real limit
// depends on the characters (4096 ASCII, fewer emoji).
const DESCRIPTION_LIMIT = 2000;

const MARKDOWN_PAIRS: ReadonlyArray<[string, RegExp]> = [
  ['~', /~(.*?)~/g],
  ['*', /\*(.*?)\*/g],
  ['_', /_(.*?)_/g],
];

// Forgejo's markdownToEscape replacer, same order: at each position the first that matches wins.
const MARKDOWN_TOKENS = /\* |`|\[|\]|\(|\)|#|\+ |- |---|!|\||<|>/g;

/** Forgejo's escapeMarkdown (discord.go): ordered lists, paired ~ * _, then link, code, heading and list characters. */
export function escapeMarkdown(input: string): string {
  let out = input.replace(/(\d+)\./g, '$1\\.');
  for (const [char, pattern] of MARKDOWN_PAIRS) out = out.replace(pattern, `\\${char}$1\\${char}`);
  return out.replace(MARKDOWN_TOKENS, (token) => `\\${token}`);
}

/** Forgejo's base.TruncateString: at the limit, keep limit-1 characters and an ellipsis. */
function truncateDescription(text: string): string {
  const runes = Array.from(text);
  return runes.length < DESCRIPTION_LIMIT ? text : runes.slice(0, DESCRIPTION_LIMIT - 1).join('') + '…';
}

function renderers(meta: Json): EventRenderers {
  const message = (author: UserView | null, title: string, text: string, url: string, color: number) => {
    const out: Record<string, unknown> = { username: str(meta.username) };
    // avatar_url is omitempty in Forgejo's DiscordPayload.
    if (str(meta.icon_url) !== '') out.avatar_url = str(meta.icon_url);
    out.embeds = [
      {
        title: truncateRunes(title, 256, '...'),
        description: truncateDescription(truncateRunes(text, 4096, '...')),
        url,
        color,
        footer: {},
        author: { name: author?.login ?? '', url: author?.htmlUrl ?? '', icon_url: author?.avatarUrl ?? '' },
      },
    ];
    return out;
  };
  return {
    push(p) {
      const title = `[${p.repo.fullName}:${p.branch}] ${newCommits(p.totalCommits)}`;
      const lines = p.commits.map((c) => {
        // Forgejo means to keep the summary line (its SplitN(…, 1) keeps the whole message; the first line is what it intends).
        let summary = escapeMarkdown(trimRight(firstLine(c.message), '\r'));
        // 50, as GitHub does.
        if (Array.from(summary).length > 50) summary = `${Array.from(summary).slice(0, 47).join('')}...`;
        return `[\`${c.id.slice(0, 7)}\`](${c.url}) ${summary} \\- ${escapeMarkdown(c.authorName ?? '')}`;
      });
      return message(p.sender, title, lines.join('\n'), pushLink(p), Colors.green);
    },
    create(r) {
      return message(
        r.sender,
        `[${r.repo.fullName}] ${r.refType} ${r.refName} created`,
        '',
        `${r.repo.htmlUrl}/src/${pathEscapeSegments(r.refName)}`,
        Colors.green,
      );
    },
    delete(r) {
      return message(
        r.sender,
        `[${r.repo.fullName}] ${r.refType} ${r.refName} deleted`,
        '',
        `${r.repo.htmlUrl}/src/${pathEscapeSegments(r.refName)}`,
        Colors.red,
      );
    },
    repository(r) {
      const created = r.action === 'created';
      return message(
        r.sender,
        `[${r.repo.fullName}] Repository ${r.action}`,
        '',
        created ? r.repo.htmlUrl : '',
        created ? Colors.green : Colors.red,
      );
    },
    action(a) {
      const { text, color } = actionText(a, plainFormatter);
      return message(a.triggerUser, text, '', a.runUrl, color);
    },
    // Gitea's discordConvertor.WorkflowRun / WorkflowJob.
    workflow(w) {
      const { text, color } = workflowText(w, plainFormatter, false);
      return message(w.sender, text, '', w.htmlUrl, color);
    },
  };
}

export const discord: Converter = chatConverter('discord', (input) => renderers(input.meta), jsonBody);
