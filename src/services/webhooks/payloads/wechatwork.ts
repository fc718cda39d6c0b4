// WeCom (WeChat Work) group-robot messages, as Forgejo's
// services/webhook/wechatwork.go builds them: Markdown messages using WeCom's
// <font color="info|warning|comment"> extension. Forgejo always sends both the
// `text` and the `markdown` objects; the text one stays empty.
import { chatConverter } from './converter.ts';
import type { Converter, EventRenderers } from './converter.ts';
import { actionText, jsonBody, plainFormatter, workflowText } from './text.ts';

function markdown(content: string) {
  return {
    msgtype: 'markdown',
    text: { content: '', mentioned_list: null, mentioned_mobile_list: null },
    markdown: { content },
  };
}

const renderers: EventRenderers = {
  push(p) {
    // Forgejo's title has an empty slot where the commit count was meant to go (its variable is never filled). Kept as sent.
    const title = `# ${p.repo.fullName}:${p.branch} <font color="warning">    </font>`;
    const lines = p.commits.map((c) => {
      const author = c.authorName !== null ? `Author: ${c.authorName}` : '';
      return ` > [${c.id.slice(0, 7)}](${c.url}) \r\n ><font color="info">${c.message.replaceAll('\n\n', '\r\n')}</font> \n ><font color="warning">${author}</font>`;
    });
    return markdown(`${title}\r\n\r\n${lines.join('\n')}`);
  },
  create(r) {
    return markdown(`[${r.repo.fullName}] ${r.refType} ${r.refName} created`);
  },
  delete(r) {
    return markdown(`[${r.repo.fullName}] ${r.refType} ${r.refName} deleted`);
  },
  repository(r) {
    return markdown(`[${r.repo.fullName}] Repository ${r.action}`);
  },
  action(a) {
    return markdown(actionText(a, plainFormatter).text);
  },
  // Gitea's wechatworkConvertor.WorkflowRun / WorkflowJob.
  workflow(w) {
    return markdown(workflowText(w, plainFormatter, true).text);
  },
};

export const wechatwork: Converter = chatConverter('wechatwork', () => renderers, jsonBody);
