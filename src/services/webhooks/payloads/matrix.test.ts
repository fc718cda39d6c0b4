import { test } from 'node:test';
import assert from 'node:assert/strict';
import { matrix } from './matrix.ts';
import {
  actionPayload,
  bodyOf,
  createPayload,
  deletePayload,
  input,
  pushPayload,
  repositoryPayload,
  requestOf,
  UUID,
  workflowJobPayload,
  workflowRunPayload,
} from './test-fixtures.ts';
import type { Json } from './text.ts';

const REPO = 'https://git.example.com/acme/app';
const ROOM_URL = 'https://matrix.example.org/_matrix/client/v3/rooms/!abc%3Aexample.org/send/m.room.message';

function event(eventType: string, payload: Json, meta: Json = {}) {
  return bodyOf(matrix({ ...input(eventType, payload, meta), url: ROOM_URL }));
}

test('a PUT to <room URL>/<delivery id>, without Forgejo headers: a retried delivery is one message', () => {
  const request = requestOf(matrix({ ...input('create', createPayload), url: ROOM_URL }));
  assert.deepEqual([request.method, request.url, request.forgejoHeaders], ['PUT', `${ROOM_URL}/${UUID}`, false]);
  const withQuery = requestOf(matrix({ ...input('create', createPayload), url: `${ROOM_URL}?via=x` }));
  assert.equal(withQuery.url, `${ROOM_URL}/${UUID}?via=x`);
});

test('msgtype from the settings (1 m.notice, 2 m.text), m.notice without', () => {
  assert.equal(event('create', createPayload, { message_type: 2 }).msgtype, 'm.text');
  assert.equal(event('create', createPayload, { message_type: 1 }).msgtype, 'm.notice');
  assert.equal(event('create', createPayload).msgtype, 'm.notice');
});

test('push: HTML with user text escaped, a plain body from the raw text, and the commits', () => {
  const e = event('push', pushPayload());
  assert.equal(e.format, 'org.matrix.custom.html');
  assert.equal(
    e.formatted_body,
    `[acme/app] alice pushed 2 commits to main:<br><a href="${REPO}/commit/${'2'.repeat(40)}">2222222</a>: Fix &lt;script&gt; &amp; *bold* [link](x)\n\nDetails here - Bob \`the\` &lt;Builder&gt;<br>` +
      `<a href="${REPO}/commit/${'1'.repeat(40)}">1111111</a>: Initial commit - Alice`,
  );
  assert.equal(
    e.body,
    `[acme/app] alice pushed 2 commits to main:\n[2222222](${REPO}/commit/${'2'.repeat(40)}): Fix <script> & *bold* [link](x)\n\nDetails here - Bob \`the\` <Builder>\n[1111111](${REPO}/commit/${'1'.repeat(40)}): Initial commit - Alice`,
  );
  assert.deepEqual(e['io.gitea.commits'], pushPayload().commits);
  assert.equal('io.gitea.commits' in event('create', createPayload), false);
});

test('create, delete, repository, action runs, workflow events', () => {
  assert.equal(
    event('create', createPayload).formatted_body,
    `[acme/app:<a href="${REPO}/src/branch/main">main</a>] branch created by alice`,
  );
  assert.equal(event('delete', deletePayload).body, `[[acme/app](${REPO}):feature/x] branch deleted by alice`);
  assert.equal(
    event('repository', repositoryPayload('deleted')).formatted_body,
    `[<a href="${REPO}">acme/app</a>] Repository deleted by alice`,
  );
  const action = event('action_run_failure', actionPayload('failure'));
  assert.equal(
    action.formatted_body,
    `<a href="${REPO}/actions/runs/3">CI &lt;fast&gt; &amp; green</a> Action Failed in <a href="${REPO}">acme/app</a> main`,
  );
  assert.equal(action.body, `[CI <fast> & green](${REPO}/actions/runs/3) Action Failed in [acme/app](${REPO}) main`);
  assert.match(event('action_run_success', actionPayload('success')).body, / Action Succeeded in /);
  assert.match(event('action_run_recover', actionPayload('recover')).body, / Action Recovered in /);
  assert.equal(
    event('workflow_run', workflowRunPayload).body,
    `Workflow Run completed: [Fix <script>(#12)[2222222222]:success](${REPO}/actions/runs/3) by [alice](https://git.example.com/alice)`,
  );
  assert.match(
    event('workflow_job', workflowJobPayload).formatted_body,
    /^Workflow Job in_progress: <a href="[^"]+">build &amp; test\(#12\)/,
  );
});
