// Telegram Bot API sendMessage bodies, as Forgejo's services/webhook/telegram.go
// builds them: HTML parse mode, link previews off, POSTed to the hook URL
// (Forgejo's form builds it as https://api.telegram.org/bot<token>/sendMessage
// ?chat_id=…&message_thread_id=…). Forgejo runs the finished message through
// its HTML sanitizer; here every piece of user text (commit messages, names,
// titles) is HTML-escaped where it is inserted, so the only markup in the
// message is the <a href> links this file writes — what Telegram's HTML mode
// accepts.
import { chatConverter } from './converter.ts';
import type { Converter, EventRenderers } from './converter.ts';
import {
  actionText,
  escapeHtml,
  htmlFormatter,
  jsonBody,
  newCommits,
  pathEscapeSegments,
  str,
  trimRight,
  workflowText,
} from './text.ts';
import type { ConvertInput } from './converter.ts';

const link = htmlFormatter.link;

function hasQueryParam(url: string, name: string): boolean {
  try {
    return new URL(url).searchParams.has(name);
  } catch {
    return false;
  }
}

function renderers(input: ConvertInput): EventRenderers {
  // The chat normally rides in the URL; a hook whose settings name a chat its URL lacks gets it in the body (sendMessage reads both).
  const chatId = str(input.meta.chat_id);
  const threadId = str(input.meta.thread_id);
  const message = (text: string) => {
    const out: Record<string, unknown> = { text: text.trim(), parse_mode: 'HTML', disable_web_page_preview: true };
    if (chatId !== '' && !hasQueryParam(input.url, 'chat_id')) {
      out.chat_id = chatId;
      if (threadId !== '') out.message_thread_id = threadId;
    }
    return out;
  };
  return {
    push(p) {
      const title = `[${escapeHtml(p.repo.fullName)}:${escapeHtml(p.branch)}] ${newCommits(p.totalCommits)}`;
      const lines = p.commits.map((c) => {
        const author = c.authorName !== null ? ` - ${escapeHtml(c.authorName)}` : '';
        return `[${link(c.url, c.id.slice(0, 7))}] ${escapeHtml(trimRight(c.message, '\r\n'))}${author}`;
      });
      return message(`${title}\n${lines.join('\n')}`);
    },
    create(r) {
      return message(
        `[${escapeHtml(r.repo.fullName)}] ${escapeHtml(r.refType)} ${link(`${r.repo.htmlUrl}/src/${pathEscapeSegments(r.refName)}`, r.refName)} created`,
      );
    },
    delete(r) {
      return message(
        `[${escapeHtml(r.repo.fullName)}] ${escapeHtml(r.refType)} ${link(`${r.repo.htmlUrl}/src/${pathEscapeSegments(r.refName)}`, r.refName)} deleted`,
      );
    },
    repository(r) {
      if (r.action === 'created') return message(`[${link(r.repo.htmlUrl, r.repo.fullName)}] Repository created`);
      return message(`[${escapeHtml(r.repo.fullName)}] Repository deleted`);
    },
    action(a) {
      return message(actionText(a, htmlFormatter).text);
    },
    // Gitea's telegramConvertor.WorkflowRun / WorkflowJob.
    workflow(w) {
      return message(workflowText(w, htmlFormatter, true).text);
    },
  };
}

export const telegram: Converter = chatConverter('telegram', renderers, jsonBody);
