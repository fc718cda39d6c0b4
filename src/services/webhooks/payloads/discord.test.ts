import { test } from 'node:test';
import assert from 'node:assert/strict';
import { discord, escapeMarkdown } from './discord.ts';
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
const AUTHOR = { name: 'alice', url: 'https://git.example.com/alice', icon_url: 'https://git.example.com/avatars/2' };

function embed(eventType: string, payload: Json, meta: Json = {}) {
  const body = bodyOf(discord(input(eventType, payload, meta)));
  assert.equal(body.embeds.length, 1);
  return body.embeds[0];
}

test("Markdown escaping follows Forgejo's escapeMarkdown", () => {
  assert.equal(
    escapeMarkdown('1. [a](b) `c` #d !e |f <g> ~h~ _i_'),
    '1\\. \\[a\\]\\(b\\) \\`c\\` \\#d \\!e \\|f \\<g\\> \\~h\\~ \\_i\\_',
  );
  assert.equal(escapeMarkdown('- item\n* star\n+ plus ---'), '\\- item\n\\* star\n\\+ plus \\---');
});

test('push: one embed linking the compare page, commit summaries escaped and cut at 50 characters', () => {
  const body = bodyOf(
    discord(input('push', pushPayload(), { username: 'CI', icon_url: 'https://img.example.com/a.png' })),
  );
  assert.equal(body.username, 'CI');
  assert.equal(body.avatar_url, 'https://img.example.com/a.png');
  const e = body.embeds[0];
  assert.equal(e.title, '[acme/app:main] 2 new commits');
  assert.equal(e.url, `${REPO}/compare/${'1'.repeat(40)}...${'2'.repeat(40)}`);
  assert.equal(e.color, 0x1ac600);
  assert.deepEqual(e.author, AUTHOR);
  assert.equal(
    e.description,
    `[\`2222222\`](${REPO}/commit/${'2'.repeat(40)}) Fix \\<script\\> & \\*bold\\\\* \\[link\\]\\(x\\) \\- Bob \\\`the\\\` \\<Builder\\>\n[\`1111111\`](${REPO}/commit/${'1'.repeat(40)}) Initial commit \\- Alice`,
  );
  const long = pushPayload(1);
  (long.commits as Array<{ message: string }>)[0]!.message = 'x'.repeat(60);
  const one = embed('push', { ...long, head_commit: (long.commits as unknown[])[0] });
  assert.equal(one.url, `${REPO}/commit/${'2'.repeat(40)}`, 'one commit links the commit');
  assert.match(one.description, new RegExp(`\\) ${'x'.repeat(47)}\\.\\.\\. \\\\- `));
});

test('a hook without an icon sends no avatar_url (omitempty)', () => {
  assert.equal('avatar_url' in bodyOf(discord(input('create', createPayload))), false);
});

test('create, delete, repository', () => {
  assert.deepEqual(embed('create', createPayload), {
    title: '[acme/app] branch main created',
    description: '',
    url: `${REPO}/src/main`,
    color: 0x1ac600,
    footer: {},
    author: AUTHOR,
  });
  const del = embed('delete', deletePayload);
  assert.deepEqual(
    [del.title, del.url, del.color],
    ['[acme/app] branch feature/x deleted', `${REPO}/src/feature/x`, 0xff3232],
  );
  const created = embed('repository', repositoryPayload('created'));
  assert.deepEqual([created.title, created.url, created.color], ['[acme/app] Repository created', REPO, 0x1ac600]);
  const deleted = embed('repository', repositoryPayload('deleted'));
  assert.deepEqual([deleted.title, deleted.url, deleted.color], ['[acme/app] Repository deleted', '', 0xff3232]);
});

test('action runs: the trigger user as author, red for a failure', () => {
  const failure = embed('action_run_failure', actionPayload('failure'));
  assert.deepEqual(
    [failure.title, failure.url, failure.color],
    ['CI <fast> & green Action Failed in acme/app main', `${REPO}/actions/runs/3`, 0xff3232],
  );
  assert.deepEqual(failure.author, AUTHOR);
  assert.equal(embed('action_run_success', actionPayload('success')).color, 0x1ac600);
  assert.equal(
    embed('action_run_recover', actionPayload('recover')).title,
    'CI <fast> & green Action Recovered in acme/app main',
  );
});

test("workflow events: Gitea's sentence, coloured by the state", () => {
  const run = embed('workflow_run', workflowRunPayload);
  assert.deepEqual(
    [run.title, run.url, run.color],
    ['Workflow Run completed: Fix <script>(#12)[2222222222]:success', `${REPO}/actions/runs/3`, 0x1ac600],
  );
  const job = embed('workflow_job', workflowJobPayload);
  assert.deepEqual(
    [job.title, job.url, job.color],
    ['Workflow Job in_progress: build & test(#12)[2222222222]:in_progress', `${REPO}/actions/runs/3/jobs/0`, 0x4f545c],
  );
});

test("Discord's limits: a title over 256 characters is cut to 253 and '...'", () => {
  const title = embed('create', { ...createPayload, ref: 'b'.repeat(300) }).title as string;
  assert.equal(Array.from(title).length, 256);
  assert.ok(title.endsWith('b...'));
});
