import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dingtalk } from './dingtalk.ts';
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
const open = (url: string) => `dingtalk://dingtalkclient/page/link?pc_slide=false&url=${encodeURIComponent(url)}`;

function cardOf(eventType: string, payload: Json) {
  const body = bodyOf(dingtalk(input(eventType, payload)));
  assert.deepEqual([body.msgtype, body.text], ['actionCard', { content: '' }]);
  return body.actionCard;
}

test('push: an action card listing the commits, its button opening the compare page in the browser', () => {
  assert.deepEqual(cardOf('push', pushPayload()), {
    text: `[2222222](${REPO}/commit/${'2'.repeat(40)}) Fix <script> & *bold* [link](x)\n\nDetails here - Bob \`the\` <Builder>\r\n[1111111](${REPO}/commit/${'1'.repeat(40)}) Initial commit - Alice`,
    title: '[acme/app:main] 2 new commits',
    hideAvatar: '0',
    singleTitle: 'view commits',
    singleURL: open(`${REPO}/compare/${'1'.repeat(40)}...${'2'.repeat(40)}`),
  });
  const one = cardOf('push', pushPayload(1));
  assert.deepEqual([one.singleTitle, one.singleURL], ['view commit', open(`${REPO}/commit/${'2'.repeat(40)}`)]);
});

test('create, delete, repository: a deleted repository is a plain text message', () => {
  const create = cardOf('create', createPayload);
  assert.deepEqual(
    [create.title, create.text, create.singleTitle, create.singleURL],
    ['[acme/app] branch main created', '[acme/app] branch main created', 'view ref main', open(`${REPO}/src/main`)],
  );
  assert.equal(cardOf('delete', deletePayload).title, '[acme/app] branch feature/x deleted');
  assert.equal(cardOf('repository', repositoryPayload('created')).singleTitle, 'view repository');
  const deleted = bodyOf(dingtalk(input('repository', repositoryPayload('deleted'))));
  assert.deepEqual(deleted, {
    msgtype: 'text',
    text: { content: '[acme/app] Repository deleted' },
    actionCard: { text: '', title: '', hideAvatar: '', singleTitle: '', singleURL: '' },
  });
});

test('action runs and workflow events', () => {
  const action = cardOf('action_run_success', actionPayload('success'));
  assert.deepEqual(
    [action.title, action.singleTitle, action.singleURL],
    ['CI <fast> & green Action Succeeded in acme/app main', 'view action', open(`${REPO}/actions/runs/3`)],
  );
  assert.equal(
    cardOf('action_run_failure', actionPayload('failure')).text,
    'CI <fast> & green Action Failed in acme/app main',
  );
  assert.equal(
    cardOf('action_run_recover', actionPayload('recover')).text,
    'CI <fast> & green Action Recovered in acme/app main',
  );
  const run = cardOf('workflow_run', workflowRunPayload);
  assert.deepEqual(
    [run.title, run.singleTitle],
    ['Workflow Run completed: Fix <script>(#12)[2222222222]:success by alice', 'Workflow Run'],
  );
  assert.equal(cardOf('workflow_job', workflowJobPayload).singleTitle, 'Workflow Job');
});
