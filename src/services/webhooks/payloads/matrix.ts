// Matrix room messages, as Forgejo's services/webhook/matrix.go sends them:
// PUT <hook URL>/<transaction id> — the hook URL is the client-server API's
// /_matrix/client/v3/rooms/<room>/send/m.room.message — with the access token
// as the hook's Authorization header ("Bearer …", which Forgejo's form stores
// there). The event has an HTML `formatted_body` and a plain `body`, the
// msgtype from the hook's settings (1 m.notice, 2 m.text), and for a push the
// commits under `io.gitea.commits`. Forgejo adds none of its X-Forgejo-*
// headers to this request.
//
// Two departures: Forgejo puts commit messages and names into the HTML
// unescaped (and derives `body` from that HTML, entities and all); here the
// HTML escapes all user text and `body` is written from the raw text. The
// transaction id is the delivery id, not Forgejo's hash of the payload: a
// retry of one delivery reuses it, so the homeserver shows the message once,
// while an explicit redelivery (a new delivery id) posts again, as asked.
import { chatConverter } from './converter.ts';
import type { Converter, ConvertInput, EventRenderers } from './converter.ts';
import {
  actionText,
  htmlFormatter,
  jsonBody,
  markdownLinkFormatter,
  num,
  refUrl,
  trimRight,
  workflowText,
} from './text.ts';
import type { Formatter, PushView } from './text.ts';

const MESSAGE_TYPES: Readonly<Record<number, string>> = { 1: 'm.notice', 2: 'm.text' };

/** The message in one of its two forms: HTML (formatted_body) or plain (body). */
interface Form {
  f: Formatter;
  br: string;
}

const HTML: Form = { f: htmlFormatter, br: '<br>' };
const PLAIN: Form = { f: markdownLinkFormatter, br: '\n' };

function pushText(p: PushView, { f, br }: Form): string {
  const count = p.totalCommits === 1 ? '1 commit' : `${p.totalCommits} commits`;
  // The message without git's trailing newline, which would put the author on a line of its own.
  const lines = p.commits.map(
    (c) =>
      `${f.link(c.url, c.id.slice(0, 7))}: ${f.text(trimRight(c.message, '\r\n'))} - ${f.text(c.authorName ?? '')}`,
  );
  return `[${f.text(p.repo.fullName)}] ${f.text(p.pusher.login)} pushed ${count} to ${f.text(p.branch)}:${br}${lines.join(br)}`;
}

function renderers(input: ConvertInput): EventRenderers {
  // Forgejo's form defaults to m.notice; a hook made through the API has no settings.
  const msgtype = MESSAGE_TYPES[num(input.meta.message_type)] ?? 'm.notice';
  const message = (render: (form: Form) => string, commits?: unknown[]) => {
    const out: Record<string, unknown> = {
      body: render(PLAIN),
      msgtype,
      format: 'org.matrix.custom.html',
      formatted_body: render(HTML),
    };
    if (commits && commits.length > 0) out['io.gitea.commits'] = commits;
    return out;
  };
  return {
    push(p) {
      return message(
        (form) => pushText(p, form),
        p.commits.map((c) => c.raw),
      );
    },
    create(r) {
      return message(
        ({ f }) =>
          `[${f.text(r.repo.fullName)}:${f.link(refUrl(r.repo.htmlUrl, r.ref, r.refType), r.refName)}] ${f.text(r.refType)} created by ${f.text(r.sender.login)}`,
      );
    },
    delete(r) {
      return message(
        ({ f }) =>
          `[${f.link(r.repo.htmlUrl, r.repo.fullName)}:${f.text(r.refName)}] ${f.text(r.refType)} deleted by ${f.text(r.sender.login)}`,
      );
    },
    repository(r) {
      return message(
        ({ f }) => `[${f.link(r.repo.htmlUrl, r.repo.fullName)}] Repository ${r.action} by ${f.text(r.sender.login)}`,
      );
    },
    action(a) {
      return message(({ f }) => actionText(a, f).text);
    },
    // Gitea's matrixConvertor.WorkflowRun / WorkflowJob.
    workflow(w) {
      return message(({ f }) => workflowText(w, f, true).text);
    },
  };
}

/** `<hook URL>/<txn id>`, the id as a path segment before any query string. */
function transactionUrl(hookUrl: string, txnId: string): string {
  try {
    const url = new URL(hookUrl);
    url.pathname = `${url.pathname.replace(/\/$/, '')}/${encodeURIComponent(txnId)}`;
    return url.toString();
  } catch {
    return `${hookUrl}/${encodeURIComponent(txnId)}`;
  }
}

const post = chatConverter('matrix', renderers, jsonBody);

export const matrix: Converter = (input) => {
  const converted = post(input);
  if (converted.kind === 'skip') return converted;
  return {
    kind: 'request',
    request: { ...converted.request, method: 'PUT', url: transactionUrl(input.url, input.uuid), forgejoHeaders: false },
  };
};
