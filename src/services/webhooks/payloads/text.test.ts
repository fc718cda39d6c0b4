import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  actionText,
  actionView,
  capitalise,
  escapeHtml,
  htmlFormatter,
  pathEscapeSegments,
  plainFormatter,
  pushView,
  queryEscape,
  refUrl,
  shortRefName,
  truncateRunes,
  workflowText,
  workflowView,
} from './text.ts';
import { actionPayload, workflowJobPayload, workflowRunPayload } from './test-fixtures.ts';

test("Go's escapers: html.EscapeString, url.PathEscape per segment, url.QueryEscape", () => {
  assert.equal(
    escapeHtml(`<a href="x">Tom & Jerry's</a>`),
    '&lt;a href=&#34;x&#34;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;',
  );
  assert.equal(pathEscapeSegments('feature/a b+c@d!é'), 'feature/a%20b+c@d%21%C3%A9');
  assert.equal(queryEscape('https://x.org/a b?c=d&e'), 'https%3A%2F%2Fx.org%2Fa+b%3Fc%3Dd%26e');
});

test('refs: short names and the links Forgejo makes for them', () => {
  assert.equal(shortRefName('refs/heads/feature/x'), 'feature/x');
  assert.equal(shortRefName('refs/tags/v1'), 'v1');
  assert.equal(shortRefName('main'), 'main');
  const repo = 'https://git.example.com/acme/app';
  assert.equal(refUrl(repo, 'refs/heads/a b'), `${repo}/src/branch/a%20b`);
  assert.equal(refUrl(repo, 'refs/tags/v1'), `${repo}/src/tag/v1`);
  assert.equal(refUrl(repo, 'v1', 'tag'), `${repo}/src/tag/v1`, 'a created tag links to the tag, not a branch');
  assert.equal(refUrl(repo, 'main', 'branch'), `${repo}/src/branch/main`);
  assert.equal(
    refUrl(repo, '2222222222222222222222222222222222222222'),
    `${repo}/src/commit/2222222222222222222222222222222222222222`,
  );
});

test('capitalise and rune truncation', () => {
  assert.equal(capitalise('BRANCH'), 'Branch');
  assert.equal(capitalise('in progress'), 'In Progress');
  assert.equal(truncateRunes('ééééé', 4, '...'), 'é...');
  assert.equal(truncateRunes('éééé', 4, '...'), 'éééé');
});

test("Forgejo's action sentence and Gitea's workflow sentence", () => {
  assert.equal(
    actionText(actionView('action_run_failure', actionPayload('failure')), plainFormatter).text,
    'CI <fast> & green Action Failed in acme/app main',
  );
  assert.equal(
    actionText(actionView('action_run_recover', actionPayload('recover')), htmlFormatter).text,
    '<a href="https://git.example.com/acme/app/actions/runs/3">CI &lt;fast&gt; &amp; green</a> Action Recovered in <a href="https://git.example.com/acme/app">acme/app</a> main',
  );
  const run = workflowText(workflowView('workflow_run', workflowRunPayload), plainFormatter, true);
  assert.equal(run.text, 'Workflow Run completed: Fix <script>(#12)[2222222222]:success by alice');
  assert.equal(run.color, 0x1ac600);
  const job = workflowText(workflowView('workflow_job', workflowJobPayload), plainFormatter, false);
  assert.equal(job.text, 'Workflow Job in_progress: build & test(#12)[2222222222]:in_progress');
  assert.equal(job.color, 0x4f545c);
});

test('views of empty or mistyped payloads read as empty values, never throw', () => {
  const push = pushView({ commits: 'nope', total_commits: '3', repository: 5 });
  assert.deepEqual([push.commits, push.totalCommits, push.repo.fullName, push.pusher.login], [[], 0, '', '']);
  const action = actionView('action_run_failure', {});
  assert.equal(action.action, 'failure', 'the event type names the action when the payload does not');
  assert.equal(actionText(action, htmlFormatter).text, ' Action Failed in  ');
  assert.equal(
    workflowText(workflowView('workflow_job', { workflow_job: null }), htmlFormatter, true).text,
    'Workflow Job : (#0)[]:',
  );
});
