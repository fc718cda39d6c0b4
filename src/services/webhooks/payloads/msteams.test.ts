import { test } from 'node:test';
import assert from 'node:assert/strict';
import { msteams } from './msteams.ts';
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

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- cards are walked freely
function card(eventType: string, payload: Json): any {
  return bodyOf(msteams(input(eventType, payload)));
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const headingOf = (c: any) => ({ text: c.body[1].items[0].text, style: c.body[1].style });

test('an Adaptive Card 1.5: repository header, heading with the sender, one "View in Forgejo" button', () => {
  const c = card('create', createPayload);
  assert.deepEqual(
    [c.type, c.version, c.$schema, c.msteams.width, c.style],
    ['AdaptiveCard', '1.5', 'http://adaptivecards.io/schemas/adaptive-card.json', 'Full', 'default'],
  );
  assert.equal(c.body[0].items[0].text, `💬 Update | [acme/app](${REPO})`);
  assert.deepEqual(headingOf(c), {
    text: 'Branch created: main by [Alice <Admin> (@alice)](https://git.example.com/alice)',
    style: 'good',
  });
  assert.deepEqual(c.actions, [{ type: 'Action.OpenUrl', title: 'View in Forgejo', url: `${REPO}/src/main` }]);
});

test('push: the commits in a bordered container, the first five shown and the rest behind a toggle', () => {
  const two = card('push', pushPayload());
  assert.equal(headingOf(two).text, '[main] 2 new commits by [Alice <Admin> (@alice)](https://git.example.com/alice)');
  const section = two.body[2];
  assert.deepEqual(
    [section.type, section.style, section.showBorder, section.items.length],
    ['Container', 'emphasis', true, 2],
  );
  assert.equal(section.items[0].columns[0].items[0].text, `[22222222](${REPO}/commit/${'2'.repeat(40)})`);
  assert.equal(section.items[0].columns[1].items[0].text, 'Fix <script> & *bold* [link](x)\n\nDetails here');
  assert.equal(two.actions[0].url, `${REPO}/compare/${'1'.repeat(40)}...${'2'.repeat(40)}`);

  const many = pushPayload(1);
  const commits = Array.from({ length: 7 }, (_, i) => ({ ...(many.commits as Json[])[0], id: String(i).repeat(40) }));
  const seven = card('push', { ...many, commits, total_commits: 7 });
  const items = seven.body[2].items;
  assert.equal(items.length, 8, '5 commits, "and 2 more", the hidden 2, "Collapse"');
  assert.equal(items[5].items[0].columns[0].items[0].text, '*and 2 more commits*');
  assert.deepEqual([items[6].id, items[6].isVisible, items[6].items.length], ['hiddenCommits', false, 2]);
  assert.deepEqual([items[7].id, items[7].isVisible], ['showLess', false]);
});

test('delete and repository events', () => {
  const del = card('delete', deletePayload);
  assert.deepEqual(headingOf(del), {
    text: 'Branch deleted: feature/x by [Alice <Admin> (@alice)](https://git.example.com/alice)',
    style: 'attention',
  });
  assert.equal(del.actions[0].url, REPO);
  const deleted = card('repository', repositoryPayload('deleted'));
  assert.equal(headingOf(deleted).text.startsWith('Repository deleted: acme/app by '), true);
  assert.equal('url' in deleted.actions[0], false, 'no link to a deleted repository (omitempty)');
  assert.equal(card('repository', repositoryPayload('created')).actions[0].url, REPO);
});

test("action runs: Forgejo's titles and a badge with the state", () => {
  const failure = card('action_run_failure', actionPayload('failure'));
  assert.equal(
    headingOf(failure).text,
    'Action run #12 failed: CI <fast> & green by [Alice <Admin> (@alice)](https://git.example.com/alice)',
  );
  const badgeRow = failure.body[2].items[0].columns;
  assert.deepEqual(badgeRow[0].items[0], {
    type: 'Badge',
    text: 'Failed',
    icon: 'PlayCircle',
    size: 'Large',
    style: 'attention',
  });
  assert.deepEqual(
    badgeRow[1].items.map((t: { text: string }) => t.text),
    ['On main', 'acme/app Run #12'],
  );
  assert.match(headingOf(card('action_run_success', actionPayload('success'))).text, /^Action run #12 succeded: /);
  assert.match(headingOf(card('action_run_recover', actionPayload('recover'))).text, /^Action run #12 recovered: /);
});

test("workflow events: Gitea's sentence as heading, a badge with the conclusion or status", () => {
  const run = card('workflow_run', workflowRunPayload);
  assert.equal(
    headingOf(run).text,
    'Workflow Run completed: Fix <script>(#12)[2222222222]:success by [Alice <Admin> (@alice)](https://git.example.com/alice)',
  );
  assert.deepEqual(
    [run.body[2].items[0].columns[0].items[0].text, run.body[2].items[0].columns[0].items[0].style],
    ['Success', 'good'],
  );
  assert.equal(run.actions[0].url, `${REPO}/actions/runs/3`);
  const job = card('workflow_job', workflowJobPayload);
  assert.equal(job.body[2].items[0].columns[0].items[0].text, 'In Progress');
  assert.deepEqual(
    job.body[2].items[0].columns[1].items.map((t: { text: string }) => t.text),
    ['On main', 'acme/app Job build & test'],
  );
});
