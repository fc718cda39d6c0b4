// DingTalk robot messages, as Forgejo's services/webhook/dingtalk.go builds
// them: an action card (title, Markdown text, one button) whose button opens
// the link in the system browser through DingTalk's dingtalk:// URL — inside
// the client, pages that need a login are hard to reach. A deleted
// repository is a plain text message (there is nothing left to link to).
// Forgejo always sends both the `text` and the `actionCard` objects; the
// unused one is empty.
import { chatConverter } from './converter.ts';
import type { Converter, EventRenderers } from './converter.ts';
import {
  actionText,
  jsonBody,
  newCommits,
  pathEscapeSegments,
  plainFormatter,
  pushLink,
  queryEscape,
  trimRight,
  workflowText,
} from './text.ts';

const EMPTY_CARD = { text: '', title: '', hideAvatar: '', singleTitle: '', singleURL: '' };

function actionCard(title: string, text: string, singleTitle: string, singleUrl: string) {
  return {
    msgtype: 'actionCard',
    text: { content: '' },
    actionCard: {
      text: text.trim(),
      title: title.trim(),
      hideAvatar: '0',
      singleTitle,
      singleURL: `dingtalk://dingtalkclient/page/link?pc_slide=false&url=${queryEscape(singleUrl)}`,
    },
  };
}

const renderers: EventRenderers = {
  push(p) {
    const title = `[${p.repo.fullName}:${p.branch}] ${newCommits(p.totalCommits)}`;
    const lines = p.commits.map(
      (c) =>
        `[${c.id.slice(0, 7)}](${c.url}) ${trimRight(c.message, '\r\n')}${c.authorName !== null ? ` - ${c.authorName}` : ''}`,
    );
    return actionCard(title, lines.join('\r\n'), p.totalCommits === 1 ? 'view commit' : 'view commits', pushLink(p));
  },
  create(r) {
    const title = `[${r.repo.fullName}] ${r.refType} ${r.refName} created`;
    return actionCard(title, title, `view ref ${r.refName}`, `${r.repo.htmlUrl}/src/${pathEscapeSegments(r.refName)}`);
  },
  delete(r) {
    const title = `[${r.repo.fullName}] ${r.refType} ${r.refName} deleted`;
    return actionCard(title, title, `view ref ${r.refName}`, `${r.repo.htmlUrl}/src/${pathEscapeSegments(r.refName)}`);
  },
  repository(r) {
    const title = `[${r.repo.fullName}] Repository ${r.action}`;
    if (r.action === 'created') return actionCard(title, title, 'view repository', r.repo.htmlUrl);
    return { msgtype: 'text', text: { content: title }, actionCard: EMPTY_CARD };
  },
  action(a) {
    const { text } = actionText(a, plainFormatter);
    return actionCard(text, text, 'view action', a.runUrl);
  },
  // Gitea's dingtalkConvertor.WorkflowRun / WorkflowJob.
  workflow(w) {
    const { text } = workflowText(w, plainFormatter, true);
    return actionCard(text, text, w.kind === 'run' ? 'Workflow Run' : 'Workflow Job', w.htmlUrl);
  },
};

export const dingtalk: Converter = chatConverter('dingtalk', () => renderers, jsonBody);
