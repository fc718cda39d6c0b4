// Slack incoming-webhook messages, as Forgejo's services/webhook/slack.go
// builds them: `text` in Slack's mrkdwn with `<url|text>` links, names in
// inline code (so nobody gets pinged by their own push), the channel,
// username and icon from the hook's settings, and for a push one attachment
// listing the commits. User text has `&`, `<`, `>` escaped, the only
// characters Slack's formatting reserves.
import { chatConverter } from './converter.ts';
import type { Converter, EventRenderers } from './converter.ts';
import { actionText, firstLine, jsonBody, newCommits, refUrl, shortRefName, str, workflowText } from './text.ts';
import type { Formatter, Json } from './text.ts';

/** Slack's escaping of message text (api.slack.com/docs/formatting). */
export function slackEscape(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

/** A name in inline code; a backquote in it becomes a quote so it cannot close the code span. */
export function slackName(name: string): string {
  return `\`${slackEscape(name.replaceAll('`', "'"))}\``;
}

/** `<url|text>`; a missing URL (a field absent from the payload) gives the bare text. */
export function slackLink(url: string, text: string): string {
  return url === '' ? slackEscape(text) : `<${url}|${slackEscape(text)}>`;
}

const slackFormatter: Formatter = { link: slackLink, text: slackEscape };

interface SlackAttachment {
  fallback: string;
  color: string;
  title: string;
  title_link: string;
  text: string;
}

function renderers(meta: Json): EventRenderers {
  const message = (text: string, attachments: SlackAttachment[] | null = null) => ({
    channel: str(meta.channel),
    text,
    username: str(meta.username),
    icon_url: str(meta.icon_url),
    unfurl_links: 0,
    link_names: 0,
    // Go marshals a nil slice as null: messages without attachments carry `null`.
    attachments,
  });
  return {
    push(p) {
      const desc = newCommits(p.totalCommits);
      const commitString = p.compareUrl ? slackLink(p.compareUrl, desc) : desc;
      const branchLink = slackLink(refUrl(p.repo.htmlUrl, p.ref), shortRefName(p.ref));
      const text = `[${slackEscape(p.repo.fullName)}:${branchLink}] ${commitString} pushed by ${slackName(p.pusher.login)}`;
      const lines = p.commits.map(
        (c) =>
          `${slackLink(c.url, c.id.slice(0, 7))}: ${slackEscape(firstLine(c.message))} - ${slackName(c.authorName ?? '')}`,
      );
      return message(text, [
        {
          fallback: '',
          color: str(meta.color),
          title: p.repo.htmlUrl,
          title_link: p.repo.htmlUrl,
          text: lines.join('\n'),
        },
      ]);
    },
    create(r) {
      const refLink = slackLink(refUrl(r.repo.htmlUrl, r.ref, r.refType), r.refName);
      return message(
        `[${slackEscape(r.repo.fullName)}:${refLink}] ${slackEscape(r.refType)} created by ${slackName(r.sender.login)}`,
      );
    },
    delete(r) {
      return message(
        `[${slackLink(r.repo.htmlUrl, r.repo.fullName)}:${slackEscape(r.refName)}] ${slackEscape(r.refType)} deleted by ${slackName(r.sender.login)}`,
      );
    },
    repository(r) {
      return message(
        `[${slackLink(r.repo.htmlUrl, r.repo.fullName)}] Repository ${r.action} by ${slackName(r.sender.login)}`,
      );
    },
    action(a) {
      return message(actionText(a, slackFormatter).text);
    },
    // Gitea's slackConvertor.WorkflowRun / WorkflowJob: the sentence only.
    workflow(w) {
      return message(workflowText(w, slackFormatter, true).text);
    },
  };
}

export const slack: Converter = chatConverter('slack', (input) => renderers(input.meta), jsonBody);
