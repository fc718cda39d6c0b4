import { test } from 'node:test';
import assert from 'node:assert/strict';
import { feishu } from './feishu.ts';
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

function text(eventType: string, payload: Json): string {
  const body = bodyOf(feishu(input(eventType, payload)));
  assert.equal(body.msg_type, 'text');
  return body.content.text;
}

test("every event is a text message with Forgejo's wording", () => {
  assert.equal(
    text('push', pushPayload()),
    `[acme/app:main] \r\n[2222222](${REPO}/commit/${'2'.repeat(40)}) Fix <script> & *bold* [link](x)\n\nDetails here - Bob \`the\` <Builder>\r\n[1111111](${REPO}/commit/${'1'.repeat(40)}) Initial commit - Alice`,
  );
  assert.equal(text('create', createPayload), '[acme/app] branch main created');
  assert.equal(text('delete', deletePayload), '[acme/app] branch feature/x deleted');
  assert.equal(text('repository', repositoryPayload('created')), '[acme/app] Repository created');
  assert.equal(text('repository', repositoryPayload('deleted')), '[acme/app] Repository deleted');
  assert.equal(
    text('action_run_success', actionPayload('success')),
    'CI <fast> & green Action Succeeded in acme/app main',
  );
  assert.equal(
    text('action_run_failure', actionPayload('failure')),
    'CI <fast> & green Action Failed in acme/app main',
  );
  assert.equal(
    text('action_run_recover', actionPayload('recover')),
    'CI <fast> & green Action Recovered in acme/app main',
  );
  assert.equal(
    text('workflow_run', workflowRunPayload),
    'Workflow Run completed: Fix <script>(#12)[2222222222]:success by alice',
  );
  assert.equal(
    text('workflow_job', workflowJobPayload),
    'Workflow Job in_progress: build & test(#12)[2222222222]:in_progress by alice',
  );
});
