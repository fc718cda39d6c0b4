import { test } from 'node:test';
import assert from 'node:assert/strict';
import { wechatwork } from './wechatwork.ts';
import {
  actionPayload,
  bodyOf,
  createPayload,
  deletePayload,
  input,
  pushPayload,
  repositoryPayload,
  workflowJobPayload,
  workflowRunPayload,
} from './test-fixtures.ts';
import type { Json } from './text.ts';

const REPO = 'https://git.example.com/acme/app';

function markdown(eventType: string, payload: Json): string {
  const body = bodyOf(wechatwork(input(eventType, payload)));
  assert.deepEqual(
    [body.msgtype, body.text],
    ['markdown', { content: '', mentioned_list: null, mentioned_mobile_list: null }],
  );
  return body.markdown.content;
}

test('push: WeCom Markdown with <font> colours, blank lines in messages folded as Forgejo does', () => {
  assert.equal(
    markdown('push', pushPayload()),
    '# acme/app:main <font color="warning">    </font>\r\n\r\n' +
      ` > [2222222](${REPO}/commit/${'2'.repeat(40)}) \r\n ><font color="info">Fix <script> & *bold* [link](x)\r\nDetails here</font> \n ><font color="warning">Author: Bob \`the\` <Builder></font>\n` +
      ` > [1111111](${REPO}/commit/${'1'.repeat(40)}) \r\n ><font color="info">Initial commit</font> \n ><font color="warning">Author: Alice</font>`,
  );
});

test('the other events: one line each', () => {
  assert.equal(markdown('create', createPayload), '[acme/app] branch main created');
  assert.equal(markdown('delete', deletePayload), '[acme/app] branch feature/x deleted');
  assert.equal(markdown('repository', repositoryPayload('deleted')), '[acme/app] Repository deleted');
  assert.equal(
    markdown('action_run_failure', actionPayload('failure')),
    'CI <fast> & green Action Failed in acme/app main',
  );
  assert.equal(
    markdown('action_run_success', actionPayload('success')),
    'CI <fast> & green Action Succeeded in acme/app main',
  );
  assert.equal(
    markdown('action_run_recover', actionPayload('recover')),
    'CI <fast> & green Action Recovered in acme/app main',
  );
  assert.equal(
    markdown('workflow_run', workflowRunPayload),
    'Workflow Run completed: Fix <script>(#12)[2222222222]:success by alice',
  );
  assert.equal(
    markdown('workflow_job', workflowJobPayload),
    'Workflow Job in_progress: build & test(#12)[2222222222]:in_progress by alice',
  );
});
