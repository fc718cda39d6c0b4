import { test } from 'node:test';
import assert from 'node:assert/strict';
import { convertWorkflowTemplate, NoOperationTraceWriter, parseWorkflow } from '@actions/workflow-parser';
import {
  eventsForRefUpdate,
  hasSkipMarker,
  workflowMatchesEvent,
  type EventsConfig,
  type PushFacts,
} from './triggers.ts';

// The converter's real output, so the matcher sees what production code will.
async function on(yaml: string): Promise<EventsConfig> {
  const content = `on:\n${yaml.replace(/^/gmu, '  ')}\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: echo\n`;
  const parsed = parseWorkflow({ name: 'w.yml', content }, new NoOperationTraceWriter());
  const template = await convertWorkflowTemplate(parsed.context, parsed.value!);
  assert.deepEqual(template.errors ?? [], [], content);
  return template.events;
}

interface Push extends PushFacts {
  diffs: number;
}

function push(ref: string, files: string[] | null = ['src/a.ts'], commitMessage = 'change things'): Push {
  const facts: Push = {
    event: 'push',
    ref,
    commitMessage,
    diffs: 0,
    changedPaths: async () => {
      facts.diffs += 1;
      return files;
    },
  };
  return facts;
}

const branch = (name: string, files?: string[] | null, message?: string) => push(`refs/heads/${name}`, files, message);
const tag = (name: string, files?: string[] | null) => push(`refs/tags/${name}`, files);

const runs = workflowMatchesEvent;

test('the converter shapes the matcher relies on', async () => {
  assert.deepEqual(await on('push'), { push: {} });
  assert.deepEqual(await on('[push, create]'), { push: {}, create: {} });
  assert.deepEqual(await on('{push: null}'), { push: {} });
  assert.deepEqual(await on('push:\n  branches: main'), { push: { branches: ['main'] } });
});

test('an unfiltered event matches every ref; unlisted events never match', async () => {
  const events = await on('[push, create]');
  assert.equal(await runs(events, branch('main')), true);
  assert.equal(await runs(events, tag('v1')), true);
  assert.equal(await runs(events, { event: 'create', ref: 'refs/tags/v1' }), true);
  assert.equal(await runs(events, { event: 'delete', ref: 'refs/heads/x' }), false);
  assert.equal(await runs(events, { event: 'workflow_dispatch' }), false);
  assert.equal(await runs(await on('workflow_dispatch'), { event: 'workflow_dispatch' }), true);
  assert.equal(await runs(await on('delete'), { event: 'delete', ref: 'refs/heads/x' }), true);
  assert.equal(await runs(await on('pull_request'), branch('main')), false);
});

test('branches and branches-ignore apply to branches by short name', async () => {
  const events = await on("push:\n  branches: [main, 'releases/**', '!releases/**-alpha']");
  assert.equal(await runs(events, branch('main')), true);
  assert.equal(await runs(events, branch('releases/v1/beta')), true);
  assert.equal(await runs(events, branch('releases/v1-alpha')), false);
  assert.equal(await runs(events, branch('dev')), false);
  // Only branch filters: a tag push does not run, even one named like a branch.
  assert.equal(await runs(events, tag('main')), false);

  const ignoring = await on("push:\n  branches-ignore: ['mona/octocat', 'releases/**-alpha']");
  assert.equal(await runs(ignoring, branch('main')), true);
  assert.equal(await runs(ignoring, branch('mona/octocat')), false);
  assert.equal(await runs(ignoring, branch('releases/beta/3-alpha')), false);
  assert.equal(await runs(ignoring, tag('v1')), false);
});

test('tags and tags-ignore apply to tags only', async () => {
  const events = await on("push:\n  tags: ['v[12].[0-9]+.[0-9]+']");
  assert.equal(await runs(events, tag('v1.10.1')), true);
  assert.equal(await runs(events, tag('v3.0.0')), false);
  assert.equal(await runs(events, branch('v1.10.1')), false);

  const ignoring = await on("push:\n  tags-ignore: [v2, 'v1.*']");
  assert.equal(await runs(ignoring, tag('v1.9')), false);
  assert.equal(await runs(ignoring, tag('v2')), false);
  assert.equal(await runs(ignoring, tag('v3')), true);
  assert.equal(await runs(ignoring, branch('main')), false);
});

test('with branch and tag filters only the filter for the ref kind applies', async () => {
  const events = await on("push:\n  branches: [main]\n  tags: ['v*']");
  assert.equal(await runs(events, branch('main')), true);
  assert.equal(await runs(events, branch('dev')), false);
  assert.equal(await runs(events, tag('v1')), true);
  assert.equal(await runs(events, tag('x1')), false);
  // Forgejo's counting would refuse every branch here; the tag pair does not bind branches.
  const both = await on("push:\n  branches: [main]\n  tags: ['v*']\n  tags-ignore: [v0]");
  assert.equal(await runs(both, branch('main')), true);
  assert.equal(await runs(both, tag('v0')), false);
  assert.equal(await runs(both, tag('v1')), true);
  // Neither a branch nor a tag: any ref filter refuses it, none lets it through.
  assert.equal(await runs(events, push('refs/pull/1/head')), false);
  assert.equal(await runs(await on('push'), push('refs/pull/1/head')), true);
});

