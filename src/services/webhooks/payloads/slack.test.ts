import { test } from 'node:test';
import assert from 'node:assert/strict';
import { slack, slackEscape, slackName } from './slack.ts';
import {
  actionPayload,
  bodyOf,
  createPayload,
  deletePayload,
  input,
  pushPayload,
  repositoryPayload,
  requestOf,
  tagCreatePayload,
  workflowJobPayload,
  workflowRunPayload,
} from './test-fixtures.ts';

const META = { channel: '#ci', username: 'Gantry', icon_url: 'https://img.example.com/i.png', color: '#00ff00' };
const REPO = 'https://git.example.com/acme/app';

test('escaping: & < > in text, names in inline code with backquotes made quotes', () => {
  assert.equal(slackEscape('a<b>&c'), 'a&lt;b&gt;&amp;c');
  assert.equal(slackName('Bob `the` <B>'), "`Bob 'the' &lt;B&gt;`");
});

test('push: the compare link, the pusher, one attachment with each commit summary escaped', () => {
  const request = requestOf(slack(input('push', pushPayload(), META)));
  assert.equal(request.method, 'POST');
  assert.equal(request.forgejoHeaders, true);
  const body = JSON.parse(request.body);
  assert.deepEqual(
    [body.channel, body.username, body.icon_url, body.unfurl_links, body.link_names],
    ['#ci', 'Gantry', 'https://img.example.com/i.png', 0, 0],
  );
  assert.equal(
    body.text,
    `[acme/app:<${REPO}/src/branch/main|main>] <${REPO}/compare/${'1'.repeat(40)}...${'2'.repeat(40)}|2 new commits> pushed by \`alice\``,
  );
  assert.equal(body.attachments.length, 1);
  assert.deepEqual(
    { ...body.attachments[0], text: undefined },
    { fallback: '', color: '#00ff00', title: REPO, title_link: REPO, text: undefined },
  );
  assert.equal(
    body.attachments[0].text,
    `<${REPO}/commit/${'2'.repeat(40)}|2222222>: Fix &lt;script&gt; &amp; *bold* [link](x) - \`Bob 'the' &lt;Builder&gt;\`\n<${REPO}/commit/${'1'.repeat(40)}|1111111>: Initial commit - \`Alice\``,
  );
  // One commit: "1 new commit".
  assert.match(bodyOf(slack(input('push', pushPayload(1), META))).text, /\|1 new commit> pushed by/);
});

test('create, delete, repository: one line, no attachments (null, as Go sends a nil slice)', () => {
  const create = bodyOf(slack(input('create', createPayload, META)));
  assert.equal(create.text, `[acme/app:<${REPO}/src/branch/main|main>] branch created by \`alice\``);
  assert.equal(create.attachments, null);
  assert.equal(
    bodyOf(slack(input('create', tagCreatePayload))).text,
    `[acme/app:<${REPO}/src/tag/v1.0|v1.0>] tag created by \`alice\``,
  );
  assert.equal(
    bodyOf(slack(input('delete', deletePayload))).text,
    `[<${REPO}|acme/app>:feature/x] branch deleted by \`alice\``,
  );
  assert.equal(
    bodyOf(slack(input('repository', repositoryPayload('created')))).text,
    `[<${REPO}|acme/app>] Repository created by \`alice\``,
  );
  assert.equal(
    bodyOf(slack(input('repository', repositoryPayload('deleted')))).text,
    `[<${REPO}|acme/app>] Repository deleted by \`alice\``,
  );
});

test('action runs and workflow events: the sentence with Slack links, titles escaped', () => {
  assert.equal(
    bodyOf(slack(input('action_run_success', actionPayload('success')))).text,
    `<${REPO}/actions/runs/3|CI &lt;fast&gt; &amp; green> Action Succeeded in <${REPO}|acme/app> main`,
  );
  assert.match(bodyOf(slack(input('action_run_failure', actionPayload('failure')))).text, / Action Failed in /);
  assert.match(bodyOf(slack(input('action_run_recover', actionPayload('recover')))).text, / Action Recovered in /);
  assert.equal(
    bodyOf(slack(input('workflow_run', workflowRunPayload))).text,
    `Workflow Run completed: <${REPO}/actions/runs/3|Fix &lt;script&gt;(#12)[2222222222]:success> by <https://git.example.com/alice|alice>`,
  );
  assert.equal(
    bodyOf(slack(input('workflow_job', workflowJobPayload))).text,
    `Workflow Job in_progress: <${REPO}/actions/runs/3/jobs/0|build &amp; test(#12)[2222222222]:in_progress> by <https://git.example.com/alice|alice>`,
  );
});

test('a hook without settings sends empty channel, username and icon (Slack uses the webhook defaults)', () => {
  const body = bodyOf(slack(input('create', createPayload)));
  assert.deepEqual([body.channel, body.username, body.icon_url], ['', '', '']);
});
