import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parse } from 'yaml';
import { adjustManifest, manifestLocationOf, sourcehutBuilds } from './sourcehut-builds.ts';
import { createPayload, input, pushPayload, repository, requestOf, tagCreatePayload } from './test-fixtures.ts';

const META = { manifest_path: '.builds/ci.yml', visibility: 'UNLISTED', secrets: true };
const MANIFEST =
  'image: alpine/edge\nsources:\n  - https://git.example.com/acme/app.git\n  - https://git.sr.ht/~x/lib\nenvironment:\n  FOO: bar\ntasks:\n  - build: make\n';
const HEAD = '2'.repeat(40);

test('push: the manifest at the head commit, pinned and submitted with the GraphQL submit mutation', () => {
  assert.deepEqual(manifestLocationOf(input('push', pushPayload(), META)), {
    ownerName: 'acme',
    repoName: 'app',
    commitId: HEAD,
    path: '.builds/ci.yml',
  });
  const request = requestOf(sourcehutBuilds(input('push', pushPayload(), META, { manifest: { text: MANIFEST } })));
  assert.deepEqual([request.method, request.forgejoHeaders], ['POST', false]);
  const body = JSON.parse(request.body);
  assert.match(
    body.query,
    /^mutation \(\$manifest: String!.*\$visibility: Visibility!\) \{\n {2}submit\(manifest: \$manifest, tags: \$tags, note: \$note, secrets: \$secrets, execute: \$execute, visibility: \$visibility\) \{\n {4}id/s,
  );
  const { manifest, ...rest } = body.variables;
  assert.deepEqual(rest, {
    tags: ['acme/app', 'branch/main', '.builds/ci.yml'],
    note: 'Fix <script> & *bold* [link](x)\n\nDetails here',
    secrets: true,
    execute: true,
    visibility: 'UNLISTED',
  });
  assert.deepEqual(parse(manifest), {
    sources: [`https://git.example.com/acme/app.git#${HEAD}`, 'https://git.sr.ht/~x/lib'],
    environment: {
      FOO: 'bar',
      BUILD_SUBMITTER: 'forgejo',
      BUILD_SUBMITTER_URL: 'https://git.example.com/',
      GIT_REF: 'refs/heads/main',
    },
    image: 'alpine/edge',
    tasks: [{ build: 'make' }],
  });
});

test('a created tag builds its commit, tagged tag/<name>; defaults: PRIVATE, no secrets', () => {
  const request = requestOf(
    sourcehutBuilds(
      input(
        'create',
        tagCreatePayload,
        { manifest_path: '.build.yml' },
        { manifest: { text: 'image: debian/stable\n' } },
      ),
    ),
  );
  const { variables } = JSON.parse(request.body);
  assert.deepEqual(
    [variables.tags, variables.note, variables.visibility, variables.secrets],
    [['acme/app', 'tag/v1.0', '.build.yml'], 'tag v1.0 created', 'PRIVATE', false],
  );
  const manifest = parse(variables.manifest);
  assert.deepEqual(
    manifest.sources,
    [`https://git.example.com/acme/app.git#${'3'.repeat(40)}`],
    'the repository is added when the manifest does not list it',
  );
  assert.equal(manifest.environment.GIT_REF, 'refs/tags/v1.0');
  assert.equal(manifestLocationOf(input('create', createPayload, { manifest_path: '.build.yml' }))?.commitId, HEAD);
});

test('a private repository is fetched over SSH when it has an SSH URL', () => {
  const adjusted = adjustManifest('image: x\n', 'm.yml', {
    repo: {
      ...{ fullName: 'acme/app', htmlUrl: repository.html_url, name: 'app', ownerLogin: 'acme', objectFormat: 'sha1' },
      cloneUrl: 'https://h/acme/app.git',
      sshUrl: 'git@h:acme/app.git',
      private: true,
    },
    commitId: HEAD,
    ref: 'refs/heads/main',
  });
  assert.ok('manifest' in adjusted);
  assert.deepEqual(parse(adjusted.manifest).sources, [`git@h:acme/app.git#${HEAD}`]);
});

test('nothing is sent without a manifest path, a readable manifest or a valid one; other events are not carried', () => {
  assert.deepEqual(sourcehutBuilds(input('push', pushPayload(), {}, { manifest: { text: MANIFEST } })), {
    kind: 'skip',
    reason:
      "sourcehut_builds hooks need a manifest path (manifest_path in the hook's settings), and this hook has none",
  });
  assert.equal(manifestLocationOf(input('push', pushPayload(), {})), null);
  assert.deepEqual(
    sourcehutBuilds(
      input('push', pushPayload(), META, { manifest: { error: 'could not open manifest ".builds/ci.yml" at x' } }),
    ),
    {
      kind: 'skip',
      reason: 'acme/app:refs/heads/main could not open manifest ".builds/ci.yml" at x',
    },
  );
  for (const bad of ['- a list', 'sources: nope', 'environment: [1]', 'key: [unclosed']) {
    assert.deepEqual(
      sourcehutBuilds(input('push', pushPayload(), META, { manifest: { text: bad } })),
      { kind: 'skip', reason: 'acme/app:refs/heads/main could not decode manifest ".builds/ci.yml"' },
      bad,
    );
  }
  assert.equal(manifestLocationOf(input('delete', {}, META)), null);
  assert.deepEqual(sourcehutBuilds(input('workflow_run', {}, META)), {
    kind: 'skip',
    reason: 'sourcehut_builds hooks do not carry workflow_run events',
  });
});
