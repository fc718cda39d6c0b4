import { test } from 'node:test';
import assert from 'node:assert/strict';
import { telegram } from './telegram.ts';
import {
  actionPayload,
  bodyOf,
  createPayload,
  deletePayload,
  input,
  pushPayload,
  repositoryPayload,
  requestOf,
  workflowJobPayload,
  workflowRunPayload,
} from './test-fixtures.ts';
import type { Json } from './text.ts';

const REPO = 'https://git.example.com/acme/app';

function text(eventType: string, payload: Json): string {
  return bodyOf(telegram(input(eventType, payload))).text;
}

test('HTML parse mode, previews off, POSTed to the hook URL with Forgejo headers', () => {
  const request = requestOf(telegram(input('create', createPayload)));
  assert.deepEqual([request.method, request.forgejoHeaders], ['POST', true]);
  assert.deepEqual(JSON.parse(request.body), {
    text: `[acme/app] branch <a href="${REPO}/src/main">main</a> created`,
    parse_mode: 'HTML',
    disable_web_page_preview: true,
  });
});

test('push: user text is HTML-escaped, so the only markup is the links written here', () => {
  assert.equal(
    text('push', pushPayload()),
    `[acme/app:main] 2 new commits\n[<a href="${REPO}/commit/${'2'.repeat(40)}">2222222</a>] Fix &lt;script&gt; &amp; *bold* [link](x)\n\nDetails here - Bob \`the\` &lt;Builder&gt;\n` +
      `[<a href="${REPO}/commit/${'1'.repeat(40)}">1111111</a>] Initial commit - Alice`,
  );
  const noAuthor = pushPayload(1);
  (noAuthor.commits as Json[])[0]!.author = null;
  assert.ok(text('push', noAuthor).endsWith('Details here'), 'no " - name" without an author');
});

test('delete and repository events', () => {
  assert.equal(
    text('delete', deletePayload),
    `[acme/app] branch <a href="${REPO}/src/feature/x">feature/x</a> deleted`,
  );
  assert.equal(text('repository', repositoryPayload('created')), `[<a href="${REPO}">acme/app</a>] Repository created`);
  assert.equal(text('repository', repositoryPayload('deleted')), '[acme/app] Repository deleted');
});

test('action runs and workflow events', () => {
  assert.equal(
    text('action_run_failure', actionPayload('failure')),
    `<a href="${REPO}/actions/runs/3">CI &lt;fast&gt; &amp; green</a> Action Failed in <a href="${REPO}">acme/app</a> main`,
  );
  assert.match(text('action_run_success', actionPayload('success')), /Action Succeeded in/);
  assert.match(text('action_run_recover', actionPayload('recover')), /Action Recovered in/);
  assert.equal(
    text('workflow_run', workflowRunPayload),
    `Workflow Run completed: <a href="${REPO}/actions/runs/3">Fix &lt;script&gt;(#12)[2222222222]:success</a> by <a href="https://git.example.com/alice">alice</a>`,
  );
  assert.match(
    text('workflow_job', workflowJobPayload),
    /^Workflow Job in_progress: <a href="[^"]+\/jobs\/0">build &amp; test\(#12\)/,
  );
});

test("a chat named in the hook's settings but not in its URL goes in the body", () => {
  const meta = { chat_id: '-1001', thread_id: '7' };
  const inBody = bodyOf(
    telegram({ ...input('create', createPayload, meta), url: 'https://api.telegram.org/bot1:x/sendMessage' }),
  );
  assert.deepEqual([inBody.chat_id, inBody.message_thread_id], ['-1001', '7']);
  const inUrl = bodyOf(
    telegram({
      ...input('create', createPayload, meta),
      url: 'https://api.telegram.org/bot1:x/sendMessage?chat_id=-1001',
    }),
  );
  assert.equal('chat_id' in inUrl, false);
});