test('branches with branches-ignore (invalid on GitHub): both must pass', async () => {
  const events = await on("push:\n  branches: ['feature/**']\n  branches-ignore: ['feature/wip-*']");
  assert.equal(await runs(events, branch('feature/a')), true);
  assert.equal(await runs(events, branch('feature/wip-1')), false);
  assert.equal(await runs(events, branch('main')), false);
});

test('an empty list constrains nothing but still claims its ref kind', async () => {
  const events = await on('push:\n  branches: []');
  assert.equal(await runs(events, branch('anything')), true);
  assert.equal(await runs(events, tag('v1')), false);
});

test('paths: some changed file must be selected', async () => {
  const events = await on("push:\n  paths: ['src/**', '!src/**/*.md']");
  assert.equal(await runs(events, branch('main', ['README.md', 'src/x/y.ts'])), true);
  assert.equal(await runs(events, branch('main', ['README.md'])), false);
  assert.equal(await runs(events, branch('main', ['src/notes.md'])), false);
  assert.equal(await runs(events, branch('main', [])), false);
  // Unknown diff: the filter does not exclude.
  assert.equal(await runs(events, branch('main', null)), true);
});

test('paths-ignore: some changed file must not be ignored', async () => {
  const events = await on("push:\n  paths-ignore: ['docs/**', '**.md', '!docs/api.md']");
  assert.equal(await runs(events, branch('main', ['docs/a.txt', 'README.md'])), false);
  assert.equal(await runs(events, branch('main', ['docs/a.txt', 'src/a.ts'])), true);
  assert.equal(await runs(events, branch('main', ['docs/api.md'])), true);
  assert.equal(await runs(events, branch('main', [])), false);
  assert.equal(await runs(events, branch('main', null)), true);
});

test('paths combine with ref filters, and also bind tags', async () => {
  const events = await on("push:\n  branches: [main]\n  tags: ['v*']\n  paths: ['src/**']");
  const offBranch = branch('dev', ['src/a.ts']);
  assert.equal(await runs(events, offBranch), false);
  assert.equal(offBranch.diffs, 0, 'a failing ref filter saves the diff');
  assert.equal(await runs(events, branch('main', ['src/a.ts'])), true);
  assert.equal(await runs(events, branch('main', ['doc.txt'])), false);
  assert.equal(await runs(events, tag('v1', ['doc.txt'])), false);
  assert.equal(await runs(events, tag('v1', ['src/a.ts'])), true);
});

test('changed paths are asked for once, and only when a paths filter exists', async () => {
  const both = branch('main', ['src/a.ts']);
  assert.equal(await runs(await on("push:\n  paths: ['src/**']\n  paths-ignore: ['**.md']"), both), true);
  assert.equal(both.diffs, 1);
  const none = branch('main');
  assert.equal(await runs(await on('push:\n  branches: [main]'), none), true);
  assert.equal(none.diffs, 0);
  const empty = branch('main');
  assert.equal(await runs(await on('push:\n  paths: []'), empty), true);
  assert.equal(empty.diffs, 0);
});

test('an invalid pattern fails its filter, only where that filter applies', async () => {
  const events = await on("push:\n  branches: ['[z-a]']\n  tags: ['v*']");
  assert.equal(await runs(events, branch('main')), false);
  assert.equal(await runs(events, tag('v1')), true);
  const paths = branch('main');
  assert.equal(await runs(await on("push:\n  paths-ignore: ['a++']"), paths), false);
  assert.equal(paths.diffs, 0);
});

test('compiled filters are cached per converted config', async () => {
  const events = await on("push:\n  branches: ['main']");
  for (let i = 0; i < 3; i++) assert.equal(await runs(events, branch('main')), true);
  // A hand-built config with an undefined value behaves as `on: push`.
  assert.equal(await runs({ push: undefined }, branch('x')), true);
});

test('skip markers suppress push-triggered runs only', async () => {
  for (const marker of ['[skip ci]', '[ci skip]', '[no ci]', '[skip actions]', '[actions skip]']) {
    assert.equal(hasSkipMarker(`fix: thing\n\nbody ${marker} trailing`), true, marker);
  }
  assert.equal(hasSkipMarker('[SKIP CI] is case-sensitive in Forgejo'), false);
  assert.equal(hasSkipMarker('skip ci'), false);
  const events = await on('[push, create]');
  const skipped = branch('main', ['src/a.ts'], 'wip [skip ci]');
  assert.equal(await runs(events, skipped), false);
  assert.equal(await runs(events, { event: 'create', ref: 'refs/heads/main' }), true);
});

test('events raised by a ref update, in Forgejo order', () => {
  assert.deepEqual(eventsForRefUpdate('created'), ['create', 'push']);
  assert.deepEqual(eventsForRefUpdate('updated'), ['push']);
  assert.deepEqual(eventsForRefUpdate('deleted'), ['delete']);
  assert.deepEqual(eventsForRefUpdate('created', 'refs/heads/x'), ['create', 'push']);
  assert.deepEqual(eventsForRefUpdate('created', 'refs/tags/v1'), ['push', 'create']);
  assert.deepEqual(eventsForRefUpdate('updated', 'refs/tags/v1'), ['push', 'create']);
  assert.deepEqual(eventsForRefUpdate('deleted', 'refs/tags/v1'), ['delete']);
  assert.deepEqual(eventsForRefUpdate('created', 'refs/pull/1/head'), []);
});
