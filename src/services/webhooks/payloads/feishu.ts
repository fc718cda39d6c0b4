// Feishu (Lark) custom-bot text messages, as Forgejo's
// services/webhook/feishu.go builds them: `{msg_type: "text", content: {text}}`,
// the text trimmed.
import { chatConverter } from './converter.ts';
import type { Converter, EventRenderers } from './converter.ts';
import { actionText, jsonBody, plainFormatter, trimRight, workflowText } from './text.ts';

function textMessage(text: string) {
  return { msg_type: 'text', content: { text: text.trim() } };
}

const renderers: EventRenderers = {
  push(p) {
    // Forgejo (and Gitea) leave the commit count out of this title: its variable is never filled. Kept as sent.
    const lines = p.commits.map(
      (c) =>
        `[${c.id.slice(0, 7)}](${c.url}) ${trimRight(c.message, '\r\n')}${c.authorName !== null ? ` - ${c.authorName}` : ''}`,
    );
    return textMessage(`[${p.repo.fullName}:${p.branch}] \r\n${lines.join('\r\n')}`);
  },
  create(r) {
    return textMessage(`[${r.repo.fullName}] ${r.refType} ${r.refName} created`);
  },
  delete(r) {
    return textMessage(`[${r.repo.fullName}] ${r.refType} ${r.refName} deleted`);
  },
  repository(r) {
    return textMessage(`[${r.repo.fullName}] Repository ${r.action}`);
  },
  action(a) {
    return textMessage(actionText(a, plainFormatter).text);
  },
  // Gitea's feishuConvertor.WorkflowRun / WorkflowJob.
  workflow(w) {
    return textMessage(workflowText(w, plainFormatter, true).text);
  },
};

export const feishu: Converter = chatConverter('feishu', () => renderers, jsonBody);
